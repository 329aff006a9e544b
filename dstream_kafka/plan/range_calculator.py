"""Split offset ranges into more RDD partitions (Structured Streaming's
``KafkaOffsetRangeCalculator.getRanges``).

With neither option set (or ``minPartitions`` already met and no
``maxRecordsPerPartition``), each non-empty range is kept whole and gets a preferred
executor by partition hash, so cached consumers are reused. Otherwise large ranges are
divided and the pieces get no preferred location, so they spread over all executors.
Offsets are never lost or duplicated: the pieces of a range tile it exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from numbers import Integral
from typing import Any, NamedTuple

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import OffsetRange, TopicPartition

__all__ = ["PlannedRange", "divide", "java_math_round", "split_ranges"]


class PlannedRange(NamedTuple):
    """One RDD partition to read: an offset range and an optional preferred location."""

    range: OffsetRange
    preferredLocation: str | None = None


def java_math_round(x: float) -> int:
    """Round half up, as Java/Scala ``Math.round(double)``: ``floor(x + 0.5)``, exactly.

    Unlike Python's :func:`round` this never rounds half to even (``2.5 -> 3``,
    ``-2.5 -> -2``), and unlike a literal ``floor(x + 0.5)`` in floating point it gives
    ``0`` for ``0.49999999999999994``, as Java 7+ does. NaN gives 0.
    """
    if math.isnan(x):
        return 0
    if math.isinf(x):
        return 2**63 - 1 if x > 0 else -(2**63)
    floor = math.floor(x)
    # x - floor(x) is exact for doubles, so this compares the true fraction with one half.
    return floor + 1 if x - floor >= 0.5 else floor


def _positive_option(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, Integral) or value <= 0:
        raise ConfigurationError(
            f"{name} must be positive: got {value!r}; pass a whole number >= 1, e.g. {name}=4"
        )
    return int(value)


def divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    """Cut ``r`` into ``parts`` consecutive pieces of near-equal size.

    Each piece takes ``remaining // parts_left`` offsets, so the last pieces absorb the
    rounding remainder. Pieces tile ``r`` exactly; some may be empty when ``parts`` exceeds
    ``r.count()``.
    """
    remaining = r.count()
    start = r.fromOffset
    pieces = []
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.untilOffset)
        pieces.append(OffsetRange(r.topic, r.partition, start, end))
        start = end
    return pieces


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Spark: max(math.round(size.toDouble / totalSize * minParts), 1)
    return max(java_math_round(float(size) / float(total) * min_parts), 1)


def _location(tp: TopicPartition, executor_locations: Sequence[str]) -> str | None:
    if not executor_locations:
        return None
    return executor_locations[tp.javaHash() % len(executor_locations)]


def split_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
    executor_locations: Sequence[str] | None = None,
) -> list[PlannedRange]:
    """Plan the RDD partitions for ``ranges``.

    Parameters
    ----------
    ranges : iterable of OffsetRange
        One range per topic partition. Empty ranges are dropped.
    min_partitions : int, optional
        Desired minimum number of pieces (Spark's ``minPartitions``). When it exceeds the
        number of non-empty ranges, ranges are split in proportion to their size; ranges
        whose share rounds to one piece stay whole and are left out of the proportional
        sharing of the rest (SPARK-36576).
    max_records_per_partition : int, optional
        Used when ``min_partitions`` does not call for splitting: each range is cut into
        ``ceil(size / max_records_per_partition)`` pieces.
    executor_locations : sequence of str, optional
        Executor location strings, already in the order to index into (see
        :func:`~dstream_kafka.read.placement.sort_executors`). Used only when nothing is split:
        range of ``tp`` prefers ``executor_locations[floorMod(tp.javaHash(), n)]``.

    Returns
    -------
    list of PlannedRange
        Non-empty pieces in input order; the pieces of one range are consecutive.

    Raises
    ------
    ConfigurationError
        If an option is given but is not a whole number ``>= 1``.
    """
    min_parts = _positive_option("minPartitions", min_partitions)
    max_records = _positive_option("maxRecordsPerPartition", max_records_per_partition)
    locations = list(executor_locations or ())
    offset_ranges = [r for r in ranges if r.count() > 0]

    if (min_parts is None or len(offset_ranges) >= min_parts) and max_records is None:
        return [PlannedRange(r, _location(r.topicPartition(), locations)) for r in offset_ranges]

    pieces: list[OffsetRange] = []
    if min_parts is not None and min_parts > len(offset_ranges):
        total = sum(r.count() for r in offset_ranges)
        unsplit = [r for r in offset_ranges if _part_count(r.count(), total, min_parts) == 1]
        unsplit_tps = {r.topicPartition() for r in unsplit}
        split_total = total - sum(r.count() for r in unsplit)
        split_min = max(min_parts - len(unsplit), 1)
        for r in offset_ranges:
            # Spark decides by topic partition, not by range identity.
            if r.topicPartition() in unsplit_tps:
                parts = 1
            else:
                parts = _part_count(r.count(), split_total, split_min)
            pieces.extend(divide(r, parts))
    else:
        assert max_records is not None
        for r in offset_ranges:
            pieces.extend(divide(r, -(-r.count() // max_records)))
    return [PlannedRange(p) for p in pieces if p.count() > 0]
