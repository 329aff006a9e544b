"""How a direct stream's partition positions move batch by batch; deleted partitions as data loss.

Every batch, the positions follow the group's assignment: a revoked partition fails the batch
(as in Spark), a new one starts where :mod:`dstream_kafka.plan.start_positions` says. A batch's
ranges run from the positions to the latest offsets, and the positions then move to the ranges'
ends; the uncommitted batch found at start is re-run first with exactly its ranges. A tracked
partition that no longer exists in Kafka (its topic was deleted) lost nothing when every record
seen in it was planned; otherwise the loss fails the stream, or with ``failOnDataLoss=False`` is
recorded in the offset store and the stream goes on without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dstream_kafka.errors import DataLossError, PartitionsRevokedError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.plan.start_positions import StartPositions

if TYPE_CHECKING:
    from dstream_kafka.stores.base import OffsetStore

__all__ = ["PartitionPositions"]

log = logging.getLogger(__name__)

_REVOKED = (
    "Previously tracked partitions {parts} been revoked by Kafka because of consumer rebalance. "
    "This is mostly due to another stream with same group id joined, please check if there're "
    "different streaming application misconfigure to use same group id. Fundamentally "
    "different stream should use different group id"
)


class PartitionPositions(StartPositions):
    """The next offset to read of every partition a stream reads, on the driver, batch by batch.

    Constructed as :class:`~dstream_kafka.plan.start_positions.StartPositions`, which places
    the partitions at start (:meth:`load`, :meth:`start`); this class moves them per batch.
    """

    def note_ends(self, latest: Mapping[TopicPartition, int]) -> None:
        """Remember the end offsets just looked up (see :meth:`lose`)."""
        self.known_ends.update(latest)

    def lose(self, partitions: Collection[TopicPartition], store: OffsetStore | None) -> None:
        """Stop tracking ``partitions``, which no longer exist in Kafka (topic deleted).

        A partition whose position had reached its last known end offset (every record the
        stream saw in it was planned) lost nothing: its deletion is logged and the stream
        goes on without it. The others, and those whose end was never looked up, had records
        not read yet: with ``failOnDataLoss=False`` the loss is logged and recorded in
        ``store`` (the range from the partition's position, whose end is unknown, is recorded
        as empty) and the stream goes on without them.

        Raises
        ------
        DataLossError
            Naming the partitions with unread records, when data loss fails the stream.
        """
        if not partitions:
            return
        done = {tp for tp in partitions
                if tp in self.current and self.current[tp] >= self.known_ends.get(tp, self.current[tp] + 1)}
        if done:
            log.warning("Topic %s was deleted from Kafka; every record of partitions %s had been read "
                           "or planned (nothing is lost; a planned batch whose records are gone "
                           "fails on its executors): continuing without it",
                           ", ".join(sorted({repr(tp.topic) for tp in done})),
                           ", ".join(f"{tp.topic}-{tp.partition} (up to offset {self.current[tp]})"
                                     for tp in sorted(done)))
            for tp in done:
                self.lost.add(tp)
                self.current.pop(tp)
        unread = set(partitions) - done
        if not unread:
            return
        names = ", ".join(f"{tp.topic}-{tp.partition} (at offset {self.current.get(tp)})"
                          for tp in sorted(unread))
        ends = ", ".join(f"{tp.topic}-{tp.partition} {self.known_ends[tp]}" for tp in sorted(unread)
                         if tp in self.known_ends)
        topics = ", ".join(sorted({repr(tp.topic) for tp in unread}))
        problem = (f"partitions {names} no longer exist in Kafka: topic {topics} was deleted while "
                   f"group {self.store_group} was reading it")
        if self.fail_on_data_loss:
            raise DataLossError(problem + "; records not read yet are lost"
                                + (f" (last known end offsets: {ends})" if ends else "") + ". Recreate the topic and "
                                "restore its data, or set failOnDataLoss=False to continue without "
                                "it (the loss is recorded in the offset store)")
        log.warning("%s; continuing without them (failOnDataLoss=False)", problem)
        for tp in sorted(unread):
            self.lost.add(tp)
            off = self.current.pop(tp, None)
            if store is not None and off is not None:
                store.record_data_loss(self.store_group, tp, off, off, None)

    # ------------------------------------------------------------------ while running
    def track(self, consumer: Any, assigned: set[TopicPartition],
              store: OffsetStore | None = None) -> None:
        """Follow the group's assignment: fail on revoked partitions, start new ones.

        A tracked partition that left the assignment because it no longer exists in Kafka
        (its topic was deleted) is data loss, handled by :meth:`lose`.

        Raises
        ------
        PartitionsRevokedError
            When a tracked partition is no longer assigned (another stream shares the group).
        DataLossError
            When a tracked partition was deleted and data loss fails the stream.
        """
        revoked = set(self.current) - assigned
        if revoked:
            gone = self.find_vanished(consumer, sorted(revoked))
            self.lose(gone, store)
            revoked -= gone
        if revoked:
            raise PartitionsRevokedError(_REVOKED.format(parts=sorted(revoked)))
        self.lost &= assigned  # once out of the assignment, a partition may come back anew
        new = sorted(assigned - set(self.current) - self.lost)
        if new:
            # The starting options are for the start, not for partitions found later.
            pending = self._first_start_pending
            self.place(consumer, store, new, first_start=pending, use_options=pending)
            self._first_start_pending = False

    def latest_of(self, consumer: Any, assigned: set[TopicPartition], store: OffsetStore | None,
                  look_up: Callable[[Sequence[TopicPartition]], dict[TopicPartition, int]],
                  ) -> dict[TopicPartition, int]:
        """Track ``assigned`` (:meth:`track`) and return the latest offsets ``look_up`` finds
        for the tracked partitions; partitions deleted meanwhile are data loss (:meth:`lose`)
        and left out."""
        from dstream_kafka.client.latest_offsets import PartitionsGone

        self.track(consumer, assigned, store)
        parts = assigned & set(self.current)  # less the deleted partitions given up
        try:
            latest = look_up(sorted(parts))
        except PartitionsGone as gone:
            # Deleted under the stream: data loss when records were left unread (fails, or is
            # recorded and skipped); a partition read to its end is only given up.
            self.lose(gone.partitions, store)
            latest = look_up(sorted(parts - gone.partitions))
        self.note_ends(latest)
        return latest

    def take_replay(self, latest: Mapping[TopicPartition, int]) -> tuple[int, dict[TopicPartition, int]] | None:
        """Return the pending batch's store time and until offsets, once; None without one.

        The positions move back to the batch's from offsets. Tracked partitions the batch did
        not know yet keep their position (an empty range) and start from there next batch.
        """
        if self.replay is None:
            return None
        replay_time, ranges = self.replay
        self.replay = None
        until = {r.topicPartition(): r.untilOffset for r in ranges}
        for r in ranges:
            self.current[r.topicPartition()] = r.fromOffset
        until.update({tp: self.current[tp] for tp in latest if tp not in until})
        return replay_time, until

    def ranges_to(self, until: Mapping[TopicPartition, int]) -> list[OffsetRange]:
        """Return the ranges from the positions to ``until``, ordered by partition."""
        return [OffsetRange(tp.topic, tp.partition, self.current[tp], until[tp])
                for tp in sorted(until)]

    def advance(self, until: Mapping[TopicPartition, int], assigned: Collection[TopicPartition],
                replaying: bool) -> None:
        """Move the positions to ``until`` once a batch is planned.

        A re-run batch may cover partitions the group has not ``assigned`` to this driver
        yet: they are remembered as unassigned rather than tracked, or the next batch would
        take them for revoked.
        """
        self.current.update(until)
        if replaying:
            for tp in [tp for tp in until if tp not in assigned]:
                self.unassigned[tp] = self.current.pop(tp)

