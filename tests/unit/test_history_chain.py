"""chain_breaks: a stored commit must match its own ranges and continue its predecessor."""

from __future__ import annotations

from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores.records import chain_breaks

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def r(p: int, a: int, b: int) -> OffsetRange:
    return OffsetRange("t", p, a, b)


def test_a_commit_continuing_its_predecessor_has_no_break() -> None:
    assert chain_breaks({T0: 12, T1: 4}, [r(0, 12, 20)], {T0: 20, T1: 4}, reset=False, previous="p") == []


def test_offsets_that_contradict_the_commits_own_range_are_a_break() -> None:
    assert chain_breaks(None, [r(0, 12, 20)], {T0: 28}, reset=False, previous="p") == [
        "topic t partition 0: the commit stores offset 28, but its own range ends at 20"]


def test_a_range_that_does_not_start_where_the_previous_commit_ended_is_a_break() -> None:
    assert chain_breaks({T0: 12}, [r(0, 20, 28)], None, reset=False, previous="commit 1") == [
        "topic t partition 0: its range starts at 20, but commit 1 ended at 12"]


def test_a_reset_may_start_anywhere() -> None:
    assert chain_breaks({T0: 12}, [r(0, 4, 4)], {T0: 4}, reset=True, previous="p") == []


def test_an_offset_of_a_partition_outside_the_ranges_must_stay_as_the_predecessor_left_it() -> None:
    assert chain_breaks({T0: 12, T1: 4}, [r(0, 12, 20)], {T0: 20, T1: 9}, reset=False, previous="p") == [
        "topic t partition 1: the commit stores offset 9, but p and its ranges give 4"]
