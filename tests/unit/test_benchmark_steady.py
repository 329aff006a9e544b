"""The steady-rate workload's pure logic: latency percentiles, lag at commits, stable-lag
detection, the producer's summary line, and the steady section of the report."""

from __future__ import annotations

import pytest

from benchmarks.report_steady import steady_lines, summarize_steady
from benchmarks.steady import (
    SteadyRecorder,
    highest_rate_held,
    lag_at_commits,
    lag_trend,
    latency_histogram,
    parse_producer_perf,
    timestamp_histogram,
    weighted_percentile,
)


def test_weighted_percentile_uses_the_nearest_rank() -> None:
    assert weighted_percentile({1: 1, 2: 1, 3: 1, 4: 1}, 50) == 2.0


def test_weighted_percentile_weighs_values_by_their_counts() -> None:
    hist = {10: 98, 500: 2}
    assert weighted_percentile(hist, 50) == 10.0
    assert weighted_percentile(hist, 98) == 10.0
    assert weighted_percentile(hist, 99) == 500.0


def test_weighted_percentile_of_an_empty_histogram_is_none() -> None:
    assert weighted_percentile({}, 50) is None
    assert weighted_percentile({5: 0}, 99) is None


def test_weighted_percentile_rejects_a_percentile_outside_0_to_100() -> None:
    with pytest.raises(ValueError):
        weighted_percentile({1: 1}, 101)


def test_percentile_zero_and_hundred_are_the_extremes() -> None:
    hist = {3: 5, 7: 1, 1: 2}
    assert weighted_percentile(hist, 0) == 1.0
    assert weighted_percentile(hist, 100) == 7.0


def test_timestamp_histogram_counts_records_per_millisecond() -> None:
    assert timestamp_histogram([5, 5, 6]) == {5: 2, 6: 1}


def test_latency_is_commit_time_minus_record_timestamp_per_batch() -> None:
    batches = [(1_000.0, {900: 2, 990: 1}), (2_000.4, {1_900: 1})]
    assert latency_histogram(batches) == {100: 3, 10: 1}


def test_lag_at_a_commit_interpolates_the_end_offset_between_probe_samples() -> None:
    ends = [(10.0, 1_000), (11.0, 2_000)]
    assert lag_at_commits([(10.5, 1_200)], ends) == [(10.5, 300.0)]


def test_lag_outside_the_probe_samples_holds_the_nearest_sample() -> None:
    ends = [(10.0, 1_000), (11.0, 2_000)]
    assert lag_at_commits([(9.0, 900), (12.0, 1_500)], ends) == [(9.0, 100.0), (12.0, 500.0)]


def test_lag_is_never_negative_and_empty_without_samples() -> None:
    assert lag_at_commits([(10.0, 5_000)], [(10.0, 4_000)]) == [(10.0, 0.0)]
    assert lag_at_commits([(10.0, 5_000)], []) == []


def test_a_flat_lag_is_stable() -> None:
    samples = [(float(t), 1_000.0 + (50 if t % 2 else -50)) for t in range(10)]
    assert lag_trend(samples, rate=10_000, interval=1.0)["stable"] is True


def test_a_lag_growing_faster_than_one_interval_per_half_step_is_not_stable() -> None:
    # 10,000/s produced, 7,000/s consumed: the lag grows 3,000 records a second.
    samples = [(float(t), 3_000.0 * t) for t in range(10)]
    trend = lag_trend(samples, rate=10_000, interval=1.0)
    assert trend["slope_per_s"] == pytest.approx(3_000.0)
    assert trend["stable"] is False


def test_only_the_last_half_of_the_step_decides_stability() -> None:
    # A start-up backlog in the first half that the stream then holds flat.
    samples = [(float(t), 20_000.0 if t < 5 else 8_000.0) for t in range(10)]
    assert lag_trend(samples, rate=10_000, interval=1.0)["stable"] is True


def test_too_few_commits_are_not_judged() -> None:
    assert lag_trend([(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)], rate=100, interval=1.0)["stable"] is None


