"""The planning workload's pure parts: its configurations, options, goals and table."""

from __future__ import annotations

import math

import pytest

from benchmarks.adapter_planning import planning_configs
from benchmarks.contenders import LATENCY_WORKLOADS, contenders_for
from benchmarks.harness import BATCH_WORKLOADS, parse_args, workload_options
from benchmarks.report import (
    all_goals,
    check_planning_goals,
    growth_exponent,
    markdown_report,
    summarize_latency,
)


def _entry(partitions: int, plan_ms: list[float], strategy: str = "Subscribe",
           topics: int = 1) -> dict:
    rows = [{"batch_time": 1000 * i, "records": 0, "plan": v, "plan_offsets": v / 2,
             "plan_rdd": v / 4, "commit": 1.0, "total": v + 5, "driver_py_mb": 120.0,
             "driver_jvm_mb": 700.0, "workers_mb": 60.0, "driver_tcp": 4.0}
            for i, v in enumerate(plan_ms)]
    return {"params": {"partitions": partitions, "topics": topics, "strategy": strategy,
                       "interval": 0.5, "output": "count"},
            "rows": rows, "warmup_rows": rows[:1]}


def _run(latency: dict, round_no: int = 0) -> dict:
    return {"contender": "dk-stream", "workload": "planning", "round": round_no, "warmup": False,
            "ok": True, "kind": "latency", "latency": latency}


RUN = _run({"p1": _entry(1, [8.0, 9.0, 10.0]), "p64": _entry(64, [9.0, 10.0, 11.0]),
            "p1000": _entry(1000, [40.0, 45.0, 90.0]),
            "t50": _entry(200, [20.0, 22.0, 24.0], "SubscribePattern", 50)})


def test_configurations_name_one_topic_per_count_and_the_pattern_topics() -> None:
    configs = planning_configs([1000, 1, 16, 16], 3, 4)
    assert list(configs) == ["p1", "p16", "p1000", "t3"]
    assert configs["p1000"] == {"topics": {"bench-planning-p1000": 1000}, "partitions": 1000}
    pattern = configs["t3"]
    assert pattern["partitions"] == 12
    assert sorted(pattern["topics"]) == [f"bench-planning-t3x4-{i:03d}" for i in range(3)]
    import re

    assert all(re.fullmatch(pattern["pattern"], t) for t in pattern["topics"])
    assert not any(re.fullmatch(pattern["pattern"], t) for t in configs if t.startswith("p"))
    assert "t0" not in planning_configs([1], 0, 4)


def test_the_planning_workload_runs_dk_stream_and_pools_batches() -> None:
    assert "planning" in LATENCY_WORKLOADS and "planning" in BATCH_WORKLOADS
    assert [c.name for c in contenders_for("planning")] == ["dk-stream"]


def test_planning_options_defaults_quick_preset_and_validation() -> None:
    args = parse_args(["--out", "/tmp/x"])
    assert args.planning_partitions == [1, 16, 64, 256, 1000]
    assert args.planning_topics == 50 and args.planning_topic_partitions == 4
    opts = workload_options(args)["planning"]
    assert list(opts["configs"]) == ["p1", "p16", "p64", "p256", "p1000", "t50"]
    assert (opts["interval"], opts["batches"]) == (0.5, 20)
    quick = parse_args(["--quick", "--out", "/tmp/x"])
    assert quick.planning_partitions == [1, 64, 1000]
    assert (quick.planning_topics, quick.planning_batches) == (10, 5)
    for bad in (["--planning-partitions", "0"], ["--planning-partitions", "x"],
                ["--planning-topics", "-1"], ["--planning-interval", "0"]):
        with pytest.raises(SystemExit):
            parse_args([*bad, "--out", "/tmp/x"])


def test_growth_exponent_is_the_log_slope_from_the_smallest_to_the_largest_count() -> None:
    assert growth_exponent([(1, 10.0), (1000, 10_000.0)]) == pytest.approx(1.0)
    assert growth_exponent([(1, 9.0), (64, 10.0), (1000, 45.0)]) == pytest.approx(
        math.log(5.0) / math.log(1000.0))
    assert growth_exponent([(16, 5.0)]) is None
    assert growth_exponent([(1, 0.0), (10, 1.0)]) is None


def test_planning_goals_take_the_largest_count_and_the_growth_from_the_smallest() -> None:
    goals = check_planning_goals(summarize_latency([RUN]))
    at_most, growth = goals
    assert at_most["value"] == 45.0  # p50 of 40, 45, 90 at 1,000 partitions
    assert at_most["met"] is True
    assert at_most["measured"] == "p50 plan ms by partitions: 1: 9.0, 64: 10.0, 1,000: 45.0"
    top = math.log(45.0 / 10.0) / math.log(1000 / 64)  # 64 to 1,000: the larger exponent
    assert growth["value"] == pytest.approx(top)
    assert growth["measured"].endswith(f"; 64 to 1,000: k = {top:.2f}")
    assert growth["met"] is True
    linear_top = _run({"p1": _entry(1, [10.0]), "p100": _entry(100, [10.0]),
                       "p1000": _entry(1000, [200.0])})  # flat, then 20x for 10x the partitions
    assert check_planning_goals(summarize_latency([linear_top]))[1]["met"] is False
    slow = _run({"p1": _entry(1, [1.0]), "p1000": _entry(1000, [2000.0])})
    at_most, growth = check_planning_goals(summarize_latency([slow]))
    assert at_most["met"] is False and growth["met"] is False
    assert check_planning_goals({}) == []


def test_the_pattern_stream_is_shown_but_judged_apart_from_the_partition_counts() -> None:
    goals = [g for g in all_goals([RUN]) if g["workload"] == "planning"]
    assert len(goals) == 2
    assert all("200" not in g["measured"].split("partitions:")[1] for g in goals[:1])
    report = markdown_report([RUN], {"machine": {}, "records": 0})
    assert "## Workload: planning" in report
    row = next(line for line in report.splitlines() if line.startswith("| dk-stream | t50 |"))
    assert "| SubscribePattern | 50 | 200 | 3 |" in row
    assert "| 22.0 / " in row  # plan p50
    p1000 = next(line for line in report.splitlines() if line.startswith("| dk-stream | p1000 |"))
    assert p1000.endswith("| 120 | 700 | 60 | 4 |")


def test_a_failed_configuration_is_named_in_the_table() -> None:
    run = _run({"p1": _entry(1, [5.0]), "p1000": {"params": {"partitions": 1000},
                                                 "error": "TimeoutError: 3 of 22 batches"}})
    report = markdown_report([run], {"machine": {}, "records": 0})
    assert "| dk-stream | p1000 | FAILED: TimeoutError: 3 of 22 batches |" in report
