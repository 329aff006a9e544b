"""The soak workload's pure logic: option checks, offset runs, the exactly-once check, the memory
and count judgements after the warm-up, the goals and the report section."""

from __future__ import annotations

from typing import Any, Sequence

import pytest

from benchmarks.adapter_soak import (
    cached_consumers,
    check_offsets,
    offset_runs,
    soak_option_errors,
    split_password,
    verify_exactly_once,
)
from benchmarks.harness import parse_args
from benchmarks.report_soak import (
    check_soak_goals,
    count_growth,
    finish_soak,
    kept_up,
    memory_growth,
    soak_lines,
    summarize_soak,
)


def samples(values: Sequence[float], key: str = "driver_py_mb", every: float = 10.0,
            start: float = 0.0) -> list[dict[str, Any]]:
    return [{"t": start + i * every, key: v} for i, v in enumerate(values)]


# -- options -----------------------------------------------------------------------------------


def test_the_default_soak_options_are_valid() -> None:
    assert soak_option_errors(30, 2000, 1.0, 5, 10) == []


@pytest.mark.parametrize("args, fragment", [
    ((0, 2000, 1.0, 0, 10), "--soak-minutes must be positive"),
    ((30, 0, 1.0, 5, 10), "--soak-rate must be at least 1"),
    ((30, 2000, 0.0, 5, 10), "--soak-interval must be positive"),
    ((30, 2000, 1.0, 5, -1), "--soak-sample-seconds must be positive"),
    ((30, 2000, 1.0, 30, 10), "--soak-warmup-minutes must be at least 0 and below"),
    ((30, 2000, 1.0, -1, 10), "--soak-warmup-minutes must be at least 0 and below"),
    ((2, 2000, 1.0, 1.5, 10), "fewer than 6 samples"),
])
def test_a_bad_soak_option_is_named_in_the_error(args: tuple, fragment: str) -> None:
    assert any(fragment in e for e in soak_option_errors(*args))


