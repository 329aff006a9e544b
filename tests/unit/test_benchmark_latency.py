"""The Kafka-to-Kafka latency workload's (``k2k``) pure logic: the source-timestamp header, a
row's percentiles and counts, pooling runs, issue #30's goals and the report section."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from benchmarks.harness import OPT_IN_WORKLOADS, parse_args
from benchmarks.latency import child_argv, latency_row, source_ts
from benchmarks.report import all_goals, markdown_report, summarize
from benchmarks.report_k2k import check_k2k_goals, k2k_lines, k2k_variants, row_held, summarize_k2k


def _row(variant: str, rate: int, p50: float, p99: float, **extra: Any) -> dict[str, Any]:
    return {"variant": variant, "rate": rate, "records": 100, "batches": 10, "p50": p50,
            "p99": p99, "max": p99 + 10, "produced": rate * 10, "produced_per_s": float(rate),
            "missing": 0, **extra}


def _variants(rows: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [{"variant": v, "rows": r} for v, r in rows.items()]


def test_source_ts_reads_the_source_ts_header_as_milliseconds() -> None:
    assert source_ts([("other", b"x"), ("source-ts", b"1700000000123")]) == 1700000000123


def test_source_ts_of_a_record_without_the_header_is_none() -> None:
    assert source_ts(None) is None
    assert source_ts([("other", b"1")]) is None


def test_latency_row_gives_nearest_rank_percentiles_the_max_and_the_missing_records() -> None:
    row = latency_row(Counter({10: 98, 300: 1, 900: 1}), produced=1000, produced_seconds=2.0,
                      expected=1001, read=995)
    assert (row["p50"], row["p99"], row["max"]) == (10.0, 300.0, 900)
    assert row["records"] == 100
    assert row["produced_per_s"] == 500.0
    assert row["missing"] == 6


def test_latency_row_of_no_records_has_no_percentiles() -> None:
    row = latency_row(Counter(), produced=0, produced_seconds=0.0, expected=1, read=1)
    assert (row["p50"], row["p99"], row["max"], row["produced_per_s"]) == (None, None, None, None)


def test_a_rate_is_held_only_with_nothing_missing_the_rate_produced_and_p99_under_a_second() -> None:
    entry = summarize_k2k(_variants({"dk-alo": [_row("dk-alo", 1000, 50, 900)]}))["dk-alo"][1000]
    assert row_held(entry)
    assert not row_held({**entry, "p99": 1000.0})
    assert not row_held({**entry, "missing": 1})
    assert not row_held({**entry, "produced_per_s": 900.0})


def test_summarize_k2k_pools_the_runs_of_a_variant_by_the_median_per_rate() -> None:
    variants = _variants({"dk-alo": [_row("dk-alo", 1000, 50, 100)]}) + \
        _variants({"dk-alo": [_row("dk-alo", 1000, 70, 300)]}) + \
        _variants({"dk-alo": [_row("dk-alo", 1000, 90, 200)]})
    entry = summarize_k2k(variants)["dk-alo"][1000]
    assert (entry["runs"], entry["p50"], entry["p99"], entry["batches"]) == (3, 70.0, 200.0, 30)


def test_the_goals_are_met_when_ours_is_fast_at_1k_half_of_ss_and_holds_as_high() -> None:
    summary = summarize_k2k(_variants({
        "dk-eo": [_row("dk-eo", 1000, 90, 240), _row("dk-eo", 10000, 150, 900)],
        "ss-pt0": [_row("ss-pt0", 1000, 300, 800), _row("ss-pt0", 10000, 400, 1200)],
        "ss-pt1": [_row("ss-pt1", 1000, 700, 1100), _row("ss-pt1", 10000, 800, 1300)]}))
    goals = check_k2k_goals(summary)
    assert [g["met"] for g in goals] == [True, True, True]
    assert "1,000/s: 0.30x ss-pt0" in goals[1]["measured"]  # against SS's better trigger


def test_the_goals_name_each_miss() -> None:
    summary = summarize_k2k(_variants({
        "dk-alo": [_row("dk-alo", 1000, 120, 240), _row("dk-alo", 10000, 250, 1500)],
        "ss-pt0": [_row("ss-pt0", 1000, 300, 800), _row("ss-pt0", 10000, 400, 900)]}))
    goals = check_k2k_goals(summary)
    assert [g["met"] for g in goals] == [False, False, False]
    assert goals[2]["measured"] == "1,000/s against 10,000/s"


def test_the_held_rate_goal_says_none_when_no_rate_was_held() -> None:
    summary = summarize_k2k(_variants({"dk-alo": [_row("dk-alo", 1000, 900, 2000)],
                                       "ss-pt0": [_row("ss-pt0", 1000, 900, 1500)]}))
    goal = check_k2k_goals(summary)[2]
    assert (goal["measured"], goal["met"]) == ("none against none", False)


def test_the_goals_against_structured_streaming_are_not_measured_without_it() -> None:
    goals = check_k2k_goals(summarize_k2k(_variants({"dk-alo": [_row("dk-alo", 1000, 50, 90)]})))
    assert [g["met"] for g in goals] == [True, None, None]


def test_a_failed_variant_is_a_failed_row_in_the_report_and_no_goal_of_ours() -> None:
    variants = [{"variant": "ss-rtm", "error": "AnalysisException: not supported"}]
    lines = "\n".join(k2k_lines(variants, {"seconds": 10, "warmup": 3}))
    assert "| ss-rtm | – | failed: AnalysisException: not supported |" in lines
    assert check_k2k_goals(summarize_k2k(variants)) == []


def test_the_report_names_the_real_time_mode_anchor_and_every_row() -> None:
    lines = "\n".join(k2k_lines(_variants({"dk-alo": [_row("dk-alo", 1000, 50, 90)],
                                           "ss-pt0": [_row("ss-pt0", 1000, 300, 800)]}),
                                {"seconds": 60, "warmup": 10}))
    assert "p50 69-70 ms, p99 84-85 ms" in lines and "15 cores" in lines
    assert "for 60 s (records of the first 10 s dropped)" in lines
    assert "| dk-alo | 1,000 | 1,000 | 100 | 10 | 50 | 90 | 100 | 0 | yes |" in lines


def _record(variant: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"contender": variant, "workload": "k2k", "kind": "k2k", "round": 0, "warmup": False,
            "ok": True, "rows": rows}


def test_k2k_runs_reach_the_report_and_its_goals_but_not_the_throughput_tables() -> None:
    runs = [_record("dk-alo", [_row("dk-alo", 1000, 50, 90)]),
            _record("ss-pt0", [_row("ss-pt0", 1000, 300, 800)])]
    assert summarize(runs) == {}
    assert len(k2k_variants(runs)) == 2
    assert [g["workload"] for g in all_goals(runs)] == ["k2k"] * 3
    report = markdown_report(runs, {"records": 0, "k2k": {"seconds": 60, "warmup": 10}})
    assert "## Workload: k2k" in report and "| k2k | dk-alo: p50 <= 100 ms" in report


def test_k2k_is_opt_in_and_its_options_are_checked() -> None:
    assert "k2k" in OPT_IN_WORKLOADS
    args = parse_args(["--workloads", "k2k", "--k2k-rates", "1000,50000", "--k2k-variants",
                       "dk-eo,ss-pt0", "--out", "/tmp/unused"])
    assert (args.k2k_rates, args.k2k_variants) == ([1000, 50000], ["dk-eo", "ss-pt0"])
    with pytest.raises(SystemExit):
        parse_args(["--workloads", "k2k", "--k2k-variants", "dk-nope", "--out", "/tmp/unused"])


def test_k2k_runs_the_fast_backend_variants_only_when_named() -> None:
    args = parse_args(["--workloads", "k2k", "--out", "/tmp/unused"])
    assert args.k2k_variants == ["dk-alo", "dk-eo", "ss-pt0", "ss-pt1", "ss-rtm"]
    args = parse_args(["--workloads", "k2k", "--k2k-variants", "dk-eo-fast", "--out", "/tmp/unused"])
    assert args.k2k_variants == ["dk-eo-fast"]


def test_a_variant_process_gets_the_broker_its_rates_and_its_result_file(tmp_path: Any) -> None:
    argv = child_argv("127.0.0.1:9092", "dk-eo", [1000, 10000], 60.0, 10.0, tmp_path / "r.json")
    assert argv[1:] == ["-m", "benchmarks.latency", "--bootstrap", "127.0.0.1:9092", "--variants",
                        "dk-eo", "--rates", "1000,10000", "--seconds", "60", "--warmup", "10",
                        "--json", str(tmp_path / "r.json")]
