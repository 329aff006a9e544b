"""The benchmark harness's pure logic: medians, spreads, ratios within a run, goals, the table."""

from __future__ import annotations

import pytest

from benchmarks.adapter import CacheTracker
from benchmarks.contenders.jvm import parse_consumer_perf
from benchmarks.harness import _check_checksums, parse_args
from benchmarks.report import (
    check_goals,
    markdown_report,
    median_spread,
    paired_ratios,
    ratio,
    summarize,
)


def _run(contender: str, rate: float, round_no: int, workload: str = "drain", ok: bool = True,
         warmup: bool = False, **extra: object) -> dict:
    return {"contender": contender, "workload": workload, "round": round_no, "warmup": warmup,
            "ok": ok, "records_per_s": rate, "mb_per_s": rate * 100 / 1e6,
            "cpu_s_per_million": 1e6 / rate, "peak_rss_driver_mb": 500.0,
            "peak_rss_workers_mb": 100.0, **extra}


RUNS = [
    _run("dk-rdd", 1_000_000, 0, warmup=True),  # warm-up: must not count
    _run("raw-kafka-python", 1.0, 0, warmup=True),
    _run("dk-rdd", 90.0, 1), _run("raw-kafka-python", 100.0, 1), _run("ss-batch", 300.0, 1),
    _run("dk-rdd", 80.0, 2), _run("raw-kafka-python", 100.0, 2), _run("ss-batch", 200.0, 2),
    _run("dk-rdd", 100.0, 3), _run("raw-kafka-python", 125.0, 3), _run("ss-batch", 250.0, 3),
    _run("dk-rdd", 5.0, 4, ok=False, error="boom"),  # failed: must not count
]


def test_median_spread_odd_even_and_empty() -> None:
    assert median_spread([3, 1, 2]) == {"n": 3, "median": 2.0, "min": 1.0, "max": 3.0, "spread": 1.0}
    assert median_spread([1, 2, 3, 4])["median"] == 2.5
    assert median_spread([None, 4.0])["n"] == 1
    assert median_spread([]) == {"n": 0, "median": None, "min": None, "max": None, "spread": None}


def test_summarize_skips_warmup_and_failed_runs() -> None:
    summary = summarize(RUNS)
    dk = summary["drain"]["dk-rdd"]["records_per_s"]
    assert dk["n"] == 3
    assert dk["median"] == 90.0
    assert dk["max"] == 100.0
    assert dk["spread"] == pytest.approx(20 / 90)


def test_ratio_is_of_medians_within_the_run() -> None:
    summary = summarize(RUNS)
    assert ratio(summary, "drain", "dk-rdd", "raw-kafka-python") == pytest.approx(0.9)
    assert ratio(summary, "drain", "dk-rdd", "ss-batch") == pytest.approx(90 / 250)
    assert ratio(summary, "drain", "dk-rdd", "kafka-perf") is None
    assert ratio(summary, "json", "dk-rdd", "ss-udf") is None


def test_paired_ratios_follow_rounds() -> None:
    assert paired_ratios(RUNS, "drain", "dk-rdd", "raw-kafka-python") == pytest.approx([0.9, 0.8, 0.8])


def test_goals_report_met_missed_and_unmeasured() -> None:
    goals = {(g["contender"], g["baseline"]): g for g in check_goals(summarize(RUNS))}
    assert goals[("dk-rdd", "raw-kafka-python")]["met"] is True
    assert goals[("dk-rdd", "ss-batch")]["met"] is False
    assert goals[("dk-rdd", "ss-udf")]["met"] is None


def test_markdown_table_has_ratios_goals_and_failures() -> None:
    meta = {"records": 1000, "value_bytes": 100, "partitions": 4, "repetitions": 3, "warmup": 1,
            "machine": {"nproc": 2, "memory_gib": 24}}
    text = markdown_report(RUNS, meta)
    assert "| ss-batch | 250 |" in text  # sorted fastest first, median shown
    assert "0.90 (0.80–0.90)" in text  # dk-rdd vs raw-kafka-python: median ratio and round range
    assert "drain >= 0.8x raw client loop (kafka-python) | 0.90x | yes" in text
    assert "dk-rdd round 4: boom" in text


def test_cache_tracker_per_batch_deltas() -> None:
    tracker = CacheTracker()
    tracker.add_batch([(10, 0, 1, {"creations": 2, "seeks": 2, "polls": 5}),
                       (10, 0, 2, {"creations": 2, "seeks": 2, "polls": 4})])
    tracker.add_batch([(10, 0, 1, {"creations": 2, "seeks": 2, "polls": 9}),
                       (10, 0, 2, {"creations": 3, "seeks": 3, "polls": 6})])
    tracker.add_batch([(10, 0, 1, {"creations": 2, "seeks": 2, "polls": 12})])
    s = tracker.summary()
    assert s["first_batch"]["creations"] == 4
    assert s["after_first_total"]["creations"] == 1
    assert s["after_first_total"]["seeks"] == 1
    assert s["after_first_max_per_batch"]["polls"] == 6
    assert s["batches"] == 3


def test_consumer_perf_line_is_parsed() -> None:
    out = ("WARN something\n2026-11-21 13:00:00:000, 2026-11-21 13:00:02:000, 190.7349, 95.3674, "
           "2000000, 1000000.0000, 120, 1880, 101.4547, 1063829.7872\n")
    parsed = parse_consumer_perf(out)
    assert parsed["records"] == 2_000_000
    assert parsed["seconds"] == pytest.approx(1.88)
    assert parsed["extra"]["rebalance_ms"] == 120


def test_checksum_disagreement_is_reported() -> None:
    runs = [{"ok": True, "workload": "json", "checksum": 5, "contender": "a"},
            {"ok": True, "workload": "json", "checksum": 6, "contender": "b"},
            {"ok": False, "workload": "json", "checksum": 7, "contender": "c"}]
    assert _check_checksums(runs) == ["json: checksums differ: {5: ['a'], 6: ['b']}"]
    assert _check_checksums(runs[:1]) == []


def test_quick_preset_and_explicit_options() -> None:
    args = parse_args(["--quick", "--repetitions", "2", "--workloads", "drain", "--out", "/tmp/x"])
    assert args.records == 200_000
    assert args.repetitions == 2
    assert args.warmup == 0
    assert args.workloads == ["drain"]
    with pytest.raises(SystemExit):
        parse_args(["--workloads", "nope"])
