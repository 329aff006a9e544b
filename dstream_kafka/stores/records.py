"""The values offset stores return, and the offset-range rules every store applies.

:class:`CommitRecord`, :class:`DataLossRecord` and :class:`PlannedBatch` are frozen values.
The functions validate and merge a batch's ranges (:func:`merge_ranges`), convert batch times
(:func:`batch_time_to_ms`) and check that a batch continues the stored offsets
(:func:`check_continuation`); :class:`~dstream_kafka.stores.base.OffsetStore` applies them once
per call, before a store's hooks run.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dstream_kafka.errors import ConfigurationError, OffsetFencedError
from dstream_kafka.offsets import OffsetRange, TopicPartition

__all__ = [
    "CommitRecord",
    "DataLossRecord",
    "PlannedBatch",
    "ResetAudit",
    "advance_offsets",
    "as_ranges",
    "batch_time_to_ms",
    "chain_breaks",
    "check_continuation",
    "merge_ranges",
    "same_ranges",
    "utc_from_ms",
]


# ------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class PlannedBatch:
    """A batch whose ranges were written ahead (:meth:`OffsetStore.plan`) but not committed."""

    batch_time_ms: int
    ranges: tuple[OffsetRange, ...]


@dataclass(frozen=True)
class ResetAudit:
    """Who moved a group's offsets by hand (``dstream-kafka offsets reset``) and from where.

    A reset is stored as a commit whose ranges are empty at the new offsets; this record,
    kept with that commit, names the user, the host and the offsets before the reset
    (``previous``: ``{TopicPartition: offset}``, a partition the store did not hold is absent).
    """

    user: str
    host: str
    previous: Mapping[TopicPartition, int]

    def doc(self) -> dict[str, Any]:
        """Return the JSON document the stores write (:meth:`from_doc` reads it)."""
        previous: dict[str, dict[str, int]] = {}
        for tp, offset in sorted(self.previous.items()):
            previous.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
        return {"user": self.user, "host": self.host, "previous": previous}

    @classmethod
    def from_doc(cls, doc: Any) -> ResetAudit | None:
        """Return the audit of a document written by :meth:`doc`; None for None.

        Raises
        ------
        KeyError, TypeError, ValueError
            If a field is missing or malformed.
        """
        if doc is None:
            return None
        previous = {TopicPartition(str(topic), int(p)): int(o)
                    for topic, parts in dict(doc["previous"]).items() for p, o in dict(parts).items()}
        return cls(str(doc["user"]), str(doc["host"]), previous)


@dataclass(frozen=True)
class CommitRecord:
    """One committed batch: its batch time, its ranges and when the store committed it (UTC).

    ``reset`` is set when the commit is a reset (:meth:`OffsetStore.reset`): its ranges are
    empty at the new offsets and ``reset.previous`` holds the offsets before it.
    """

    batch_time_ms: int
    ranges: tuple[OffsetRange, ...]
    committed_at: _dt.datetime
    reset: ResetAudit | None = None

    def offsets(self) -> dict[TopicPartition, int]:
        """Return ``{TopicPartition: untilOffset}`` of this batch."""
        return {r.topicPartition(): r.untilOffset for r in self.ranges}


@dataclass(frozen=True)
class DataLossRecord:
    """Offsets ``[lost_from, lost_until)`` of one partition that were skipped because they were
    no longer in Kafka (``failOnDataLoss=False``), recorded at ``recorded_at`` (UTC)."""

    topic: str
    partition: int
    lost_from: int
    lost_until: int
    batch_time_ms: int | None
    recorded_at: _dt.datetime

    @property
    def count(self) -> int:
        """Number of offsets lost."""
        return self.lost_until - self.lost_from

    @staticmethod
    def doc(tp: TopicPartition, lost_from: int, lost_until: int, batch_time_ms: int | None,
            recorded_at_ms: int) -> dict[str, Any]:
        """Return the JSON document the stores write for one loss (:meth:`from_doc` reads it)."""
        return {"topic": tp.topic, "partition": tp.partition, "lost_from": lost_from, "lost_until": lost_until,
                "batch_time_ms": batch_time_ms, "recorded_at_ms": recorded_at_ms}

    @classmethod
    def from_doc(cls, doc: Mapping[str, Any]) -> DataLossRecord:
        """Return the record of a document written by :meth:`doc`.

        Raises
        ------
        KeyError, TypeError, ValueError
            If a field is missing or not a number.
        """
        return cls(str(doc["topic"]), int(doc["partition"]), int(doc["lost_from"]), int(doc["lost_until"]),
                   doc.get("batch_time_ms"), utc_from_ms(doc["recorded_at_ms"]))


# ------------------------------------------------------------------------------------------
# Helpers shared by the stores


def utc_from_ms(ms: int | float) -> _dt.datetime:
    """Return the aware UTC datetime of epoch milliseconds ``ms``."""
    return _dt.datetime.fromtimestamp(ms / 1000.0, tz=_dt.timezone.utc)


def batch_time_to_ms(value: Any) -> int:
    """Return a batch time as epoch milliseconds.

    Accepts an ``int`` (milliseconds, as the stream passes it) or the ``datetime`` PySpark's
    ``foreachRDD(lambda time, rdd: ...)`` gives (naive local time, as PySpark builds it).
    """
    if isinstance(value, _dt.datetime):
        return int(round(value.timestamp() * 1000))
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigurationError(
            f"batch_time_ms must be an int >= 0 (epoch milliseconds) or a datetime, got {value!r}")
    return int(value)


def as_ranges(ranges: Any) -> tuple[OffsetRange, ...]:
    """Return ``ranges`` (or ``ranges.offsetRanges()`` of a KafkaRDD) as a validated tuple."""
    if hasattr(ranges, "offsetRanges") and callable(ranges.offsetRanges):
        ranges = ranges.offsetRanges()
    result = tuple(ranges)
    for r in result:
        if not isinstance(r, OffsetRange):
            raise ConfigurationError(
                f"offset stores take OffsetRange values, got {r!r}; build them with OffsetRange.create(...)")
    return result


def merge_ranges(ranges: Any) -> tuple[OffsetRange, ...]:
    """Validate ``ranges`` and merge contiguous ranges of one partition into one range.

    The result is sorted by (topic, partition). ``ranges`` may also be an object with an
    ``offsetRanges()`` method, such as a KafkaRDD.

    Raises
    ------
    ConfigurationError
        If an item is not an :class:`OffsetRange`, or two ranges of one partition are not
        contiguous (a gap or an overlap would make the committed offset ambiguous).
    """
    by_tp: dict[TopicPartition, list[OffsetRange]] = {}
    for r in as_ranges(ranges):
        by_tp.setdefault(r.topicPartition(), []).append(r)
    merged = []
    for tp in sorted(by_tp):
        parts = sorted(by_tp[tp], key=lambda r: (r.fromOffset, r.untilOffset))
        start, end = parts[0].fromOffset, parts[0].untilOffset
        for r in parts[1:]:
            if r.fromOffset != end:
                raise ConfigurationError(
                    f"ranges of {tp.topic}-{tp.partition} in one batch must be contiguous, got "
                    f"{parts}; commit one range per partition")
            end = r.untilOffset
        merged.append(OffsetRange(tp.topic, tp.partition, start, end))
    return tuple(merged)


def same_ranges(a: Sequence[OffsetRange], b: Sequence[OffsetRange]) -> bool:
    """Return whether two batches cover the same ranges, ignoring order and splitting."""
    return merge_ranges(a) == merge_ranges(b)


def check_continuation(group_id: str, stored: Mapping[TopicPartition, int],
                       ranges: Sequence[OffsetRange], store: str = "the offset store") -> None:
    """Raise :class:`OffsetFencedError` unless every range starts at its stored offset.

    Partitions without a stored offset are accepted. The message names the group and, for
    every mismatching partition, the topic, partition, stored offset and expected offset.
    """
    problems = [
        f"topic {r.topic} partition {r.partition}: stored offset {stored[r.topicPartition()]}, "
        f"batch expects {r.fromOffset}"
        for r in ranges
        if r.topicPartition() in stored and stored[r.topicPartition()] != r.fromOffset
    ]
    if problems:
        raise OffsetFencedError(
            f"Commit refused for group {group_id!r} in {store}: the batch does not start where the "
            f"stored offsets end ({'; '.join(problems)}). Another driver committed for this group, "
            "or the stored offsets were changed by hand. Nothing was stored; stop the other driver "
            "(use one group.id per stream) and restart this one so it resumes from the stored offsets.")


def advance_offsets(stored: Mapping[TopicPartition, int],
                    ranges: Sequence[OffsetRange]) -> dict[TopicPartition, int]:
    """Return ``stored`` updated with every range's ``untilOffset``."""
    result = dict(stored)
    for r in ranges:
        result[r.topicPartition()] = r.untilOffset
    return result