def test_the_command_line_rejects_a_warm_up_as_long_as_the_soak(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--workloads", "soak", "--soak-minutes", "3", "--soak-warmup-minutes", "3"])
    assert "--soak-warmup-minutes must be at least 0 and below --soak-minutes" in capsys.readouterr().err


def test_quick_shortens_the_soak_and_explicit_options_still_win() -> None:
    args = parse_args(["--quick", "--workloads", "soak", "--soak-rate", "500"])
    assert (args.soak_minutes, args.soak_warmup_minutes, args.soak_rate) == (2.0, 0.5, 500)


def test_the_soak_runs_only_when_named() -> None:
    assert "soak" not in parse_args([]).workloads
    assert parse_args(["--workloads", "soak"]).workloads == ["soak"]


# -- offsets and exactly-once ------------------------------------------------------------------


def test_offset_runs_split_at_a_gap_and_at_a_repeat() -> None:
    assert offset_runs([5, 6, 7, 9, 9]) == [(5, 8), (9, 10), (9, 10)]
    assert offset_runs([]) == []


def test_rows_that_tile_every_partition_are_exactly_once() -> None:
    rows = [(0, 0, 5), (0, 5, 10), (1, 3, 8)]
    out = check_offsets({0: 0, 1: 3}, {0: 10, 1: 8}, rows)
    assert out["ok"] and (out["stored"], out["expected"]) == (15, 15)


def test_the_exactly_once_check_finds_a_duplicate() -> None:
    out = check_offsets({0: 0}, {0: 10}, [(0, 0, 6), (0, 4, 10)])
    assert (out["duplicates"], out["missing"], out["ok"]) == (2, 0, False)
    assert "offsets [4, 6) stored more than once" in out["examples"][0]


def test_the_exactly_once_check_finds_a_gap_and_a_missing_tail() -> None:
    out = check_offsets({0: 0}, {0: 10}, [(0, 0, 3), (0, 5, 8)])
    assert (out["duplicates"], out["missing"]) == (0, 4)
    assert out["examples"] == ["partition 0: offsets [3, 5) missing", "partition 0: offsets [8, 10) missing"]


def test_a_partition_with_no_rows_is_missing_whole() -> None:
    out = check_offsets({0: 0, 1: 0}, {0: 2, 1: 3}, [(0, 0, 2)])
    assert out["missing"] == 3 and not out["ok"]


def test_rows_outside_the_topic_offsets_are_counted_apart() -> None:
    out = check_offsets({0: 5}, {0: 10}, [(0, 3, 10), (7, 0, 1)])
    assert (out["outside"], out["missing"], out["duplicates"]) == (3, 0, 0)


def test_verification_needs_the_producer_count_and_committed_offsets_at_the_end() -> None:
    rows = [(0, 0, 10)]
    good = verify_exactly_once({0: 0}, {0: 10}, rows, produced=10, committed={0: 10})
    assert good["exactly_once"] and good["problems"] == []
    short = verify_exactly_once({0: 0}, {0: 10}, rows, produced=12, committed={0: 9})
    assert not short["exactly_once"]
    assert short["problems"] == ["the sink holds 10 records, the producer wrote 12",
                                 "committed offsets differ from the end offsets: partition 0: 9 != 10"]


def test_cached_consumers_count_only_live_workers() -> None:
    latest = {11: {"cached": 2}, 12: {"cached": 3}, 13: {"cached": 4}}
    assert cached_consumers(latest, {11, 12}) == 5


def test_the_password_leaves_the_parameters_for_the_environment() -> None:
    params: dict[str, Any] = {"postgres": {"host": "127.0.0.1", "port": 5, "password": "s3cret"},
                              "zookeeper": "h:1"}
    public, env = split_password(params)
    assert "s3cret" not in repr(public)
    assert env == {"PGPASSWORD": "s3cret"}
    assert params["postgres"]["password"] == "s3cret"  # the caller's dict is untouched
    assert split_password({"postgres": {"host": "h"}}) == ({"postgres": {"host": "h"}}, {})


# -- memory and counts -------------------------------------------------------------------------


def test_flat_memory_after_warm_up_meets_the_goal() -> None:
    # warm-up growth (100 -> 200) is left out; afterwards within 1 %
    values = [100, 150, 200, *[200 + (i % 3) for i in range(18)]]
    out = memory_growth(samples(values), "driver_py_mb", warmup_seconds=30)
    assert out["met"] is True and abs(out["growth"]) < 0.01


def test_memory_that_grows_ten_percent_after_warm_up_misses_the_goal() -> None:
    values = [200 + 20 * i / 17 for i in range(18)]
    out = memory_growth(samples(values), "driver_py_mb", window_seconds=40)
    assert out["met"] is False and out["growth"] == pytest.approx(0.085, abs=0.01)


def test_one_noisy_memory_sample_in_the_last_window_is_tolerated() -> None:
    values = [200.0] * 18
    values[-2] = 260.0  # one 30 % spike
    out = memory_growth(samples(values), "driver_py_mb", window_seconds=40)
    assert out["met"] is True and out["growth"] == 0


def test_memory_after_the_producer_stopped_is_not_judged() -> None:
    values = [200.0] * 12 + [400.0] * 3
    assert memory_growth(samples(values), "driver_py_mb", end_seconds=110)["met"] is True


def test_memory_with_too_few_samples_is_not_judged() -> None:
    out = memory_growth(samples([1.0, 2.0, 3.0]), "driver_py_mb")
    assert out["met"] is None and "fewer than 3" in out["reason"]


def test_a_growing_file_descriptor_count_is_detected() -> None:
    out = count_growth(samples([50, 50, 51, 52, 53, 54, 55, 56, 57], "driver_jvm_fds"), "driver_jvm_fds")
    assert out["met"] is False and (out["first_max"], out["last_max"]) == (51, 57)


def test_a_count_that_rises_and_falls_back_is_no_growth() -> None:
    out = count_growth(samples([40, 44, 40, 41, 40, 40, 41, 40, 40], "workers_threads"), "workers_threads")
    assert out["met"] is True


def test_counts_during_the_warm_up_are_left_out() -> None:
    values = [1, 2, 3, 4, 4, 4, 4, 4, 4, 4]
    assert count_growth(samples(values, "consumers"), "consumers", warmup_seconds=30)["met"] is True
    assert count_growth(samples(values, "consumers"), "consumers")["met"] is False


# -- goals and report --------------------------------------------------------------------------


def soak_run(mb: float = 300.0, growth: float = 0.0, fds_growth: int = 0, eo: bool = True) -> dict[str, Any]:
    n = 19
    rows = []
    for i in range(n):
        rows.append({"t": i * 10.0, "driver_py_mb": mb * (1 + growth * i / (n - 1)),
                     "driver_jvm_mb": 900.0, "workers_mb": 150.0,
                     "driver_py_fds": 40, "driver_jvm_fds": 400 + (fds_growth * i // (n - 1)),
                     "workers_fds": 60, "driver_py_threads": 30, "driver_jvm_threads": 90,
                     "workers_threads": 12, "consumers": 4, "broker_tcp": 6, "postgres_tcp": 2,
                     "lag": 1500})
    batches = [{"t": i * 1.0, "records": 2000, "scheduling_ms": 5, "processing_ms": 300}
               for i in range(180)]
    verified = verify_exactly_once({0: 0}, {0: 360_000}, [(0, 0, 360_000 if eo else 359_990)],
                                   360_000, {0: 360_000})
    soak = {"params": {"minutes": 3, "rate": 2000, "interval": 1.0, "warmup_minutes": 0,
                       "sample_seconds": 10, "partitions": 4},
            "warmup_seconds": 0.0, "producing_seconds": 180.0, "producer": {"records": 360_000},
            "drained": True, "drain_seconds": 1.2, "samples": rows, "batches": batches,
            "exactly_once": verified}
    record = {"contender": "dk-stream", "workload": "soak", "round": 0, "warmup": False, "ok": False}
    return finish_soak(record, {"records": 360_000, "seconds": 190.0, "cpu_seconds": 100.0,
                                "soak": soak, "extra": {}})


def goal(goals: list[dict[str, Any]], fragment: str) -> dict[str, Any]:
    return next(g for g in goals if fragment in g["goal"])


def test_a_steady_soak_meets_every_goal() -> None:
    goals = check_soak_goals([soak_run()])
    assert len(goals) == 9
    assert all(g["met"] is True for g in goals), [g for g in goals if not g["met"]]
    assert {"goal", "workload", "contender", "value", "limit", "measured", "met"} <= set(goals[0])


def test_a_leaking_driver_misses_only_its_memory_goal() -> None:
    goals = check_soak_goals([soak_run(growth=0.2)])
    assert goal(goals, "driver Python memory")["met"] is False
    assert goal(goals, "driver JVM memory")["met"] is True


def test_a_growing_jvm_fd_count_misses_the_fd_goal() -> None:
    goals = check_soak_goals([soak_run(fds_growth=30)])
    row = goal(goals, "open file descriptors")
    assert row["met"] is False and "driver JVM 400 -> 430" in row["measured"]


def test_a_gap_in_the_sink_misses_the_exactly_once_goal() -> None:
    row = goal(check_soak_goals([soak_run(eo=False)]), "exactly-once")
    assert row["met"] is False and "10 missing" in row["measured"]


def test_a_stream_that_falls_behind_does_not_keep_up() -> None:
    run = soak_run()
    for s in run["soak"]["samples"]:
        s["lag"] = s["t"] * 100  # grows to 18,000 records: 9 s of input
    assert kept_up(run["soak"])["met"] is False
    run = soak_run()
    for b in run["soak"]["batches"]:
        b["scheduling_ms"] = b["t"] * 10
    assert kept_up(run["soak"])["met"] is False


def test_the_report_section_shows_the_judgement_and_the_samples() -> None:
    text = "\n".join(soak_lines(summarize_soak([soak_run(growth=0.2)])))
    assert "## Workload: soak" in text
    assert "| driver Python MiB (window medians) |" in text and "| NO |" in text
    assert "Exactly-once: yes: 360,000 offsets stored" in text
    assert soak_lines({}) == []


def test_a_soak_run_without_samples_is_a_failed_run() -> None:
    record = finish_soak({"ok": False}, {"records": 0, "soak": {"samples": []}})
    assert record["ok"] is False and record["error"] == "the soak took no samples"
