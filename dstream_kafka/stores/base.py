"""The offset store contract shared by every store, and the fencing rules.

An offset store keeps, per consumer group, the *next offset to read* of every topic partition a
stream has committed. Every store follows the same rules:

* :meth:`OffsetStore.commit` is atomic: it stores all of a batch's ranges or none of them.
* A commit continues the stored offsets: for every range whose partition has a stored offset,
  ``range.fromOffset`` must equal it. Otherwise :class:`~dstream_kafka.errors.OffsetFencedError`
  is raised and nothing is stored, so a second driver on the same group and store is fenced,
  never merged. Partitions without a stored offset are inserted.
* Re-committing exactly the same batch (same batch time, same ranges) is a no-op, so a batch
  re-run after a crash between the store commit and the stream noticing it does not fail.
* :meth:`OffsetStore.reset` moves offsets anywhere (back too) as a new commit whose ranges are
  empty at the new offsets, with a :class:`~dstream_kafka.stores.records.ResetAudit` kept in
  the history. Instead of the continuation rule it checks that the stored offsets are still
  those the reset was planned from (compare-and-set), so a stream committing meanwhile makes
  the reset fail with :class:`~dstream_kafka.errors.OffsetFencedError`, and the stream's next
  commit after a reset is fenced (it no longer continues the stored offsets).
* :meth:`OffsetStore.record_data_loss` records a lost range durably and, when the stored offset
  of that partition is ``lost_from``, moves it to ``lost_until`` in the same step, so the next
  batch (which starts at ``lost_until``) continues the stored offsets.

The records the stores return and the range helpers live in :mod:`dstream_kafka.stores.records`.
This module imports no store and no client library.
"""

from __future__ import annotations

import abc
import contextlib
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Protocol

from dstream_kafka.errors import ConfigurationError, OffsetFencedError
from dstream_kafka.offsets import OffsetRange, TopicPartition, as_topic_partition
from dstream_kafka.stores.records import (
    CommitRecord,
    DataLossRecord,
    PlannedBatch,
    ResetAudit,
    as_ranges,
    batch_time_to_ms,
    check_continuation,
    merge_ranges,
)

__all__ = [
    "CommitRecord",
    "DataLossRecord",
    "OffsetMirror",
    "OffsetStore",
    "PlannedBatch",
    "ResetAudit",
    "check_offset_store",
]

# ------------------------------------------------------------------------------------------
# The contract


