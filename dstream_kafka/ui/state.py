"""What the Streaming page shows, kept on the driver while a context runs.

:class:`PageState` is fed from two sides: :class:`PageListener`, a
:class:`~dstream_kafka.streaming.listener.StreamingListener` on the context's bus (batches
queued, running, completed, output operations, the Spark job ids of each batch), and
:meth:`PageState.stream_feed`, a progress output of each direct stream (offset ranges, lag,
commit cost, data-loss records). Everything is bounded: the completed batches by
``spark.streaming.kafka.ui.retainedBatches`` (Spark's ``spark.streaming.ui.retainedBatches``,
default 1000), the progress per stream likewise. Readers get copies taken under one lock, so the
HTTP threads never see a half-updated batch. Nothing here holds Kafka parameters, so no secret
can reach the page.
"""

from __future__ import annotations

import collections
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from dstream_kafka.offsets import OffsetRange
from dstream_kafka.streaming.listener import (BatchInfo, OutputOperationInfo, StreamingListener,
                                              StreamingListenerBatchCompleted,
                                              StreamingListenerBatchStarted,
                                              StreamingListenerBatchSubmitted,
                                              StreamingListenerOutputOperationCompleted)

__all__ = ["BatchRow", "DataLossRow", "PageState", "PageListener", "StreamView", "job_group",
           "job_group_setter"]

_BATCH_TIME = re.compile(r"batch time (\d+) ms")


def job_group(batch_time: int) -> str:
    """The Spark job group of the jobs of batch ``batch_time`` (epoch ms)."""
    return f"dstream_kafka-batch-{batch_time}"


def job_group_setter(sc: Any) -> Callable[[str], None]:
    """A ``set_job_description`` for the scheduler that also puts each job in its batch's
    job group, so the page finds the batch's Spark jobs with the status tracker."""
    def set_group(description: str) -> None:
        found = _BATCH_TIME.search(description)
        if found is None:
            sc.setJobDescription(description)
        else:
            sc.setJobGroup(job_group(int(found.group(1))), description)
    return set_group


@dataclass(frozen=True)
class BatchRow:
    """One batch as the page shows it: the bus's :class:`BatchInfo` (times in epoch ms,
    durations in ms, the delays as Spark defines them) with the batch's offset ranges and
    Spark jobs."""

    info: BatchInfo
    ranges: tuple[OffsetRange, ...]
    job_ids: tuple[int, ...] = ()
    completed: bool = False

    @property
    def batch_time(self) -> int:
        return self.info.batch_time

    @property
    def submission_time(self) -> int:
        return self.info.submission_time

    @property
    def records(self) -> int:
        return self.info.num_records

    @property
    def start_time(self) -> int | None:
        return self.info.processing_start_time

    @property
    def end_time(self) -> int | None:
        return self.info.processing_end_time

    @property
    def operations(self) -> Mapping[int, OutputOperationInfo]:
        return self.info.output_operation_infos

    @property
    def status(self) -> str:
        """``queued``, ``processing``, ``completed`` or ``failed``."""
        if self.failure is not None:
            return "failed"
        if self.completed:
            return "completed"
        return "queued" if self.start_time is None else "processing"

    @property
    def failure(self) -> str | None:
        """The first failed output operation's error text, or None."""
        for op in sorted(self.operations.values(), key=lambda o: o.operation_id):
            if op.failure_reason:
                return op.failure_reason
        return None

    @property
    def scheduling_delay(self) -> int | None:
        """Spark's scheduling delay: processing start minus submission."""
        return self.info.scheduling_delay

    @property
    def processing_time(self) -> int | None:
        """Spark's processing time: processing end minus start."""
        return self.info.processing_delay

    @property
    def total_delay(self) -> int | None:
        """Scheduling delay plus processing time."""
        return self.info.total_delay

    def jsonValue(self) -> dict[str, Any]:
        """Spark's REST ``BatchInfo`` field names (``/api/v1/.../streaming/batches``), plus the
        offset ranges and job ids."""
        ops = list(self.operations.values())
        return {
            "batchId": self.batch_time, "batchTime": self.batch_time,
            "status": {"queued": "QUEUED", "processing": "PROCESSING"}.get(
                self.status, "COMPLETED"),
            "inputSize": self.records, "schedulingDelay": self.scheduling_delay,
            "processingTime": self.processing_time, "totalDelay": self.total_delay,
            "numActiveOutputOps": sum(1 for o in ops if o.end_time is None),
            "numCompletedOutputOps": sum(1 for o in ops if o.end_time is not None
                                         and not o.failure_reason),
            "numFailedOutputOps": sum(1 for o in ops if o.failure_reason),
            "firstFailureReason": self.failure, "jobIds": list(self.job_ids),
            "offsetRanges": [{"topic": r.topic, "partition": r.partition,
                              "fromOffset": r.fromOffset, "untilOffset": r.untilOffset}
                             for r in self.ranges],
        }


