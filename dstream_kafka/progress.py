"""What each completed batch of a direct stream read, and who hears about it.

:class:`BatchProgress` is one batch's record (Structured Streaming's ``StreamingQueryProgress``
in spirit, with DStream field names); :class:`ProgressTracker` keeps the most recent ones and
calls the listeners a stream's user added, on the scheduler thread, after each batch's commit.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from dstream_kafka.offsets import OffsetRange, TopicPartition

__all__ = ["BatchProgress", "ProgressListener", "ProgressTracker"]

logger = logging.getLogger(__name__)

#: How many completed batches ``recentProgress`` keeps.
RECENT_PROGRESS = 100


@dataclass(frozen=True)
class BatchProgress:
    """What one completed batch read and how long it took (all times in milliseconds).

    ``offsetsBehindLatest`` is, per partition, how far this batch's until offset stayed behind
    the latest offset seen when the batch was planned (0 when the batch caught up). ``planMs``
    is the driver time spent planning the batch (latest offsets, rate limits, write-ahead log,
    RDD creation); ``commitMs`` the time spent committing it (offset store and commitAsync).
    """

    batchTime: int
    ranges: tuple[OffsetRange, ...]
    numRecords: int
    inputRate: float
    processingRate: float
    schedulingDelay: int | None
    processingDelay: int | None
    offsetsBehindLatest: dict[TopicPartition, int] = field(default_factory=dict)
    planMs: float = 0.0
    commitMs: float = 0.0

    def describe(self) -> str:
        """Spark's input description: one line per non-empty range, largest first."""
        return describe_ranges(self.ranges)


def describe_ranges(ranges: Sequence[OffsetRange]) -> str:
    """Spark's input description of ``ranges``: one line per non-empty range, largest first."""
    lines = [f"topic: {r.topic}\tpartition: {r.partition}\toffsets: {r.fromOffset} to "
             f"{r.untilOffset}\tcount: {r.count()}"
             for r in sorted(ranges, key=lambda r: -r.count()) if r.count()]
    return "\n".join(lines)


ProgressListener = Callable[[BatchProgress], None]


class ProgressTracker:
    """The recent progress of one stream and the listeners to tell.

    Attributes
    ----------
    recent : collections.deque of BatchProgress
        The last :data:`RECENT_PROGRESS` batches, oldest first.
    """

    def __init__(self) -> None:
        self.recent: collections.deque[BatchProgress] = collections.deque(maxlen=RECENT_PROGRESS)
        self._listeners: list[ProgressListener] = []

    def add_listener(self, listener: ProgressListener) -> None:
        """Call ``listener(progress)`` after each completed batch."""
        self._listeners.append(listener)

    def record(self, batch_time: int, ranges: Sequence[OffsetRange],
               behind: Mapping[TopicPartition, int], batch_duration_s: float,
               processing: int | None, scheduling: int | None, plan_ms: float,
               commit_ms: float) -> BatchProgress:
        """Record one completed batch and return its progress (listeners are told by
        :meth:`notify`)."""
        records = sum(r.count() for r in ranges)
        progress = BatchProgress(
            batchTime=batch_time, ranges=tuple(ranges), numRecords=records,
            inputRate=records / batch_duration_s if batch_duration_s else 0.0,
            processingRate=(records * 1000.0 / processing) if processing else 0.0,
            schedulingDelay=scheduling, processingDelay=processing,
            offsetsBehindLatest=dict(behind), planMs=plan_ms, commitMs=commit_ms,
        )
        self.recent.append(progress)
        return progress

    def notify(self, progress: BatchProgress) -> None:
        """Call every listener with ``progress``.

        A listener that raises is logged and stops neither the others nor the stream.
        """
        for listener in list(self._listeners):
            try:
                listener(progress)
            except Exception:  # a user's listener must not fail the batch
                logger.exception("Progress listener %r failed", listener)
