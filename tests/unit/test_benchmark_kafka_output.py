"""The Kafka-to-Kafka throughput benchmark (benchmarks/kafka_output.py): its pure parts, no services."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks import kafka_output as ko

SS_BACKEND = "kafka-clients 3.9.2 (JVM)"


def _run(contender: str, guarantee: str, backend: str, rate: float, warmup: bool = False,
         seen: int = 100) -> dict[str, Any]:
    return {"contender": contender, "guarantee": guarantee, "backend": backend,
            "records_per_s": rate, "warmup": warmup, "read_committed": seen}


def _rows() -> list[dict[str, Any]]:
    rows = []
    for rates in ([1.0, 1.0, 1.0], [100.0, 50.0, 200.0], [300.0, 150.0, 400.0]):
        warmup = rates[0] == 1.0
        rows += [_run(ko.OURS, "at-least-once", "kafka-python", rates[0], warmup),
                 _run(ko.OURS, "exactly-once", "kafka-python", rates[1], warmup),
                 _run(ko.SS_SINK, "at-least-once", SS_BACKEND, rates[2], warmup)]
    return rows


def test_a_round_runs_both_guarantees_per_backend_then_the_structured_streaming_sink() -> None:
    assert ko.plan(["kafka-python", "confluent-kafka"], SS_BACKEND) == [
        (ko.OURS, "at-least-once", "kafka-python"), (ko.OURS, "exactly-once", "kafka-python"),
        (ko.OURS, "at-least-once", "confluent-kafka"),
        (ko.OURS, "exactly-once", "confluent-kafka"),
        (ko.SS_SINK, "at-least-once", SS_BACKEND)]


def test_a_round_without_structured_streaming_has_only_our_configurations() -> None:
    assert [c[0] for c in ko.plan(["kafka-python"], None)] == [ko.OURS, ko.OURS]


def test_the_median_leaves_out_warm_up_runs() -> None:
    alo, eo, ss = ko.summarise(_rows(), 100)
    assert (alo["median"], alo["runs"]) == (200.0, 2)
    assert (eo["median"], ss["median"]) == (100.0, 300.0)


def test_ratios_are_to_the_structured_streaming_median_and_exactly_once_to_at_least_once() -> None:
    alo, eo, ss = ko.summarise(_rows(), 100)
    assert alo["vs_ss"] == pytest.approx(200 / 300) and ss["vs_ss"] == 1.0
    assert eo["eo_vs_alo"] == pytest.approx(0.5)
    assert alo["eo_vs_alo"] is None and ss["eo_vs_alo"] is None


def test_exactly_once_is_compared_with_at_least_once_of_its_own_backend() -> None:
    rows = [_run(ko.OURS, "at-least-once", "kafka-python", 100.0),
            _run(ko.OURS, "at-least-once", "confluent-kafka", 400.0),
            _run(ko.OURS, "exactly-once", "confluent-kafka", 200.0)]
    assert ko.summarise(rows, 100)[2]["eo_vs_alo"] == pytest.approx(0.5)


def test_without_structured_streaming_the_ratio_to_it_is_absent() -> None:
    summary = ko.summarise([_run(ko.OURS, "at-least-once", "kafka-python", 100.0)], 100)
    assert summary[0]["vs_ss"] is None


def test_every_run_including_warm_ups_is_checked_against_the_input_count() -> None:
    rows = _rows()
    rows[0]["read_committed"] = 99  # a warm-up run that lost one record
    alo = ko.summarise(rows, 100)[0]
    assert (alo["verified"], alo["checked"]) == (2, 3)


def test_the_table_has_one_line_per_configuration_with_ratios_and_the_check() -> None:
    lines = ko.markdown_table(ko.summarise(_rows(), 100)).splitlines()
    assert lines[0].startswith("| contender | guarantee | backend | records/s (median) | runs |")
    assert len(lines) == 2 + 3
    assert lines[3] == "| dstream_kafka | exactly-once | kafka-python | 100 | 2 | 0.33x | 0.50x " \
                       "| 3/3 runs |"
    assert lines[4].endswith("| 1.00x | – | 3/3 runs |")


def test_the_report_says_when_a_run_failed_the_read_committed_check() -> None:
    rows = _rows()
    rows[-1]["read_committed"] = 101
    meta = {"command": "c", "commit": "abc", "records": 100, "value_bytes": 10,
            "partitions": 4, "repetitions": 2, "warmup": 1, "load_before": (1.0, 1.0, 1.0),
            "load_after": (2.0, 2.0, 2.0), "nproc": 2, "versions": "v"}
    text = ko.report(ko.summarise(rows, 100), meta)
    assert "**1 run(s) failed that check.**" in text
    assert "load average before: 1.00 1.00 1.00, after: 2.00 2.00 2.00" in text


def test_an_unknown_backend_is_refused_before_any_service_starts() -> None:
    with pytest.raises(SystemExit):
        ko.parse_args(["--backends", "kafka-python,librdkafka"])