def chain_breaks(before: Mapping[TopicPartition, int] | None, ranges: Sequence[OffsetRange],
                 offsets: Mapping[TopicPartition, int] | None, *, reset: bool, previous: str) -> list[str]:
    """Describe where a stored commit contradicts its own ranges or does not continue its
    predecessor; ``[]`` when it is a consistent link of the history.

    Parameters
    ----------
    before : mapping or None
        The offsets after the previous commit, moved over the data losses recorded after it
        (None when the store holds no previous commit). A store whose history keeps only
        ranges passes the previous commit's range ends.
    ranges : sequence of OffsetRange
        The commit's ranges.
    offsets : mapping or None
        The full offsets the commit stored, when the store keeps them: each must be where its
        range ends, and ``before`` moved to the ends of ``ranges``.
    reset : bool
        Whether the commit is a reset, whose (empty) ranges may start anywhere.
    previous : str
        How the messages name the previous commit.
    """
    problems = [] if offsets is None else [
        f"topic {r.topic} partition {r.partition}: the commit stores offset {offsets.get(r.topicPartition())}, "
        f"but its own range ends at {r.untilOffset}"
        for r in ranges if offsets.get(r.topicPartition()) != r.untilOffset]
    if before is None or problems:
        return problems
    problems = [f"topic {r.topic} partition {r.partition}: its range starts at {r.fromOffset}, but {previous} "
                f"ended at {before[r.topicPartition()]}"
                for r in ranges
                if not reset and r.topicPartition() in before and before[r.topicPartition()] != r.fromOffset]
    if offsets is not None:
        expected = advance_offsets(before, ranges)
        problems += [f"topic {tp.topic} partition {tp.partition}: the commit stores offset {offsets.get(tp)}, but "
                     f"{previous} and its ranges give {expected.get(tp)}"
                     for tp in sorted(set(expected) | set(offsets)) if expected.get(tp) != offsets.get(tp)]
    return problems
