"""The ``commitAsync`` queue of a direct stream: offsets to commit to the user's Kafka group.

Spark's ``DirectKafkaInputDStream`` keeps a queue that ``commitAsync`` fills from any thread and
sends with ``KafkaConsumer.commitAsync`` without waiting for the broker. Here the stream sends it
once every output operation of a batch has finished (never before), as one commit of the
highest ``untilOffset`` per partition. The broker's answer arrives on the Kafka client's I/O
thread; results wait in this queue until the stream's planning thread hands them to the
callback (at the next batch, or when the stream stops), as Kafka's consumer runs commit
callbacks on the thread that polls it.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any, Callable, Sequence

from dstream_kafka.errors import OffsetCommitError
from dstream_kafka.offsets import OffsetRange, TopicPartition

__all__ = ["CommitCallback", "CommitQueue", "COMMIT_WAIT_ON_STOP_S"]

log = logging.getLogger(__name__)

#: ``callback(offsets, error)``: offsets is {TopicPartition: untilOffset}; error is None on success.
CommitCallback = Callable[[dict[Any, Any], "Exception | None"], None]

#: Longest time a stopping stream waits for commits still in flight.
COMMIT_WAIT_ON_STOP_S = 30.0


class CommitQueue:
    """Offset ranges queued by ``commitAsync`` for one Kafka group; thread-safe.

    Parameters
    ----------
    group_id : str
        The group the offsets are committed to (named in errors).
    """

    def __init__(self, group_id: str | None) -> None:
        self.group_id = group_id
        self._ranges: collections.deque[OffsetRange] = collections.deque()
        self._lock = threading.Lock()
        self._callback: CommitCallback | None = None
        self._pending: list[Any] = []  # kafka-python futures of commits sent, not yet answered
        self._finished: collections.deque[tuple[CommitCallback | None, dict[Any, Any], Exception | None]] = (
            collections.deque())

    def add(self, ranges: Sequence[OffsetRange], callback: CommitCallback | None = None) -> None:
        """Queue ``ranges``; a ``callback`` replaces the previous one (Spark keeps only the last)."""
        with self._lock:
            if callback is not None:
                self._callback = callback
            self._ranges.extend(ranges)

    def send(self, commit_async: Callable[[dict[Any, Any]], Any]) -> None:
        """Send everything queued as one commit through ``commit_async(offsets) -> future``.

        Does not wait for the answer. An error raised while sending reaches the callback like
        an error answer.
        """
        self.deliver()
        with self._lock:
            queued = list(self._ranges)
            self._ranges.clear()
            callback = self._callback
        if not queued:
            return
        highest: dict[TopicPartition, int] = {}
        for r in queued:
            tp = r.topicPartition()
            highest[tp] = max(highest.get(tp, r.untilOffset), r.untilOffset)
        from kafka import TopicPartition as KTP
        from kafka.structs import OffsetAndMetadata

        def finished(outcome: Any) -> None:  # runs on the Kafka client's I/O thread
            error = None
            if isinstance(outcome, BaseException):
                error = OffsetCommitError(
                    f"committing {highest} to group {self.group_id} failed: {outcome}")
                log.warning("%s", error)
            self._finished.append((callback, dict(highest), error))

        try:
            future = commit_async({KTP(tp.topic, tp.partition): OffsetAndMetadata(off, "", -1)
                                   for tp, off in highest.items()})
        except Exception as exc:  # reported to the callback, as Kafka's OffsetCommitCallback
            finished(exc)
            return
        with self._lock:
            self._pending = [f for f in self._pending if not f.is_done] + [future]
        future.add_both(finished)

    def in_flight(self) -> int:
        """Commits sent and not answered yet."""
        with self._lock:
            return sum(1 for f in self._pending if not f.is_done)

    def deliver(self, wait_s: float = 0.0) -> None:
        """Run the callbacks of answered commits, after waiting up to ``wait_s`` for the rest."""
        deadline = time.monotonic() + wait_s
        while wait_s and self.in_flight():
            if time.monotonic() >= deadline:
                log.warning("%d Kafka offset commit(s) to group %s still unanswered after "
                               "%.0f s; not waiting longer", self.in_flight(), self.group_id, wait_s)
                break
            time.sleep(0.005)
        while self._finished:
            callback, offsets, error = self._finished.popleft()
            if callback is not None:
                try:
                    callback(offsets, error)
                except Exception:
                    log.exception("commitAsync callback %r failed", callback)
