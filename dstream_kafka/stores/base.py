"""The offset store contract shared by every store, its records and the fencing rules.

An offset store keeps, per consumer group, the *next offset to read* of every topic partition a
stream has committed. Every store follows the same rules:

* :meth:`OffsetStore.commit` is atomic: it stores all of a batch's ranges or none of them.
* A commit continues the stored offsets: for every range whose partition has a stored offset,
  ``range.fromOffset`` must equal it. Otherwise :class:`~dstream_kafka.errors.OffsetFencedError`
  is raised and nothing is stored, so a second driver on the same group and store is fenced,
  never merged. Partitions without a stored offset are inserted.
* Re-committing exactly the same batch (same batch time, same ranges) is a no-op, so a batch
  re-run after a crash between the store commit and the stream noticing it does not fail.
* :meth:`OffsetStore.record_data_loss` records a lost range durably and, when the stored offset
  of that partition is ``lost_from``, moves it to ``lost_until`` in the same step, so the next
  batch (which starts at ``lost_until``) continues the stored offsets.
"""

from __future__ import annotations

import abc
import contextlib
import datetime as _dt
import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dstream_kafka.errors import ConfigurationError, OffsetFencedError
from dstream_kafka.offsets import OffsetRange, TopicPartition, as_topic_partition

__all__ = [
    "CommitRecord",
    "DataLossRecord",
    "OffsetStore",
    "PlannedBatch",
    "Transaction",
    "TransactionalOffsetStore",
    "advance_offsets",
    "as_ranges",
    "batch_time_to_ms",
    "check_continuation",
    "merge_ranges",
    "same_ranges",
    "utc_from_ms",
]

logger = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class PlannedBatch:
    """A batch whose ranges were written ahead (:meth:`OffsetStore.plan`) but not committed."""

    batch_time_ms: int
    ranges: tuple[OffsetRange, ...]


@dataclass(frozen=True)
class CommitRecord:
    """One committed batch: its batch time, its ranges and when the store committed it (UTC)."""

    batch_time_ms: int
    ranges: tuple[OffsetRange, ...]
    committed_at: _dt.datetime

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


# ------------------------------------------------------------------------------------------
# The contract


