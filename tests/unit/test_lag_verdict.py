"""Burrow's status rules as a table of windows, and the causes the verdict names."""

from __future__ import annotations

import pytest

from dstream_kafka.monitor.verdict import PartitionWindow, StreamFacts, judge, partition_status

BATCH_MS = 1000
INTERVAL_MS = 1000


def _window(*points: tuple[int, int]) -> PartitionWindow:
    """Samples one second apart of (log end, committed)."""
    return PartitionWindow("t", 0, tuple((i * 1000, end, committed)
                                         for i, (end, committed) in enumerate(points)))


@pytest.mark.parametrize(("points", "last_commit", "expected"), [
    # current lag 0
    ([(10, 5), (20, 20)], 1000, "OK"),
    # a lag of 0 inside the window
    ([(10, 10), (20, 12), (30, 14)], 2000, "OK"),
    # the committed offset went down (a reset)
    ([(30, 20), (40, 10), (50, 15)], 2000, "REWIND"),
    # nothing committed for longer than the stop bound (3 s here)
    ([(10, 5), (20, 5), (30, 5)], -5000, "STOP"),
    # ... even after a sample that was caught up
    ([(5, 5), (20, 5), (30, 5)], -5000, "STOP"),
    # commits go on but the offset does not move while lag stays
    ([(10, 5), (20, 5), (30, 5)], 2000, "STALL"),
    # lag never falls and grows
    ([(10, 5), (20, 10), (40, 20)], 2000, "WARN"),
    # lag falling: catching up
    ([(40, 5), (45, 20), (50, 40)], 2000, "OK"),
    # lag went up then down: not a rise
    ([(10, 5), (40, 10), (42, 30)], 2000, "OK"),
    # a rise with one dip: rising in more steps than falling
    ([(10, 5), (30, 10), (32, 20), (50, 25), (70, 30)], 4000, "WARN"),
    # as many falls as rises
    ([(10, 5), (30, 10), (32, 22), (50, 30), (52, 44)], 4000, "OK"),
])
def test_burrow_status_of_a_partition_window(points: list[tuple[int, int]], last_commit: int,
                                              expected: str) -> None:
    now = (len(points) - 1) * 1000
    assert partition_status(_window(*points), now, last_commit, 3000) == expected


def _facts(**changes: object) -> StreamFacts:
    base: dict[str, object] = dict(
        now=9000, batch_ms=BATCH_MS, interval_ms=INTERVAL_MS, last_commit=8500,
        windows=(_window((100, 50), (200, 100), (300, 150), (400, 200)),))
    base.update(changes)
    return StreamFacts(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(("changes", "status", "cause"), [
    ({}, "WARN", "input above processing"),
    ({"rate_cap": 50.0, "capped_batches": (4, 5)}, "WARN", "rate limit"),
    ({"rate_cap": 50.0, "capped_batches": (1, 5)}, "WARN", "input above processing"),
    ({"time_split": {"addBatch": 2500.0}}, "WARN", "slow processing"),
    ({"commit_since": 1000, "last_commit": 900}, "STOP", "stuck store"),
    ({"processing_since": 1000, "processing_batch": 1000, "last_commit": 900}, "STOP",
     "stuck Spark job"),
    ({"lookup_error": "KafkaTimeoutError: no answer"}, "ERR", "broker unreachable"),
    ({"windows": (_window((100, 100), (200, 200)),)}, "OK", "keeping up"),
])
def test_the_verdict_names_the_cause_from_the_evidence(changes: dict[str, object], status: str,
                                                        cause: str) -> None:
    verdict = judge(_facts(**changes))
    assert (verdict.status, verdict.cause.split(":")[0]) == (status, cause)


def test_the_evidence_gives_rates_slowest_partition_skew_and_time_split() -> None:
    windows = (_window((100, 50), (200, 100)),
               PartitionWindow("t", 1, ((0, 10, 10), (1000, 20, 18))))
    verdict = judge(_facts(windows=windows, time_split={"planBatch": 12.0, "addBatch": 300.0}))
    assert verdict.evidence == (
        "input rate 110.0 records/s, processing rate 58.0 records/s",
        "slowest partition t-0 (100 offsets behind, skew 2.0x the mean)",
        "time per batch: planBatch 12 ms, addBatch 300 ms")
    assert verdict.partitions == {"t-0": "WARN", "t-1": "OK"}  # t-1 was caught up
    assert verdict.line().startswith("WARN: input above processing: 110.0 records/s arrive")


def test_a_stuck_job_names_its_batch_by_its_clock_time_and_the_batches_behind_it() -> None:
    verdict = judge(_facts(processing_since=1000, processing_batch=1_700_000_000_500,
                           queued_batches=4, last_commit=900))
    assert verdict.cause == ("stuck Spark job: the batch of 22:13:20.500 UTC has been in its jobs "
                             "for 8.0 s, 4 batches queued behind it")


def test_the_largest_task_of_the_last_batch_is_evidence() -> None:
    verdict = judge(_facts(largest_task=("t-3", 120, 200)))
    assert "largest task of the last batch: t-3 with 120 of 200 records" in verdict.evidence


def test_a_rate_cap_above_the_input_rate_is_not_the_cause() -> None:
    verdict = judge(_facts(rate_cap=500.0, capped_batches=(5, 5)))
    assert verdict.cause.startswith("input above processing")
    assert "5 of the last 5 batches read as much as maxRatePerPartition allows" in verdict.evidence
