"""kafka-lag-exporter's LookupTableSpec vectors, ported, and a property of the interpolation."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dstream_kafka.monitor.lookup_table import (LAG_IS_ZERO, TOO_FEW_POINTS, LookupTable, Point,
                                                Prediction)

PROPERTY = settings(max_examples=200, deadline=None)


def _table(limit: int, *points: tuple[int, int]) -> LookupTable:
    table = LookupTable(limit)
    for offset, time in points:
        table.add_point(Point(offset, time))
    return table


def _time(result: Prediction | str) -> float:
    assert isinstance(result, Prediction), result
    return result.time


def test_an_empty_or_one_point_table_has_too_few_points_and_drops_out_of_order_points() -> None:
    table = LookupTable(10)
    assert table.lookup(0) == TOO_FEW_POINTS
    table.add_point(Point(100, 100))
    assert table.lookup(0) == TOO_FEW_POINTS
    for offset, time in [(110, 90), (90, 110), (0, 0), (110, -1), (-1, 110), (-1, -1)]:
        assert table.add_point(Point(offset, time)) is False
    assert list(table.points) == [Point(100, 100)]


@pytest.mark.parametrize("offset", [150, 190, 110, 10, 0, -100, 300, 100])
def test_square_lookups_interpolate_inside_and_extrapolate_outside_the_table(offset: int) -> None:
    table = _table(10, (100, 100), (200, 200))
    assert _time(table.lookup(offset)) == offset


def test_a_flat_section_is_one_segment_and_resolves_to_its_right_end() -> None:
    table = _table(10, (100, 30), (200, 60), (200, 120), (200, 700))
    assert len(table.points) == 3
    for point in [(300, 730), (300, 9000), (400, 9030)]:
        table.add_point(Point(*point))
    expected = {199: 59.7, 200: 700, 201: 700.3, 250: 715, 299: 729.7, 300: 9000, 301: 9000.3}
    assert {o: _time(table.lookup(o)) for o in expected} == pytest.approx(expected)


def test_a_lookup_of_the_newest_offset_of_a_flat_table_is_lag_zero() -> None:
    assert _table(5, (0, 0), (0, 100)).lookup(0) == LAG_IS_ZERO


def test_a_flat_table_predicts_minus_and_plus_infinity_either_side() -> None:
    table = _table(10, (100, 100), (100, 200), (100, 300), (100, 400))
    assert list(table.points) == [Point(100, 100), Point(100, 400)]
    assert _time(table.lookup(99)) == -math.inf
    assert _time(table.lookup(101)) == math.inf


def test_a_full_table_slides_and_interpolates_each_segment_at_its_own_rate() -> None:
    table = _table(5, (-2, -2), (-1, -1), (0, 0), (10, 1), (200, 2))
    assert len(table.points) == 5
    table.add_point(Point(3000, 3))
    table.add_point(Point(40000, 4))
    assert len(table.points) == 5
    expected = {1600: 2.5, 0: 0.0, 1: 0.09999999999999998, 9: 0.9, 10: 1, 200: 2,
                2999: 2.9996428571428573, 3000: 3, 3001: 3.000027027027027, 40000: 4,
                -10000: -1, 50000: 5}
    # exact: the same IEEE operations in the same order as the Scala original
    assert {o: _time(table.lookup(o)) for o in expected} == expected
    assert table.lookup(-10000) == Prediction(-1, extrapolated=True)
    assert table.lookup(10) == Prediction(1, extrapolated=False)


def test_the_newest_point_is_the_last_one_added() -> None:
    table = LookupTable(5)
    assert table.newest() is None
    for n in range(11):
        table.add_point(Point(n, n * 10))
        newest = table.newest()
        assert newest is not None and newest.offset == n


def test_a_table_of_fewer_than_two_points_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        LookupTable(1)


@PROPERTY
@given(steps=st.lists(st.tuples(st.integers(1, 10_000), st.integers(1, 60_000)), min_size=1,
                      max_size=80),
       limit=st.integers(2, 60), pick=st.integers(0, 10**9))
def test_inside_a_growing_log_the_prediction_lies_between_the_bracketing_times(
        steps: list[tuple[int, int]], limit: int, pick: int) -> None:
    table = LookupTable(limit)
    offset, time = 0, 0
    table.add_point(Point(offset, time))
    for grow, wait in steps:
        offset, time = offset + grow, time + wait
        assert table.add_point(Point(offset, time))
    points = list(table.points)
    assert len(points) == min(limit, len(steps) + 1)
    if len(points) < 2:
        return
    lo, hi = points[0].offset, points[-1].offset
    target = lo + pick % (hi - lo)  # strictly below the newest offset
    result = table.lookup(target)
    assert isinstance(result, Prediction) and not result.extrapolated
    assert points[0].time <= result.time <= points[-1].time
    left = max((p for p in points if p.offset <= target), key=lambda p: p.offset)
    right = min((p for p in points if p.offset >= target), key=lambda p: p.offset)
    assert left.time - 1e-6 <= result.time <= right.time + 1e-6