class OffsetMirror(Protocol):
    """A best-effort copy of committed offsets elsewhere (see :mod:`dstream_kafka.stores.mirror`)."""

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Copy ``offsets`` of ``group_id``; never raises."""

    def bind_consumer(self, consumer: Any, lock: Any = None) -> None:
        """Commit through ``consumer`` (guarded by ``lock``) where the target is its group."""

    def close(self) -> None:
        """Release clients."""


class OffsetStore(abc.ABC):
    """Durable committed offsets of consumer groups.

    The public methods are a template: they validate their arguments once (group id, batch
    time, ranges), then call the store's hooks (``_load``, ``_commit``, ``_history``,
    ``_record_data_loss``, ``_data_losses`` and optionally ``_plan``, ``_pending``,
    ``_committed_in``, ``_last_reset``). A store's ``_commit`` reads what it holds inside its
    own atomic section (lock, database transaction, ZooKeeper transaction) and passes it to
    :meth:`_admit_commit`, which applies the rules of the module docstring.

    Parameters
    ----------
    mirror : OffsetMirror, optional
        Receives the offsets of every batch the store committed (monitoring only); closed
        with the store. Stores build it from their ``also_commit_to_kafka_group`` argument
        (:func:`dstream_kafka.stores.mirror.mirror_to`).

    Notes
    -----
    Every public method of the stores in this package is thread-safe (an instance lock
    serialises them). Stores live on the driver; they are not picklable.
    """

    #: True for stores that can write user results and offsets in one transaction.
    transactional: bool = False

    def __init__(self, *, mirror: OffsetMirror | None = None) -> None:
        self._lock = threading.RLock()
        self._mirror = mirror
        # The audit of the reset being written (under self._lock), read by _admit_commit and
        # by each store's _commit, which keeps it with the commit record; None for a batch.
        self._reset_audit: ResetAudit | None = None
        # The closed-store guard: close() moves the epoch on, and a write begun under an older
        # epoch is refused, so a batch abandoned by a stream's stop never commits after it.
        self._epoch = 0
        self._writes = threading.Condition()
        self._active: dict[int, int] = {}  # epoch -> writes of it in progress

    # -- contract ---------------------------------------------------------------------------
    def load(self, group_id: str, topics: Collection[str] | None = None) -> dict[TopicPartition, int]:
        """Return the committed next offset to read per partition of ``topics`` (every topic of
        the group when None), sorted by partition; ``{}`` on a first start."""
        group_id = self._check_group(group_id)
        wanted = None if topics is None else set(topics)
        stored = self._load(group_id, wanted)
        return {tp: o for tp, o in sorted(stored.items()) if wanted is None or tp.topic in wanted}

    def plan(self, group_id: str, batch_time_ms: int, ranges: Sequence[OffsetRange], *,
             epoch: int | None = None) -> None:
        """Record a batch's ranges before its jobs run (write-ahead). No-op unless the store
        keeps a write-ahead log. ``epoch``: see :attr:`epoch`."""
        group_id, t, planned, _ = self._check_batch_args(group_id, batch_time_ms, ranges)
        epoch = self._epoch if epoch is None else epoch
        with self._open_since(epoch, f"Planning batch {t} of group {group_id!r}"):
            self._plan(group_id, t, planned)

    def pending(self, group_id: str) -> PlannedBatch | None:
        """Return the oldest planned but uncommitted batch, or None (always None without a
        write-ahead log)."""
        return self._pending(self._check_group(group_id))

    def commit(self, group_id: str, batch_time_ms: int, ranges: Sequence[OffsetRange], *,
               epoch: int | None = None) -> None:
        """Atomically store a batch's ``untilOffset`` per partition (see the module rules).

        ``batch_time_ms`` may be the ``datetime`` PySpark's ``foreachRDD`` gives; contiguous
        ranges of one partition are stored as one range. ``epoch``: see :attr:`epoch`.

        Raises
        ------
        OffsetFencedError
            If a range does not start at its partition's stored offset, another batch
            already committed at ``batch_time_ms``, or the store was closed since ``epoch``.
            Nothing is stored.
        """
        group_id, t, _, merged = self._check_batch_args(group_id, batch_time_ms, ranges)
        epoch = self._epoch if epoch is None else epoch
        with self._open_since(epoch, f"Commit of batch {t} of group {group_id!r}"):
            changed = self._commit(group_id, t, merged)
        if changed:
            self._mirror_commit(group_id, merged)

    def reset(self, group_id: str, offsets: Mapping[TopicPartition, int], *,
              expected: Mapping[TopicPartition, int], user: str, host: str,
              batch_time_ms: int | None = None) -> int:
        """Move the stored offsets of ``offsets``' partitions to the given values, audited.

        The reset is a new commit (ranges empty at the new offsets) whose history record
        carries a :class:`ResetAudit`; earlier commits stay. Other partitions keep their offsets.

        Parameters
        ----------
        offsets : mapping
            ``{TopicPartition: next offset to read}``.
        expected : mapping
            The stored offsets the reset was planned from (a partition the store does not hold
            is absent); the write is refused if the store holds anything else by then.
        user, host : str
            Who resets, from where (kept in the audit).
        batch_time_ms : int, optional
            The commit's batch time; default now, and always after the newest commit.

        Returns
        -------
        int
            The batch time of the reset commit.

        Raises
        ------
        OffsetFencedError
            If a stream planned a batch it has not committed (it holds the store), or the
            stored offsets changed since ``expected`` was read. Nothing is stored.
        """
        import time

        group_id = self._check_group(group_id)
        wanted = {as_topic_partition(tp): o for tp, o in offsets.items()}
        if not wanted:
            raise ConfigurationError("a reset needs at least one partition")
        ranges = tuple(OffsetRange(tp.topic, tp.partition, o, o) for tp, o in sorted(wanted.items()))
        audit = ResetAudit(user, host, {as_topic_partition(tp): int(o) for tp, o in expected.items()
                                        if as_topic_partition(tp) in wanted})
        with self._lock:
            pending = self._pending(group_id)
            if pending is not None:
                raise OffsetFencedError(
                    f"Reset refused: a stream holds group {group_id!r} (batch {pending.batch_time_ms} is "
                    "planned but not committed). Stop the stream, or let it finish the batch, and reset "
                    "again; nothing was stored.")
            newest = self._history(group_id, 1)
            t = int(time.time() * 1000) if batch_time_ms is None else batch_time_to_ms(batch_time_ms)
            if newest and t <= newest[0].batch_time_ms:
                t = newest[0].batch_time_ms + 1
            self._reset_audit = audit
            try:
                changed = self._commit(group_id, t, ranges)
            finally:
                self._reset_audit = None
        if changed:
            self._mirror_commit(group_id, ranges)
        return t

    def history(self, group_id: str, limit: int = 20) -> list[CommitRecord]:
        """Return up to ``limit`` committed batches of the group, newest first."""
        return self._history(self._check_group(group_id), limit)

    def record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                         batch_time_ms: int | None, *, epoch: int | None = None) -> None:
        """Durably record that ``[lost_from, lost_until)`` of ``tp`` was skipped; if the stored
        offset of ``tp`` is ``lost_from`` it moves to ``lost_until`` atomically with the record."""
        group_id = self._check_group(group_id)
        tp = as_topic_partition(tp)
        OffsetRange(tp.topic, tp.partition, lost_from, lost_until)  # validates the bounds
        epoch = self._epoch if epoch is None else epoch
        with self._open_since(epoch, f"Recording a data loss of group {group_id!r}"):
            self._record_data_loss(group_id, tp, lost_from, lost_until, batch_time_ms)

    def data_losses(self, group_id: str) -> list[DataLossRecord]:
        """Return every recorded data loss of the group, oldest first."""
        return self._data_losses(self._check_group(group_id))

    def last_reset(self, group_id: str) -> CommitRecord | None:
        """Return the group's newest commit when it is a reset (its ``reset`` audit says who
        moved which offsets from where), else None. A stream starting from it logs so."""
        return self._last_reset(self._check_group(group_id))

    @property
    def keeps_group_offsets(self) -> bool:
        """Whether the store's offsets are the Kafka consumer group's committed offsets
        themselves (the Kafka group store), so the stream's group needs no copy of them."""
        return False

    @property
    def mirrors_to_group(self) -> bool:
        """Whether the store copies its commits to the Kafka consumer group, for lag tools
        (``also_commit_to_kafka_group``, :mod:`dstream_kafka.stores.mirror`). False for a store
        with the mirror off and for those whose offsets are no copy (the Kafka group store)."""
        return self._mirror is not None

    def committed_in(self, group_id: str, batch_time_ms: int) -> bool:
        """Return whether this store committed the batch at ``batch_time_ms`` itself (inside a
        transaction), so the stream must not commit it again. False unless transactional."""
        return self._committed_in(self._check_group(group_id), batch_time_to_ms(batch_time_ms))

    @property
    def epoch(self) -> int:
        """How many times the store was closed. A write given the ``epoch`` it began under (a
        stream passes the one it started with) is refused once the store was closed since,
        so a stopped stream's batch never commits after the stop; a write given none is
        fenced from its own start. A write in progress delays :meth:`close` until it ends.
        Reads and new writes reopen a closed store."""
        return self._epoch

    @contextlib.contextmanager
    def _open_since(self, epoch: int, what: str) -> Iterator[None]:
        """Run a write that :meth:`close` waits for; refuse it if the store closed since ``epoch``.

        Writes share this section (no lock is held in it, so it orders no other lock)."""
        with self._writes:
            if epoch != self._epoch:
                raise OffsetFencedError(
                    f"{what} refused: the offset store was closed since the write began (the stream "
                    "that planned the batch was stopped); nothing was stored. A stopped stream's "
                    "batches never commit: the next start reads this batch again.")
            self._active[epoch] = self._active.get(epoch, 0) + 1
        try:
            yield
        finally:
            with self._writes:
                self._active[epoch] -= 1
                self._writes.notify_all()

    def close(self) -> None:
        """Release connections and clients; writes begun before are refused (see :attr:`epoch`).

        Waits for a write in progress to end; a later call reopens the store."""
        with self._writes:
            closed, self._epoch = self._epoch, self._epoch + 1
            self._writes.wait_for(lambda: not self._active.get(closed))
            self._active.pop(closed, None)
        if self._mirror is not None:
            self._mirror.close()

    # -- hooks ------------------------------------------------------------------------------
    @abc.abstractmethod
    def _load(self, group_id: str, topics: Collection[str] | None) -> Mapping[TopicPartition, int]:
        """Return the stored offsets of the group (at least those of ``topics``; the template
        filters and sorts)."""

    def _plan(self, group_id: str, batch_time_ms: int, ranges: tuple[OffsetRange, ...]) -> None:
        """Write ``ranges`` ahead (as given, validated); the default keeps no write-ahead log."""

    def _pending(self, group_id: str) -> PlannedBatch | None:
        return None

    @abc.abstractmethod
    def _commit(self, group_id: str, batch_time_ms: int, merged: tuple[OffsetRange, ...]) -> bool:
        """Store the batch atomically, checked by :meth:`_admit_commit` inside the atomic section.

        Returns whether the mirror receives the batch's offsets (False when nothing changed).
        """

    @abc.abstractmethod
    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        ...

    @abc.abstractmethod
    def _record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                          batch_time_ms: int | None) -> None:
        ...

    @abc.abstractmethod
    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        ...

    def _committed_in(self, group_id: str, batch_time_ms: int) -> bool:
        return False

    def _last_reset(self, group_id: str) -> CommitRecord | None:
        """The newest record of :meth:`_history` when it carries a reset audit."""
        newest = self._history(group_id, 1)
        return newest[0] if newest and newest[0].reset is not None else None

    # -- the commit rules -------------------------------------------------------------------
    @staticmethod
    def _admit_commit(group_id: str, batch_time_ms: int, merged: tuple[OffsetRange, ...],
                      committed: Sequence[OffsetRange] | None,
                      read_stored: Callable[[], Mapping[TopicPartition, int]], *,
                      holder: str, place: str, reset: ResetAudit | None = None
                      ) -> Mapping[TopicPartition, int] | None:
        """Apply the commit rules to what a store read inside its atomic section.

        Parameters
        ----------
        committed : sequence of OffsetRange or None
            The ranges the store already holds for ``batch_time_ms``; None when it holds none.
        read_stored : callable
            Returns the stored offsets; called only when the batch is not committed yet.
        holder, place : str
            Where the store keeps commits and offsets, as error messages name them.
        reset : ResetAudit, optional
            The store's ``_reset_audit`` during :meth:`reset`: the stored offsets must then be
            ``reset.previous`` (compare-and-set) instead of continuing into the ranges.

        Returns
        -------
        dict or None
            The stored offsets, which the batch continues, when it must be written; None when
            the same batch was committed before (a re-run: nothing to do).

        Raises
        ------
        OffsetFencedError
            If ``committed`` holds other ranges, or a range does not continue its stored offset
            (for a reset: the stored offsets are not those the reset was planned from).
        """
        audit = reset
        if audit is not None:
            stored = read_stored()
            changed = [f"{r.topic}-{r.partition} holds {stored.get(r.topicPartition(), 'nothing')}, the reset "
                       f"was planned from {audit.previous.get(r.topicPartition(), 'nothing')}"
                       for r in merged if stored.get(r.topicPartition()) != audit.previous.get(r.topicPartition())]
            if committed is not None or changed:
                raise OffsetFencedError(
                    f"Reset of group {group_id!r} refused: {place} changed since the reset was planned ("
                    + ("; ".join(changed) or f"batch {batch_time_ms} exists") + "). A stream is committing "
                    "to this group: stop it and plan the reset again; nothing was stored.")
            return stored
        if committed is not None:
            if tuple(committed) == merged:
                return None
            raise OffsetFencedError(
                f"Commit of batch {batch_time_ms} for group {group_id!r} refused: {holder} already holds "
                f"batch {batch_time_ms} with other ranges ({list(committed)}). Another driver committed it; "
                "nothing was stored.")
        stored = read_stored()
        check_continuation(group_id, stored, merged, place)
        return stored

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
    def _check_keep(name: str, value: Any) -> int:
        """Return a retention setting (``keep_batches``, ``keep_history``): an int >= 1."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"{name} must be an int >= 1, got {value!r}")
        return value

    @staticmethod
    def _check_group(group_id: Any) -> str:
        if not isinstance(group_id, str) or not group_id:
            raise ConfigurationError(f"group_id must be a non-empty string, got {group_id!r}")
        return group_id

    def _check_batch_args(self, group_id: Any, batch_time_ms: Any, ranges: Any
                          ) -> tuple[str, int, tuple[OffsetRange, ...], tuple[OffsetRange, ...]]:
        """Return the group id, the batch time in ms, the ranges as given and the merged ranges."""
        group_id = self._check_group(group_id)
        t = batch_time_to_ms(batch_time_ms)
        given = as_ranges(ranges)
        return group_id, t, given, merge_ranges(given)


def check_offset_store(value: Any) -> None:
    """Refuse an ``offsetStore`` argument that is not an offset store, saying what is accepted.

    A string (a file name, a store URI) is the likeliest mistake: the message names the
    factories and :func:`~dstream_kafka.stores.uri.open_store`, which turns a store URI into a
    store. Nothing is opened or created here.

    Raises
    ------
    ConfigurationError
        Naming ``offsetStore``, what it got and the accepted forms.
    """
    if value is None or isinstance(value, OffsetStore):
        return
    accepted = ("an offset store: OffsetStores.sqlite(path), .postgres(dsn), .checkpoint(dir), "
                ".kafka(kafkaParams), .zookeeper(hosts) or .hbase(host, port), a subclass of "
                "dstream_kafka.stores.OffsetStore, or None")
    if isinstance(value, (str, bytes)) or hasattr(value, "__fspath__"):
        raise ConfigurationError(
            f"offsetStore={str(value)!r} is a {type(value).__name__}, not a store; pass "
            f"{accepted}. "
            "For a store URI (sqlite:///PATH, postgresql://USER@HOST/DB, checkpoint:DIR, "
            "kafka://HOST:PORT, zookeeper://HOST:PORT/ROOT, hbase://HOST:PORT/TABLE) use "
            "dstream_kafka.stores.uri.open_store(uri)")
    raise ConfigurationError(f"offsetStore must be {accepted}; got a {type(value).__name__}")
