"""When did the log reach an offset: kafka-lag-exporter's interpolation table.

Each lag sample adds a point (log end offset, sample time in ms) to a partition's table of at
most ``limit`` points. Looking up an offset interpolates linearly between the two adjacent
points that bracket it, or extrapolates along the oldest-to-newest line when no pair does;
the lag in seconds of a committed offset is then ``(now - predicted time) / 1000``. The rules
are kafka-lag-exporter's (``LookupTable.scala``): a point older than or as old as the newest,
or with a smaller offset, is dropped; a run of equal offsets is kept as one flat segment whose
right end moves forward; fewer than two points is "too few points". The newest offset of a
log that stayed there is "lag is zero" (the newest offset of a growing log predicts the
newest time, as the spec's vectors have it).
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

__all__ = ["LAG_IS_ZERO", "TOO_FEW_POINTS", "LookupTable", "Point", "Prediction"]


@dataclass(frozen=True)
class Point:
    """A log end ``offset`` seen at ``time`` (epoch ms)."""

    offset: int
    time: int


@dataclass(frozen=True)
class Prediction:
    """The time (epoch ms, may be infinite) the log reached the looked-up offset;
    ``extrapolated`` when the offset lies outside the table."""

    time: float
    extrapolated: bool = False


#: The result of a lookup of the newest point's offset.
LAG_IS_ZERO = "lag is zero"
#: The result of a lookup in a table of fewer than two points.
TOO_FEW_POINTS = "too few points"


class LookupTable:
    """A sliding window of ``limit`` points of one partition's log end (not thread-safe).

    Parameters
    ----------
    limit : int
        Points kept (kafka-lag-exporter's ``lookup-table.memory.size``, default 60).
    """

    def __init__(self, limit: int = 60) -> None:
        if limit < 2:
            raise ValueError(f"a lookup table needs at least 2 points, got limit={limit}")
        self.limit = limit
        self.points: collections.deque[Point] = collections.deque()

    def add_point(self, point: Point) -> bool:
        """Add ``point``; return False when it was dropped (not newer, or a smaller offset)."""
        if self.points:
            newest = self.points[-1]
            if newest.time >= point.time or newest.offset > point.offset:
                return False
            if (newest.offset == point.offset and len(self.points) > 1
                    and self.points[-2].offset == point.offset):
                # a flat run stays one segment: its right end moves forward
                self.points[-1] = point
                return True
        if len(self.points) == self.limit:
            self.points.popleft()
        self.points.append(point)
        return True

    def newest(self) -> Point | None:
        """The most recent point, or None when the table is empty."""
        return self.points[-1] if self.points else None

    def lookup(self, offset: int) -> Prediction | str:
        """When the log reached ``offset``: a :class:`Prediction`, :data:`LAG_IS_ZERO` or
        :data:`TOO_FEW_POINTS`.

        Within a flat segment the right end (the latest time) is found, so a consumer sitting at
        an offset the log stayed at is as old as the last time the log was seen there.
        """
        points = list(self.points)
        if points and offset == points[-1].offset and (
                len(points) < 2 or points[-2].offset == offset):
            return LAG_IS_ZERO  # at the end of a log that has not moved since
        if len(points) < 2:
            return TOO_FEW_POINTS
        pair = next(((left, right) for left, right in zip(points[-2::-1], points[::-1])
                     if left.offset <= offset <= right.offset), None)
        extrapolated = pair is None
        left, right = (points[0], points[-1]) if pair is None else pair
        dx = float(right.time - left.time)
        dy = float(right.offset - left.offset)
        along = float(right.offset - offset)
        if dy == 0.0:  # a flat table: the log did not move, so the time is unbounded
            product = along * dx
            slope_term = math.inf if product > 0 else -math.inf if product < 0 else 0.0
        else:
            slope_term = along * dx / dy
        return Prediction(float(right.time) - slope_term, extrapolated)

    def __repr__(self) -> str:
        return f"LookupTable(limit={self.limit}, points={list(self.points)!r})"
