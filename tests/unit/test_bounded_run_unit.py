"""BoundedRun: the end offsets cap every batch and the run ends after its last batch."""

from __future__ import annotations

from hypothesis import given, strategies as st

from dstream_kafka.plan.bounded_run import BoundedRun
from dstream_kafka.offsets import TopicPartition

TP = TopicPartition("t", 0)
NEW = TopicPartition("t", 1)


@given(st.integers(0, 1000), st.integers(0, 1000), st.integers(0, 1000))
def test_a_capped_until_lies_between_the_position_and_both_the_end_and_the_rate_limit(
        current: int, end: int, until: int) -> None:
    until = max(until, current)  # rate limits never move back
    capped = BoundedRun({TP: end}).limit({TP: until}, {TP: current})[TP]
    assert current <= capped <= until and (capped <= end or capped == current)


def test_a_partition_found_after_the_start_reads_nothing() -> None:
    assert BoundedRun({TP: 10}).limit({NEW: 50}, {NEW: 5}) == {NEW: 5}


def test_the_run_ends_when_the_batch_that_reached_the_ends_completes() -> None:
    run = BoundedRun({TP: 10})
    run.planned(1000, {TP: 6}, replay_pending=False)
    run.planned(2000, {TP: 10}, replay_pending=False)
    assert [run.completed(1000), run.completed(2000), run.completed(3000)] == [False, True, False]


def test_a_pending_replay_keeps_the_run_going() -> None:
    run = BoundedRun({TP: 10})
    run.planned(1000, {TP: 10}, replay_pending=True)
    assert run.completed(1000) is False