def test_highest_rate_held_is_the_highest_stable_step() -> None:
    steps = [{"rate": 10_000, "stable": True}, {"rate": 50_000, "stable": False},
             {"rate": 25_000, "stable": True}, {"rate": 100_000, "stable": None}]
    assert highest_rate_held(steps) == 25_000
    assert highest_rate_held([{"rate": 10_000, "stable": False}]) is None


PRODUCER_OUTPUT = """\
49981 records sent, 9994.2 records/sec (0.95 MB/sec), 3.1 ms avg latency, 210.0 ms max latency.
80000 records sent, 9998.750156 records/sec (0.95 MB/sec), 2.46 ms avg latency, 210.00 ms max \
latency, 2 ms 50th, 4 ms 95th, 12 ms 99th, 150 ms 99.9th.
"""


def test_producer_summary_line_is_parsed() -> None:
    out = parse_producer_perf(PRODUCER_OUTPUT)
    assert out["records"] == 80_000
    assert out["records_per_s"] == pytest.approx(9998.750156)
    assert out["send_p50_ms"] == 2.0
    assert out["send_p99_ms"] == 12.0


def test_producer_output_without_a_summary_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_producer_perf("49981 records sent, 9994.2 records/sec (0.95 MB/sec), 3.1 ms avg "
                            "latency, 210.0 ms max latency.\n")


def test_recorder_tracks_committed_offsets_across_partial_batches() -> None:
    rec = SteadyRecorder({0: 100, 1: 200})
    rec.begin("10000/s")
    rec.add_batch(1_000.0, {5: 1}, {0: 150}, 50)
    rec.add_batch(2_000.0, {6: 1}, {1: 260}, 60)
    assert rec.committed() == 410
    assert [b["committed"] for b in rec.batches["10000/s"]] == [350, 410]


def _steady_run(contender: str, steps: list[dict], ok: bool = True) -> dict:
    return {"contender": contender, "workload": "steady", "kind": "steady", "round": 0,
            "warmup": False, "ok": ok, "steps": steps}


def _step(rate: int, p50: float, p99: float, stable: bool | None, **extra: object) -> dict:
    return {"step": f"{rate}/s", "rate": rate, "latency_ms": {"p50": p50, "p90": p50, "p99": p99,
                                                               "max": p99},
            "stable": stable, "trend": {"growth": 500.0, "limit": rate * 1.0},
            "producer": {"records_per_s": rate * 0.99}, "batches": 10, "creations": 0,
            "seeks": 0, **extra}


def test_steady_summary_skips_the_warmup_step_and_pools_runs_per_rate() -> None:
    runs = [_steady_run("dk-stream", [_step(10_000, 900, 1_500, True, warmup=True),
                                      _step(10_000, 1_000, 1_800, True)]),
            _steady_run("dk-stream", [_step(10_000, 1_200, 2_000, True)])]
    entry = summarize_steady(runs)["dk-stream"]["rates"][10_000]
    assert entry["runs"] == 2
    assert entry["p50"] == 1_100.0
    assert entry["batches"] == 20


def test_a_rate_is_held_only_when_every_run_was_stable() -> None:
    runs = [_steady_run("dk-stream", [_step(10_000, 1_000, 1_800, True), _step(50_000, 1, 2, True)]),
            _steady_run("dk-stream", [_step(10_000, 1_000, 1_800, True), _step(50_000, 1, 2, False)])]
    summary = summarize_steady(runs)["dk-stream"]
    assert summary["rates"][50_000]["held"] is False
    assert summary["highest_held"] == 10_000