@dataclass(frozen=True)
class DataLossRow:
    """One data-loss record of a stream, as its offset store recorded it."""

    stream: int
    topic: str
    partition: int
    lost_from: int
    lost_until: int
    recorded_at: str


@dataclass
class StreamView:
    """One direct stream's progress and data-loss records."""

    stream: int
    description: str
    store: str
    progress: collections.deque[Any]
    data_loss: list[DataLossRow] = field(default_factory=list)
    losses_seen: int = 0
    lag: collections.deque[Any] = field(default_factory=collections.deque)
    verdict: Any = None
    losses: int = 0  # data-loss events counted (losses_seen: those the page has re-read)


def _ranges(info: BatchInfo) -> tuple[OffsetRange, ...]:
    found: list[OffsetRange] = []
    for input_info in info.stream_id_to_input_info.values():
        found += [r for r in input_info.metadata.get("offsets", ()) if isinstance(r, OffsetRange)]
    return tuple(found)


class PageState:
    """Thread-safe state of one context's Streaming page.

    Parameters
    ----------
    batch_ms : int
        The context's batch interval.
    retained : int
        Completed batches (and progress records per stream) kept.
    spark_ui : str or None
        ``sc.uiWebUrl``, for links to the Spark UI's job pages.
    cache_counters : callable, optional
        Returns the executors' consumer-cache counters summed (see
        :func:`dstream_kafka.ui.metrics.executor_cache_counters`).
    """

    def __init__(self, batch_ms: int, retained: int, spark_ui: str | None, app_name: str = "",
                 cache_counters: Callable[[], Mapping[str, int]] | None = None) -> None:
        self.batch_ms = batch_ms
        self.retained = retained
        self.spark_ui = spark_ui
        self.app_name = app_name
        self.started_ms = int(time.time() * 1000)
        self.cache_counters = cache_counters or (lambda: {})
        self._lock = threading.Lock()
        self._active: dict[int, BatchRow] = {}
        self._completed: collections.deque[BatchRow] = collections.deque(maxlen=retained)
        self._streams: dict[int, StreamView] = {}
        self.total_completed = 0
        self.total_records = 0

    # -- feeding --------------------------------------------------------------------------

    def submitted(self, info: BatchInfo) -> None:
        """A batch was generated and queued."""
        with self._lock:
            self._active[info.batch_time] = BatchRow(info, _ranges(info))

    def started(self, info: BatchInfo) -> None:
        """A batch's first output operation is about to run."""
        with self._lock:
            row = self._active.get(info.batch_time)
            if row is not None:
                self._active[info.batch_time] = replace(row, info=replace(
                    row.info, processing_start_time=info.processing_start_time))

    def operation_completed(self, op: OutputOperationInfo) -> None:
        """An output operation of a batch ended."""
        with self._lock:
            row = self._active.get(op.batch_time)
            if row is not None:
                self._active[op.batch_time] = replace(row, info=replace(
                    row.info, output_operation_infos={**row.operations, op.operation_id: op}))

    def completed(self, info: BatchInfo, job_ids: tuple[int, ...]) -> None:
        """All output operations of a batch ended; ``job_ids`` are its Spark jobs."""
        with self._lock:
            queued = self._active.pop(info.batch_time, None)
            row = BatchRow(info, queued.ranges if queued else _ranges(info), job_ids,
                           completed=True)
            self._completed.append(row)
            self.total_completed += 1
            self.total_records += row.records

    def stream_feed(self, stream: int, description: str, store: Any,
                    group: str) -> Callable[[Any], None]:
        """The progress output of direct stream ``stream``: keeps its progress and, when its
        data-loss count (:meth:`count_data_loss`) grew, re-reads the loss records from
        ``store`` (on the stream's scheduler thread, which is also the one committing, so the
        store is not shared)."""
        store_name = "none" if store is None else type(store).__name__
        with self._lock:
            view = StreamView(stream, description, store_name,
                              collections.deque(maxlen=self.retained))
            self._streams[stream] = view

        def feed(progress: Any) -> None:
            with self._lock:
                losses = view.losses
            rows: list[DataLossRow] | None = None
            if losses != view.losses_seen and store is not None:
                rows = [DataLossRow(stream, r.topic, r.partition, r.lost_from, r.lost_until,
                                    r.recorded_at.isoformat(timespec="seconds"))
                        for r in store.data_losses(group)]
            with self._lock:
                view.progress.append(progress)
                view.losses_seen = losses
                if rows is not None:
                    view.data_loss = rows
        return feed

    def count_data_loss(self, stream: int) -> None:
        """Direct stream ``stream`` skipped deleted records: its next progress re-reads the
        loss records."""
        with self._lock:
            view = self._streams.get(stream)
            if view is not None:
                view.losses += 1

    def lag_feed(self, stream: int) -> Callable[[Any, Any], None]:
        """The lag-timer listener of stream ``stream``: keeps its samples (as many as the
        retained batches) and its latest verdict."""
        def feed(sample: Any, verdict: Any) -> None:
            with self._lock:
                view = self._streams.get(stream)
                if view is None:
                    return
                if view.lag.maxlen is None:
                    view.lag = collections.deque(view.lag, maxlen=self.retained)
                view.lag.append(sample)
                view.verdict = verdict
        return feed

    # -- reading --------------------------------------------------------------------------

    def snapshot(self) -> tuple[list[BatchRow], list[BatchRow], list[StreamView]]:
        """Copies of (active batches by time, completed batches oldest first, streams)."""
        with self._lock:
            streams = [StreamView(v.stream, v.description, v.store,
                                  collections.deque(v.progress), list(v.data_loss), v.losses_seen,
                                  collections.deque(v.lag), v.verdict, v.losses)
                       for v in sorted(self._streams.values(), key=lambda v: v.stream)]
            return (sorted(self._active.values(), key=lambda r: r.batch_time),
                    list(self._completed), streams)

    def batch(self, batch_time: int) -> BatchRow | None:
        """The active or retained batch at ``batch_time``, or None."""
        with self._lock:
            if batch_time in self._active:
                return self._active[batch_time]
            return next((r for r in self._completed if r.batch_time == batch_time), None)


class PageListener(StreamingListener):
    """Feeds a :class:`PageState` from the context's listener bus.

    ``job_ids(batch_time)`` returns the Spark job ids of a batch (the status tracker's jobs of
    its job group); it is called on the bus thread when the batch completes.
    """

    def __init__(self, state: PageState, job_ids: Callable[[int], tuple[int, ...]]) -> None:
        self.state = state
        self.job_ids = job_ids

    def onBatchSubmitted(self, batchSubmitted: StreamingListenerBatchSubmitted) -> None:
        self.state.submitted(batchSubmitted.batchInfo())

    def onBatchStarted(self, batchStarted: StreamingListenerBatchStarted) -> None:
        self.state.started(batchStarted.batchInfo())

    def onOutputOperationCompleted(
            self, outputOperationCompleted: StreamingListenerOutputOperationCompleted) -> None:
        self.state.operation_completed(outputOperationCompleted.outputOperationInfo())

    def onBatchCompleted(self, batchCompleted: StreamingListenerBatchCompleted) -> None:
        info = batchCompleted.batchInfo()
        self.state.completed(info, self.job_ids(info.batch_time))