class OffsetStore(abc.ABC):
    """Durable committed offsets of consumer groups.

    Parameters
    ----------
    also_commit_to_kafka_group : dict or callable, optional
        Mirror every successful commit to a Kafka consumer group, for monitoring only (lag
        tools such as ``kafka-consumer-groups.sh --describe``). Either Kafka params with
        ``bootstrap.servers`` (and optionally ``group.id``, default: the store's group id), or a
        callable ``fn(group_id, offsets)`` with ``offsets`` a ``{TopicPartition: int}`` dict.
        The mirror is best effort: a failure logs a warning and never fails the batch.

    Notes
    -----
    Every public method of the stores in this package is thread-safe (an instance lock
    serialises them). Stores live on the driver; they are not picklable.
    """

    #: True for stores that can write user results and offsets in one transaction.
    transactional: bool = False

    def __init__(self, *, also_commit_to_kafka_group: Mapping[str, Any] | Callable[..., Any] | None = None) -> None:
        self._lock = threading.RLock()
        self._mirror: Any = None
        if also_commit_to_kafka_group is not None:
            from dstream_kafka.stores.kafka_group import KafkaGroupMirror

            self._mirror = KafkaGroupMirror(also_commit_to_kafka_group)

    # -- contract ---------------------------------------------------------------------------
    @abc.abstractmethod
    def load(self, group_id: str, topics: Collection[str] | None = None) -> dict[TopicPartition, int]:
        """Return the committed next offset to read per partition of ``topics`` (every topic of
        the group when None); ``{}`` on a first start."""

    def plan(self, group_id: str, batch_time_ms: int, ranges: Sequence[OffsetRange]) -> None:
        """Record a batch's ranges before its jobs run (write-ahead). No-op by default."""

    def pending(self, group_id: str) -> PlannedBatch | None:
        """Return the oldest planned but uncommitted batch, or None (the default)."""
        return None

    @abc.abstractmethod
    def commit(self, group_id: str, batch_time_ms: int, ranges: Sequence[OffsetRange]) -> None:
        """Atomically store a batch's ``untilOffset`` per partition (see the module rules).

        Raises
        ------
        OffsetFencedError
            If a range does not start at its partition's stored offset, or another batch
            already committed at ``batch_time_ms``. Nothing is stored.
        """

    @abc.abstractmethod
    def history(self, group_id: str, limit: int = 20) -> list[CommitRecord]:
        """Return up to ``limit`` committed batches of the group, newest first."""

    @abc.abstractmethod
    def record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                         batch_time_ms: int | None) -> None:
        """Durably record that ``[lost_from, lost_until)`` of ``tp`` was skipped; if the stored
        offset of ``tp`` is ``lost_from`` it moves to ``lost_until`` atomically with the record."""

    @abc.abstractmethod
    def data_losses(self, group_id: str) -> list[DataLossRecord]:
        """Return every recorded data loss of the group, oldest first."""

    def committed_in(self, group_id: str, batch_time_ms: int) -> bool:
        """Return whether this store committed the batch at ``batch_time_ms`` itself (inside a
        transaction), so the stream must not commit it again. False unless transactional."""
        return False

    def close(self) -> None:
        """Release connections and clients. The store must not be used afterwards."""
        if self._mirror is not None:
            self._mirror.close()

    # -- optional ---------------------------------------------------------------------------
    def bind_consumer(self, consumer: Any, lock: Any = None) -> None:
        """Let the Kafka mirror (and the Kafka group store) commit through ``consumer``.

        A broker refuses commits from outside the group while the group has active members,
        so a stream whose driver consumer subscribes with ``group.id`` must bind it; ``lock``
        (a context manager) guards every use of the consumer, which is not thread-safe.
        """
        if self._mirror is not None:
            self._mirror.bind_consumer(consumer, lock)

    def __enter__(self) -> OffsetStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self) -> Any:
        # Stores hold connections and possibly credentials; they must never end up pickled in a
        # Spark checkpoint or shipped to executors.
        raise TypeError(f"{type(self).__name__} is not picklable; create it again on the driver")

    def _mirror_commit(self, group_id: str, ranges: Sequence[OffsetRange]) -> None:
        if self._mirror is not None and ranges:
            self._mirror.commit(group_id, {r.topicPartition(): r.untilOffset for r in ranges})

    @staticmethod
    def _check_group(group_id: Any) -> str:
        if not isinstance(group_id, str) or not group_id:
            raise ConfigurationError(f"group_id must be a non-empty string, got {group_id!r}")
        return group_id

    @staticmethod
    def _check_loss(tp: Any, lost_from: int, lost_until: int) -> TopicPartition:
        tp = as_topic_partition(tp)
        OffsetRange(tp.topic, tp.partition, lost_from, lost_until)  # validates the bounds
        return tp


# ------------------------------------------------------------------------------------------
# Transactional stores


@dataclass
class Transaction:
    """An open database transaction for one batch, yielded by ``store.transaction(...)``.

    Write results with :meth:`execute` / :meth:`executemany` or through :attr:`cursor` (a
    DB-API cursor; use the driver's parameter style: ``?`` for sqlite3, ``%s`` for psycopg2).
    When :attr:`already_committed` is true the batch was committed before (a re-run after a
    crash): the transaction is rolled back on exit, so the results are not written twice.
    """

    cursor: Any
    group_id: str
    batch_time_ms: int
    ranges: tuple[OffsetRange, ...]
    already_committed: bool = False
    paramstyle: str = field(default="qmark")

    def execute(self, sql: str, params: Any = ()) -> Any:
        """Run one statement in the transaction; returns the cursor."""
        self.cursor.execute(sql, params)
        return self.cursor

    def executemany(self, sql: str, seq_of_params: Any) -> Any:
        """Run one statement for every parameter tuple in the transaction; returns the cursor."""
        self.cursor.executemany(sql, list(seq_of_params))
        return self.cursor


class TransactionalOffsetStore(OffsetStore):
    """An offset store that writes user results and offsets in one database transaction."""

    transactional = True

    @abc.abstractmethod
    def transaction(self, group_id: str, batch_time_ms: int,
                    ranges: Sequence[OffsetRange]) -> contextlib.AbstractContextManager[Transaction]:
        """Open a transaction for one batch; the offsets update and COMMIT happen on normal exit,
        any exception rolls everything back and propagates."""

    @abc.abstractmethod
    def committed_in(self, group_id: str, batch_time_ms: int) -> bool:
        """Return whether the batch at ``batch_time_ms`` is committed for the group."""

