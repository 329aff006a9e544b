"""Unit and property tests for split_ranges (KafkaOffsetRangeCalculatorSuite vectors)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.plan.range_calculator import PlannedRange, divide, java_math_round, split_ranges

PROPERTY = settings(max_examples=200, deadline=None)

tp1 = TopicPartition("t1", 1)
tp2 = TopicPartition("t2", 1)
tp3 = TopicPartition("t3", 1)


def R(tp: TopicPartition, start: int, end: int) -> OffsetRange:
    return OffsetRange.create(tp, start, end)


def P(tp: TopicPartition, start: int, end: int, loc: str | None = None) -> PlannedRange:
    return PlannedRange(R(tp, start, end), loc)


def test_java_math_round_rounds_half_up() -> None:
    assert [java_math_round(x) for x in (0.5, 1.5, 2.5, -0.5, -1.5, -2.5)] == [1, 2, 3, 0, -1, -2]


def test_java_math_round_handles_the_largest_double_below_one_half() -> None:
    assert java_math_round(0.49999999999999994) == 0


def test_java_math_round_maps_nan_to_zero() -> None:
    assert java_math_round(float("nan")) == 0


# -- no minPartitions / no splitting ---------------------------------------------------------


def test_without_min_partitions_each_range_stays_whole_without_location() -> None:
    assert split_ranges([R(tp1, 1, 2)]) == [P(tp1, 1, 2)]


def test_without_min_partitions_a_single_executor_location_is_preferred() -> None:
    assert split_ranges([R(tp1, 1, 2)], executor_locations=["location"]) == [
        P(tp1, 1, 2, "location")
    ]


def test_empty_ranges_are_ignored() -> None:
    assert split_ranges([R(tp1, 1, 2), R(tp2, 1, 1)]) == [P(tp1, 1, 2)]


def test_n_ranges_to_n_partitions_get_locations_by_partition_hash() -> None:
    execs = ["exec1", "exec2", "exec3"]
    result = split_ranges(
        [R(tp1, 1, 2), R(tp2, 1, 2), R(tp3, 1, 2)], min_partitions=3, executor_locations=execs
    )
    assert result == [P(tp1, 1, 2, "exec3"), P(tp2, 1, 2, "exec1"), P(tp3, 1, 2, "exec2")]


def test_min_partitions_of_one_with_two_ranges_splits_nothing() -> None:
    assert split_ranges([R(tp1, 1, 5), R(tp2, 1, 21)], min_partitions=1) == [
        P(tp1, 1, 5),
        P(tp2, 1, 21),
    ]


def test_min_partitions_below_the_range_count_splits_nothing() -> None:
    ranges = [R(tp1, 1, 5), R(tp2, 1, 21), R(tp3, 1, 2)]
    assert split_ranges(ranges, min_partitions=2) == [P(tp1, 1, 5), P(tp2, 1, 21), P(tp3, 1, 2)]


# -- minPartitions splitting -----------------------------------------------------------------


def test_one_range_splits_into_min_partitions_pieces() -> None:
    assert split_ranges([R(tp1, 1, 5)], min_partitions=4) == [
        P(tp1, 1, 2),
        P(tp1, 2, 3),
        P(tp1, 3, 4),
        P(tp1, 4, 5),
    ]


def test_skewed_ranges_split_the_large_one_and_keep_the_small_one() -> None:
    assert split_ranges([R(tp1, 1, 5), R(tp2, 1, 21)], min_partitions=4) == [
        P(tp1, 1, 5),
        P(tp2, 1, 7),
        P(tp2, 7, 14),
        P(tp2, 14, 21),
    ]


def test_spark_30656_empty_range_is_ignored_when_splitting() -> None:
    assert split_ranges([R(tp1, 1, 1), R(tp2, 1, 21)], min_partitions=4) == [
        P(tp2, 1, 6),
        P(tp2, 6, 11),
        P(tp2, 11, 16),
        P(tp2, 16, 21),
    ]


def test_spark_30656_very_skewed_ranges() -> None:
    assert split_ranges([R(tp1, 1, 2), R(tp2, 1, 1001)], min_partitions=4) == [
        P(tp1, 1, 2),
        P(tp2, 1, 334),
        P(tp2, 334, 667),
        P(tp2, 667, 1001),
    ]


def test_inexact_multiple_gives_the_remainder_to_the_last_piece() -> None:
    assert split_ranges([R(tp1, 1, 11)], min_partitions=3) == [
        P(tp1, 1, 4),
        P(tp1, 4, 7),
        P(tp1, 7, 11),
    ]


def test_spark_28489_never_drops_offsets() -> None:
    result = split_ranges([R(tp1, 0, 10), R(tp2, 0, 10), R(tp3, 0, 1)], min_partitions=6)
    assert result == [
        P(tp1, 0, 3),
        P(tp1, 3, 6),
        P(tp1, 6, 10),
        P(tp2, 0, 3),
        P(tp2, 3, 6),
        P(tp2, 6, 10),
        P(tp3, 0, 1),
    ]


def test_spark_36576_no_small_ranges_split_proportionally() -> None:
    result = split_ranges([R(tp1, 0, 10000), R(tp2, 0, 15000), R(tp3, 0, 20000)], min_partitions=9)
    assert result == [
        P(tp1, 0, 5000),
        P(tp1, 5000, 10000),
        P(tp2, 0, 5000),
        P(tp2, 5000, 10000),
        P(tp2, 10000, 15000),
        P(tp3, 0, 5000),
        P(tp3, 5000, 10000),
        P(tp3, 10000, 15000),
        P(tp3, 15000, 20000),
    ]


def test_spark_36576_one_small_range_stays_whole() -> None:
    result = split_ranges([R(tp1, 0, 500), R(tp2, 0, 12000), R(tp3, 0, 15001)], min_partitions=6)
    assert result == [
        P(tp1, 0, 500),
        P(tp2, 0, 6000),
        P(tp2, 6000, 12000),
        P(tp3, 0, 5000),
        P(tp3, 5000, 10000),
        P(tp3, 10000, 15001),
    ]


def test_spark_36576_two_small_ranges_stay_whole() -> None:
    result = split_ranges([R(tp1, 0, 1), R(tp2, 0, 1), R(tp3, 0, 10000)], min_partitions=6)
    assert result == [
        P(tp1, 0, 1),
        P(tp2, 0, 1),
        P(tp3, 0, 2500),
        P(tp3, 2500, 5000),
        P(tp3, 5000, 7500),
        P(tp3, 7500, 10000),
    ]


def test_split_pieces_get_no_location_even_with_executors() -> None:
    result = split_ranges(
        [R(tp1, 1, 5), R(tp2, 1, 21)], min_partitions=4, executor_locations=["e1", "e2"]
    )
    assert all(p.preferredLocation is None for p in result)


# -- maxRecordsPerPartition ------------------------------------------------------------------


def test_spark_49259_range_at_max_records_stays_whole() -> None:
    assert split_ranges([R(tp1, 1, 5)], max_records_per_partition=4) == [P(tp1, 1, 5)]


def test_spark_49259_range_over_max_records_splits_without_location() -> None:
    result = split_ranges([R(tp1, 1, 6)], max_records_per_partition=4, executor_locations=["e1"])
    assert result == [P(tp1, 1, 3), P(tp1, 3, 6)]


def test_spark_49259_max_records_alone_splits_each_range() -> None:
    result = split_ranges(
        [R(tp1, 1, 40), R(tp2, 1, 50), R(tp3, 1, 60)], max_records_per_partition=20
    )
    assert result == [
        P(tp1, 1, 20),
        P(tp1, 20, 40),
        P(tp2, 1, 17),
        P(tp2, 17, 33),
        P(tp2, 33, 50),
        P(tp3, 1, 20),
        P(tp3, 20, 40),
        P(tp3, 40, 60),
    ]


def test_spark_49259_low_min_partitions_with_max_records() -> None:
    assert split_ranges([R(tp1, 1, 40)], min_partitions=1, max_records_per_partition=20) == [
        P(tp1, 1, 20),
        P(tp1, 20, 40),
    ]


def test_spark_49259_high_min_partitions_with_max_records() -> None:
    assert split_ranges([R(tp1, 1, 40)], min_partitions=4, max_records_per_partition=20) == [
        P(tp1, 1, 10),
        P(tp1, 10, 20),
        P(tp1, 20, 30),
        P(tp1, 30, 40),
    ]


# -- validation ------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -1, "a", "1.0", 1.0, True])
def test_min_partitions_must_be_positive(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="minPartitions must be positive"):
        split_ranges([R(tp1, 0, 1)], min_partitions=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -3, "x", 2.5, False])
def test_max_records_per_partition_must_be_positive(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="maxRecordsPerPartition must be positive"):
        split_ranges([R(tp1, 0, 1)], max_records_per_partition=bad)  # type: ignore[arg-type]


def test_options_accept_decimal_strings_as_spark_options_do() -> None:
    from_string = split_ranges([R(tp1, 1, 5)], min_partitions="4")  # type: ignore[arg-type]
    assert from_string == split_ranges([R(tp1, 1, 5)], min_partitions=4)


def test_divide_tiles_the_range_even_with_more_parts_than_offsets() -> None:
    pieces = divide(R(tp1, 0, 2), 4)
    assert [p.toTuple()[2:] for p in pieces] == [(0, 0), (0, 0), (0, 1), (1, 2)]


# -- properties ------------------------------------------------------------------------------

range_lists = st.lists(
    st.tuples(st.integers(0, 10**15), st.integers(0, 2000)), min_size=0, max_size=8
).map(lambda xs: [OffsetRange("t", i, start, start + size) for i, (start, size) in enumerate(xs)])
options = st.one_of(st.none(), st.integers(1, 64))


@PROPERTY
@given(range_lists, options, options)
def test_splitting_never_loses_or_duplicates_offsets(
    ranges: list[OffsetRange], min_parts: int | None, max_records: int | None
) -> None:
    pieces = [p.range for p in split_ranges(ranges, min_parts, max_records)]
    assert all(p.count() > 0 for p in pieces)
    # Pieces of each partition are contiguous and tile its range exactly.
    for r in ranges:
        own = [p for p in pieces if p.partition == r.partition]
        if r.count() == 0:
            assert own == []
            continue
        assert own[0].fromOffset == r.fromOffset and own[-1].untilOffset == r.untilOffset
        assert all(a.untilOffset == b.fromOffset for a, b in zip(own, own[1:]))
    assert sum(p.count() for p in pieces) == sum(r.count() for r in ranges)


@PROPERTY
@given(range_lists, st.integers(1, 64))
def test_splitting_respects_min_partitions_when_offsets_allow(
    ranges: list[OffsetRange], min_parts: int
) -> None:
    pieces = split_ranges(ranges, min_partitions=min_parts)
    total = sum(r.count() for r in ranges)
    nonempty = sum(1 for r in ranges if r.count() > 0)
    # Rounding can land slightly below minPartitions (Spark says "approximately"), but never
    # below the number of non-empty ranges, and never more pieces than offsets.
    assert min(nonempty, min_parts) <= len(pieces) <= max(total, 0)
    if total >= 4 * min_parts and nonempty == 1:
        assert len(pieces) == min_parts


@PROPERTY
@given(range_lists, st.integers(1, 3000))
def test_max_records_alone_caps_every_piece(ranges: list[OffsetRange], max_records: int) -> None:
    pieces = split_ranges(ranges, max_records_per_partition=max_records)
    assert all(p.range.count() <= max_records for p in pieces)
