"""Unit tests for the multicore workload: task rows to figures, the table and the goals."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.adapter_multicore import multicore_summary, task_row
from benchmarks.contenders import base_name, contenders_for, is_fast, workload_kind
from benchmarks.harness import expand_plan, parse_args, workload_options
from benchmarks.report_multicore import (
    check_multicore_goals,
    multicore_lines,
    summarize_multicore,
)


def _row(batch: int, partition: int, pid: int, records: int, read_ms: float, seeks: int = 0,
         creations: int = 0) -> dict[str, Any]:
    return {"batch": batch, "partition": partition, "pid": pid, "records": records,
            "read_ms": read_ms, "seeks": seeks, "creations": creations}


RESOURCES = {"workers": 2, "consumers_cached": 8, "tcp_connections": 8, "workers_rss_mb": 200.0}


def test_a_task_tuple_becomes_a_row_with_milliseconds() -> None:
    row = task_row(3, (100, 10_000, 42, {}, 5, 0.25, 1, 0, 7))
    assert row == {"batch": 3, "partition": 5, "pid": 42, "records": 100, "read_ms": 250.0,
                   "seeks": 1, "creations": 0, "prepositions": 7}


def test_the_first_batch_is_left_out_of_the_steady_seeks() -> None:
    rows = [_row(0, p, 1, 1000, 10.0, seeks=1, creations=1) for p in range(4)]
    rows += [_row(b, p, 1, 1000, 10.0) for b in (1, 2) for p in range(4)]
    out = multicore_summary(rows, 4, {**RESOURCES, "consumers_cached": 4})
    assert out["steady_batches"] == 2
    assert out["seeks_per_batch"] == 0
    assert out["creations_after_warm"] == 0 and out["creations_total"] == 4
    assert out["consumers_per_partition"] == 1.0
    assert out["seek_overhead_share"] is None  # no task seeked: nothing to compare


def test_seek_overhead_is_the_seeking_tasks_extra_time_over_all_read_time() -> None:
    # steady: 2 plain tasks at 10 ms per 1,000 records, 2 seeking tasks at 15 ms
    rows = [_row(1, 0, 1, 1000, 10.0), _row(1, 1, 2, 1000, 10.0),
            _row(2, 0, 2, 1000, 15.0, seeks=1), _row(2, 1, 1, 1000, 15.0, seeks=1)]
    out = multicore_summary(rows, 2, RESOURCES)
    assert out["seeks_per_batch"] == 1.0
    assert out["seeking_tasks_share"] == 0.5
    assert out["read_ms_per_10k_no_seek"] == pytest.approx(100.0)
    assert out["read_ms_per_10k_seek"] == pytest.approx(150.0)
    assert out["seek_overhead_share"] == pytest.approx(10.0 / 50.0)
    assert out["consumers_per_partition"] == 4.0


def test_empty_tasks_do_not_count_as_steady_reads() -> None:
    rows = [_row(1, 0, 1, 0, 1.0, seeks=1), _row(1, 1, 1, 1000, 10.0)]
    out = multicore_summary(rows, 2, RESOURCES)
    assert out["seeks_per_batch"] == 0


def _run(cores: int, name: str, rate: float, figures: dict[str, Any], ok: bool = True) -> dict[str, Any]:
    return {"workload": f"multicore-c{cores}", "contender": name, "ok": ok, "warmup": False,
            "records_per_s": rate, "extra": {"multicore": figures}}


ONE = {"seeks_per_batch": 0.0, "seeking_tasks_share": 0.0, "consumers_per_partition": 1.0,
       "seek_overhead_share": None, "tcp_connections": 16, "workers": 1}
TWO = {"seeks_per_batch": 8.0, "seeking_tasks_share": 0.5, "consumers_per_partition": 2.0,
       "seek_overhead_share": 0.2, "tcp_connections": 32, "workers": 2}


def test_one_core_meets_both_goals_and_two_cores_miss_them_with_the_figures() -> None:
    runs = [_run(1, "dk-stream-cluster", 100.0, ONE), _run(2, "dk-stream-cluster", 120.0, TWO)]
    goals = {(g["workload"], g["goal"].split(" (")[0][:20]): g
             for g in check_multicore_goals(summarize_multicore(runs))}
    assert goals[("multicore-c1", "one consumer per par")]["met"] is True
    assert goals[("multicore-c1", "seeks per steady bat")]["met"] is True
    assert goals[("multicore-c2", "one consumer per par")]["met"] is False
    seek_goal = goals[("multicore-c2", "seeks per steady bat")]
    assert seek_goal["met"] is False
    assert "20.0% of read time" in seek_goal["measured"]


def test_seeks_with_a_cost_within_five_percent_meet_the_goal() -> None:
    cheap = {**TWO, "seek_overhead_share": 0.03}
    goals = check_multicore_goals(summarize_multicore([_run(2, "dk-stream-cluster", 1.0, cheap)]))
    assert [g["met"] for g in goals] == [False, True]


def test_failed_and_warm_up_runs_stay_out_of_the_summary() -> None:
    runs = [_run(2, "dk-stream-cluster", 120.0, TWO), _run(2, "dk-stream-cluster", 1.0, ONE, ok=False),
            {**_run(2, "dk-stream-cluster", 5.0, ONE), "warmup": True}]
    entry = summarize_multicore(runs)[2]["dk-stream-cluster"]
    assert entry["runs"] == 1 and entry["records_per_s"] == 120.0


def test_the_table_shows_each_core_count_relative_to_one_core() -> None:
    runs = [_run(1, "dk-stream-cluster", 100.0, ONE), _run(2, "dk-stream-cluster", 120.0, TWO)]
    text = "\n".join(multicore_lines(summarize_multicore(runs)))
    assert "| 2 | dk-stream-cluster | 120 | – | 1.20 | 8.0 | – | 50% |" in text
    assert "20.0%" in text


def test_multicore_expands_to_one_sub_workload_per_core_count() -> None:
    plan = expand_plan(["multicore"], [], [1], [1, 2, 4])
    assert list(plan) == ["multicore-c1", "multicore-c2", "multicore-c4"]
    assert [c.name for c in plan["multicore-c2"]] == ["dk-stream-cluster", "dk-stream-fast-cluster"]
    assert workload_kind("multicore-c4") == "multicore"


def test_each_multicore_sub_workload_gets_its_core_count_and_batches() -> None:
    options = workload_options(parse_args(["--executor-cores", "2,3", "--multicore-batches", "9"]))
    assert options["multicore-c3"] == {"executor_cores": 3, "batches": 9}


def test_bad_multicore_options_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--executor-cores", "0"])
    assert "--executor-cores needs counts >= 1" in capsys.readouterr().err


def test_the_fast_cluster_variant_runs_the_stream_on_the_fast_backend() -> None:
    assert base_name("dk-stream-fast-cluster") == "dk-stream"
    assert is_fast("dk-stream-fast-cluster") and is_fast("dk-rdd-fast")
    assert not is_fast("dk-stream-cluster")
    assert "multicore" in {w for c in contenders_for("multicore") for w in c.workloads}


def test_a_new_consumer_s_first_positioning_counts_as_its_creation_not_as_a_seek() -> None:
    rows = [_row(1, 0, 1, 1000, 30.0, seeks=1, creations=1), _row(1, 1, 2, 1000, 10.0),
            _row(2, 0, 1, 1000, 10.0), _row(2, 1, 2, 1000, 10.0)]
    out = multicore_summary(rows, 2, RESOURCES)
    assert out["seeks_per_batch"] == 0 and out["seeking_tasks_share"] == 0
    assert out["creations_after_warm"] == 1
    assert out["read_ms_per_10k_creation"] == pytest.approx(300.0)
    assert out["seek_overhead_share"] is None
