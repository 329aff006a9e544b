"""The lag timer's arithmetic, with a scripted log-end look-up and clock (no broker)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import pytest

from dstream_kafka.monitor.lag import WARN_EVERY_MS, LagMonitor
from dstream_kafka.offsets import OffsetRange, TopicPartition

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class Script:
    """A clock and a log end the test moves by hand."""

    def __init__(self) -> None:
        self.now = 10_000
        self.ends: dict[TopicPartition, int] = {TP0: 0, TP1: 0}
        self.error: Exception | None = None
        self.calls: list[list[TopicPartition]] = []
        self.timeouts: list[int] = []

    def lookup(self, parts: Sequence[TopicPartition], timeout_ms: int) -> Mapping[TopicPartition, int]:
        self.calls.append(list(parts))
        self.timeouts.append(timeout_ms)
        if self.error is not None:
            raise self.error
        return {tp: self.ends[tp] for tp in parts}

    def clock(self) -> int:
        return self.now


@pytest.fixture
def script() -> Script:
    return Script()


def _monitor(script: Script, **kwargs: object) -> LagMonitor:
    monitor = LagMonitor(3, script.lookup, 1000, 1000, clock=script.clock, **kwargs)  # type: ignore[arg-type]
    monitor.started({TP0: 0, TP1: 0})
    return monitor


def _tick(script: Script, monitor: LagMonitor, produced: int, ms: int = 1000) -> None:
    script.now += ms
    for tp in script.ends:
        script.ends[tp] += produced
    monitor.sample()


def test_one_look_up_per_sample_covers_every_partition(script: Script) -> None:
    monitor = _monitor(script)
    monitor.sample()
    monitor.sample()
    assert script.calls == [[TP0, TP1], [TP0, TP1]]


def test_a_stuck_stream_shows_lag_growing_in_offsets_and_seconds(script: Script) -> None:
    monitor = _monitor(script)
    monitor.sample()  # log end 0 at 10 s: caught up
    for _ in range(4):
        _tick(script, monitor, 100)  # 100 records/s, nothing committed
    latest = monitor.latest
    assert latest is not None
    assert [(p.logEndOffset, p.committedOffset, p.lagOffsets, p.lagSeconds)
            for p in latest.partitions] == [(400, 0, 400, 4.0), (400, 0, 400, 4.0)]
    assert latest.lagOffsets == 800 and latest.maxLagSeconds == 4.0


def test_a_commit_moves_the_committed_offset_and_the_seconds_follow_the_log(
        script: Script) -> None:
    monitor = _monitor(script)
    monitor.sample()
    for _ in range(4):
        _tick(script, monitor, 100)
    monitor.committed([OffsetRange("t", 0, 0, 250)])
    latest = monitor.sample()
    assert {p.partition: (p.lagOffsets, p.lagSeconds) for p in latest.partitions} == {
        0: (150, 1.5), 1: (400, 4.0)}


def test_lag_in_seconds_is_unknown_until_two_samples_and_zero_when_caught_up(
        script: Script) -> None:
    monitor = _monitor(script)
    script.ends[TP0] = 10
    first = monitor.sample()
    assert {p.partition: p.lagSeconds for p in first.partitions} == {0: None, 1: 0.0}


def test_a_partition_planned_later_starts_at_its_ranges_start(script: Script) -> None:
    monitor = _monitor(script)
    tp2 = TopicPartition("t", 2)
    script.ends[tp2] = 70
    monitor.planned([OffsetRange("t", 0, 0, 0), OffsetRange("t", 1, 0, 0),
                     OffsetRange("t", 2, 40, 60)], queued=1)
    found = {p.partition: p.committedOffset for p in monitor.sample().partitions}
    assert found == {0: 0, 1: 0, 2: 40}
    assert monitor.facts().largest_task == ("t-2", 20, 20)


def test_a_partition_left_out_of_a_planned_batch_is_no_longer_looked_up(script: Script) -> None:
    monitor = _monitor(script)
    monitor.sample()
    monitor.planned([OffsetRange("t", 0, 0, 0)], queued=1)  # partition 1 was given up
    assert [p.partition for p in monitor.sample().partitions] == [0]
    assert script.calls[-1] == [TP0]


def test_an_offset_older_than_the_table_is_as_old_as_its_first_sample_at_least(
        script: Script) -> None:
    monitor = _monitor(script)
    monitor.started({TP0: 0, TP1: 0})
    script.ends = {TP0: 500, TP1: 500}  # the log was already ahead before the first sample
    monitor.sample()
    script.now += 1000
    latest = monitor.sample()  # flat log: committed 0 is older than the table
    assert [p.lagSeconds for p in latest.partitions] == [1.0, 1.0]


@pytest.mark.parametrize(("interval_ms", "bound_ms"), [(300, 2000), (2000, 2000), (5000, 5000)])
def test_each_look_up_is_bounded_by_the_interval_at_least_two_seconds(
        script: Script, interval_ms: int, bound_ms: int) -> None:
    monitor = LagMonitor(3, script.lookup, interval_ms, 1000, clock=script.clock)
    monitor.started({TP0: 0})
    monitor.sample()
    assert script.timeouts == [bound_ms] and monitor.lookup_bound_ms == bound_ms


def test_a_failed_look_up_is_a_sample_with_its_error_and_the_verdict_err(script: Script) -> None:
    monitor = _monitor(script)
    monitor.sample()
    _tick(script, monitor, 10)
    script.error = TimeoutError("no broker answered")
    script.now += 1000
    failed = monitor.sample()
    assert failed.lookupError == "TimeoutError: no broker answered"
    assert [p.lagOffsets for p in failed.partitions] == [10, 10]  # the last log ends known
    assert [p.lagSeconds for p in failed.partitions] == [2.0, 2.0]  # still growing
    verdict = monitor.verdict()
    assert verdict.status == "ERR" and verdict.cause.startswith("broker unreachable")


def test_a_commit_still_running_is_a_stuck_store(script: Script) -> None:
    monitor = _monitor(script, store="SqlOffsetStore")
    monitor.sample()
    monitor.commit_started()
    for _ in range(7):
        _tick(script, monitor, 10)
    verdict = monitor.verdict()
    assert verdict.status == "STOP"
    assert verdict.cause.startswith("stuck store: a commit to the SqlOffsetStore offset store "
                                    "has been running for 7.0 s")


def test_batches_read_to_the_cap_are_the_rate_limit(script: Script) -> None:
    monitor = _monitor(script, rate_cap=100.0)  # 100 records a 1 s batch per partition
    monitor.sample()
    for n in range(12):  # the caught-up first sample leaves the 10-sample window
        _tick(script, monitor, 300)
        ranges = [OffsetRange("t", p, 100 * n, 100 * n + 100) for p in (0, 1)]
        monitor.planned(ranges, queued=1)
        monitor.committed(ranges)
    verdict = monitor.verdict()
    assert verdict.cause == ("rate limit: spark.streaming.kafka.maxRatePerPartition caps reading "
                             "at 200.0 records/s, below the input rate of 600.0 records/s")


def test_the_warning_is_one_line_while_behind_and_repeated_at_most_every_minute(
        script: Script, caplog: pytest.LogCaptureFixture) -> None:
    monitor = _monitor(script)
    caplog.set_level(logging.INFO, logger="dstream_kafka.monitor.lag")
    monitor.sample()
    for _ in range(30):  # 30 samples, one second apart, lag growing all along
        _tick(script, monitor, 100)
        monitor.committed([OffsetRange("t", 0, 0, max(script.ends[TP0] - 400, 0))])
        monitor._warn(monitor.verdict())
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "Kafka direct stream 3 is behind" in warnings[0].getMessage()
    script.now += WARN_EVERY_MS
    monitor._warn(monitor.verdict())
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 2