def test_steady_table_divides_latency_by_structured_streaming_at_the_same_rate() -> None:
    runs = [_steady_run("dk-stream", [_step(10_000, 1_000, 2_000, True)]),
            _steady_run("ss-stream", [_step(10_000, 500, 1_000, True)]),
            _steady_run("dk-stream-fast", [{"step": "50000/s", "rate": 50_000, "stable": None,
                                            "skipped": "the 10000/s step did not drain"}])]
    text = "\n".join(steady_lines(summarize_steady(runs), 1.0))
    dk_row = next(line for line in text.splitlines() if line.startswith("| dk-stream | 10,000"))
    assert dk_row.endswith("| 2.00 | 2.00 |")
    assert "| dk-stream-fast | 50,000 |" in text and "skipped" in text
    assert "Highest rate held (stable lag in every run): dk-stream 10,000/s; dk-stream-fast none" in text


def test_quick_preset_runs_two_short_rate_steps_unless_rates_are_given() -> None:
    from benchmarks.harness import parse_args

    quick = parse_args(["--quick", "--out", "/tmp/x"])
    assert quick.rates == [10_000, 50_000]
    assert quick.steady_seconds == 8.0
    assert parse_args(["--quick", "--rates", "20000", "--out", "/tmp/x"]).rates == [20_000]
    assert parse_args(["--out", "/tmp/x"]).rates == [10_000, 25_000, 50_000, 100_000]


def test_rates_must_be_positive() -> None:
    from benchmarks.harness import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--rates", "0", "--out", "/tmp/x"])


def test_per_batch_workloads_run_batch_repetitions_and_no_warmup_round() -> None:
    from benchmarks.harness import parse_args, rounds_for

    args = parse_args(["--repetitions", "3", "--warmup", "1", "--batch-repetitions", "2",
                       "--out", "/tmp/x"])
    assert rounds_for("steady", args) == (0, 2)
    assert rounds_for("overhead", args) == (0, 2)
    assert rounds_for("exactly-once", args) == (0, 2)
    assert rounds_for("drain", args) == (1, 3)
    assert rounds_for("partitions-p4", args) == (1, 3)


def test_a_steady_run_without_a_measured_step_fails_with_the_skip_reason() -> None:
    from benchmarks.harness import Runner

    steps = [{"step": "warm-up", "rate": 10_000, "warmup": True, "batches": 3},
             {"step": "10000/s", "rate": 10_000, "skipped": "the warm-up step did not drain"}]
    record = Runner._finish_steady({"ok": False}, {"records": 0, "steps": steps})
    assert record["ok"] is False
    assert record["error"] == "no measured step committed a batch: the warm-up step did not drain"


def test_a_steady_run_reports_cpu_per_million_records_of_its_steps() -> None:
    from benchmarks.harness import Runner

    steps = [{"step": "10000/s", "rate": 10_000, "batches": 8}]
    record = Runner._finish_steady({"ok": False}, {"records": 200_000, "cpu_seconds": 3.0,
                                                   "steps": steps})
    assert record["ok"] is True
    assert record["cpu_s_per_million"] == 15.0


def test_fewer_than_half_the_expected_commits_is_not_stable() -> None:
    trend = lag_trend([(0.0, 1.0), (5.0, 2.0)], rate=50_000, interval=1.0, expected=8)
    assert trend["stable"] is False
    assert "fewer than half of 8" in trend["reason"]


def test_enough_commits_of_a_short_step_are_judged_by_the_trend_or_not_at_all() -> None:
    assert lag_trend([(0.0, 1.0), (1.0, 1.0), (2.0, 1.0)], rate=100, interval=1.0,
                     expected=4)["stable"] is None


def test_a_step_that_keeps_up_is_stable_with_its_latency_percentiles() -> None:
    from benchmarks.steady import _step_result

    # 10 s at 1,000/s, one commit a second 500 ms after the records' timestamps.
    batches = [{"commit_ms": (100 + t) * 1000.0 + 500, "hist": {(100 + t) * 1000: 1_000},
                "committed": 1_000 * (t + 1), "records": 1_000} for t in range(10)]
    ends = [(100.0 + t, 1_000 * (t + 1)) for t in range(11)]
    step = _step_result("1000/s", 1_000, 10.0, 1.0, batches, (100.0, 110.0), ends, 10.0)
    assert step["latency_ms"]["p50"] == 500.0
    assert step["records"] == 10_000
    assert step["stable"] is True
