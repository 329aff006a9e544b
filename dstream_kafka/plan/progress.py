"""What each completed batch of a direct stream read, and who hears about it.

:class:`BatchProgress` is one batch's record (Structured Streaming's ``StreamingQueryProgress``
in spirit, with DStream field names); :class:`ProgressTracker` keeps the most recent ones and
calls the listeners a stream's user added, on the scheduler thread, after each batch's commit.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from dstream_kafka import config as _config
from dstream_kafka.config import SparkConfReader
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.streaming.outputs import (DataLoss, StreamOutput, StreamRun,
                                             register_stream_output, stream_label, stream_outputs)

__all__ = ["BatchProgress", "ProgressListener", "ProgressTracker"]

log = logging.getLogger(__name__)

#: How many completed batches ``recentProgress`` keeps.
RECENT_PROGRESS = 100


@dataclass(frozen=True)
class BatchProgress:
    """What one completed batch read and how long it took (all times in milliseconds).

    ``offsetsBehindLatest`` is, per partition, how far this batch's until offset stayed behind
    the latest offset seen when the batch was planned (0 when the batch caught up). ``planMs``
    is the driver time spent planning the batch (latest offsets, rate limits, write-ahead log,
    RDD creation); ``commitMs`` the time spent committing it (offset store and commitAsync).

    ``lag`` is the stream's lag timer's latest sample and verdict when the batch completed
    (:meth:`dstream_kafka.monitor.lag.LagSample.jsonValue` plus ``status``, ``cause`` and
    ``evidence``), or None when the timer is off.

    ``id`` is the stream's identity across restarts (a UUID derived from the offset store's
    group and the stream's position in the context), ``runId`` is new each time the stream
    starts, ``batchId`` counts the completed batches of this run from 0 and ``description``
    names the stream. A progress holds no Kafka parameters, so no secret can reach its JSON.
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
    id: str = ""
    runId: str = ""
    batchId: int = 0
    description: str = ""
    lag: dict[str, Any] | None = None

    @property
    def timestamp(self) -> str:
        """The batch time as ISO-8601 UTC with milliseconds, as Structured Streaming writes it."""
        return iso_timestamp(self.batchTime)

    def jsonValue(self) -> dict[str, Any]:
        """This progress as a JSON-ready dict with Structured Streaming's field names.

        ``durationMs`` holds ``addBatch`` (the processing delay: the batch's output jobs),
        ``commitOffsets`` (``commitMs``), ``triggerExecution`` (their sum with ``planBatch``:
        the driver and job time of the batch, without its wait in the queue), and this
        library's ``planBatch`` (``planMs``) and ``schedulingDelay``; a delay that is unknown
        is left out. ``sources`` has one entry
        (the stream) whose offsets are Structured Streaming's ``{"topic": {"0": 23}}`` JSON;
        ``latestOffset`` is the until offset plus the offsets behind latest. Topics and
        partitions appear in ascending order.
        """
        ranges = sorted(self.ranges, key=lambda r: (r.topic, r.partition))
        behind = {tp: self.offsetsBehindLatest[tp] for tp in sorted(self.offsetsBehindLatest)}
        durations: dict[str, float | int] = {"planBatch": self.planMs}
        if self.schedulingDelay is not None:
            durations["schedulingDelay"] = self.schedulingDelay
        if self.processingDelay is not None:
            durations["addBatch"] = self.processingDelay
        durations["commitOffsets"] = self.commitMs
        if self.processingDelay is not None:
            durations["triggerExecution"] = trigger_execution_ms(
                self.planMs, self.processingDelay, self.commitMs)
        lag = list(behind.values())
        source = {
            "description": self.description,
            "startOffset": _offsets_json((r.topic, r.partition, r.fromOffset) for r in ranges),
            "endOffset": _offsets_json((r.topic, r.partition, r.untilOffset) for r in ranges),
            "latestOffset": _offsets_json(
                (r.topic, r.partition, r.untilOffset + behind.get(r.topicPartition(), 0))
                for r in ranges),
            "numInputRows": self.numRecords,
            "inputRowsPerSecond": self.inputRate,
            "processedRowsPerSecond": self.processingRate,
            "metrics": {} if not lag else {
                "minOffsetsBehindLatest": str(min(lag)),
                "maxOffsetsBehindLatest": str(max(lag)),
                "avgOffsetsBehindLatest": str(sum(lag) / len(lag)),
            },
        }
        return {
            "id": self.id,
            "runId": self.runId,
            "batchId": self.batchId,
            "timestamp": self.timestamp,
            "batchTime": self.batchTime,
            "numInputRows": self.numRecords,
            "inputRowsPerSecond": self.inputRate,
            "processedRowsPerSecond": self.processingRate,
            "durationMs": durations,
            "sources": [source],
            "offsetsBehindLatest": _offsets_json((tp[0], tp[1], n) for tp, n in behind.items()),
            **({} if self.lag is None else {"lag": self.lag}),
        }

    def json(self) -> str:
        """This progress as compact one-line JSON (see :meth:`jsonValue` for the fields)."""
        return json.dumps(self.jsonValue(), separators=(",", ":"))

    def prettyJson(self) -> str:
        """This progress as indented JSON (see :meth:`jsonValue` for the fields)."""
        return json.dumps(self.jsonValue(), indent=2)

    @classmethod
    def fromJson(cls, text: str | Mapping[str, Any]) -> BatchProgress:
        """The progress that :meth:`json` (or :meth:`prettyJson`) wrote.

        ``fromJson(p.json())`` equals ``p`` with its ranges in (topic, partition) order.
        """
        data = json.loads(text) if isinstance(text, str) else text
        source = data["sources"][0]
        starts = source["startOffset"]
        ends = source["endOffset"]
        ranges = tuple(OffsetRange(topic, int(part), int(frm), int(ends[topic][part]))
                       for topic, parts in starts.items() for part, frm in parts.items())
        behind = {TopicPartition(topic, int(part)): int(n)
                  for topic, parts in data["offsetsBehindLatest"].items()
                  for part, n in parts.items()}
        durations = data["durationMs"]
        return cls(
            batchTime=int(data["batchTime"]), ranges=ranges,
            numRecords=int(data["numInputRows"]),
            inputRate=float(data["inputRowsPerSecond"]),
            processingRate=float(data["processedRowsPerSecond"]),
            schedulingDelay=durations.get("schedulingDelay"),
            processingDelay=durations.get("addBatch"),
            offsetsBehindLatest=behind, planMs=float(durations["planBatch"]),
            commitMs=float(durations["commitOffsets"]), id=str(data["id"]),
            runId=str(data["runId"]), batchId=int(data["batchId"]),
            description=str(source["description"]), lag=data.get("lag"),
        )

    def summary(self) -> str:
        """The one-line INFO summary: batch, records, ranges and durations."""
        def ms(value: float | int | None) -> str:
            return "-" if value is None else f"{value:.0f} ms"
        return (f"Kafka direct stream made progress: batch {self.batchId} at {self.timestamp}, "
                f"{self.numRecords} records from {sum(1 for r in self.ranges if r.count())} "
                f"ranges, plan {ms(self.planMs)}, scheduling {ms(self.schedulingDelay)}, "
                f"processing {ms(self.processingDelay)}, commit {ms(self.commitMs)}")

    def describe(self) -> str:
        """Spark's input description: one line per non-empty range, largest first."""
        return describe_ranges(self.ranges)


def trigger_execution_ms(plan_ms: float, processing: int | None, commit_ms: float) -> float:
    """Structured Streaming's ``triggerExecution`` here: planning, jobs and commit, in ms."""
    return plan_ms + (processing or 0) + commit_ms


def iso_timestamp(millis: int) -> str:
    """``millis`` since the epoch as ISO-8601 UTC with milliseconds (``2026-01-02T03:04:05.678Z``)."""
    when = datetime.fromtimestamp(millis // 1000, tz=timezone.utc)
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def _offsets_json(entries: Any) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for topic, partition, offset in entries:
        out.setdefault(topic, {})[str(partition)] = offset
    return out


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
    id : str
        The stream's identity across restarts (set by :meth:`start`).
    runId : str
        A new UUID for each :meth:`start`.
    """

    def __init__(self) -> None:
        self.recent: collections.deque[BatchProgress] = collections.deque(maxlen=RECENT_PROGRESS)
        self._listeners: list[ProgressListener] = []
        self._outputs: list[StreamOutput] = []
        self._monitor_feed: ProgressListener | None = None
        self.id = ""
        self.runId = ""
        self.description = ""
        self._next_batch_id = 0
        self._lag: Any = None
        #: This run's label in its outputs (:func:`~dstream_kafka.streaming.outputs.stream_label`).
        self.label = ""

    def add_listener(self, listener: ProgressListener) -> None:
        """Call ``listener(progress)`` after each completed batch."""
        self._listeners.append(listener)

    def start(self, conf: Any, description: str, identity: str, stream: int,
              store: Any = None, group: str = "", context: Any = None) -> None:
        """Start a run: new ``runId``, batch ids from 0, and the outputs ``conf`` asks for.

        ``identity`` (the offset store's group and the stream's number) gives the stable ``id``;
        ``context`` (the stream's StreamingContext, None for a stream without one) and
        ``stream`` the outputs' label, :attr:`label`, unique in the process
        (:func:`~dstream_kafka.streaming.outputs.stream_label`). The outputs are those the
        registered factories make for this run (:mod:`dstream_kafka.streaming.outputs`): with
        ``spark.streaming.kafka.progress.jsonPath`` set, each batch's
        :meth:`BatchProgress.json` is appended as one line to that file; with
        ``spark.streaming.kafka.metrics.prometheus.port`` set, or a Streaming page served
        (``spark.streaming.kafka.ui.port``), each batch updates the Prometheus metrics, and the
        page gets each batch's progress (and reads the data-loss records of ``group`` from
        ``store``). The ``kafka`` logger (kafka-python) is set to WARNING unless the user set
        its level or gave it handlers.
        """
        self.id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"dstream-kafka:{identity}"))
        self.runId = str(uuid.uuid4())
        self.description = description
        self._next_batch_id = 0
        quiet_kafka_logger()
        self.label = stream_label(context, stream)
        self._monitor_feed = None
        self._outputs = stream_outputs(StreamRun(conf, self.label, stream, description, store,
                                                 group, context))

    def watch_lag(self, monitor: Any) -> None:
        """Put ``monitor``'s (a :class:`~dstream_kafka.monitor.lag.LagMonitor`) latest sample
        and verdict in each progress, give it each batch's time split, and tell this run's
        outputs (they subscribe to its samples: the Prometheus metrics, the Streaming page)."""
        self._lag = monitor
        self._monitor_feed = monitor.on_progress
        self._each_output("onLagMonitor", monitor)

    def data_loss(self, topic: str = "", partition: int = -1, from_offset: int = -1,
                  until_offset: int = -1) -> None:
        """Tell this run's outputs that the stream skipped deleted records (the Prometheus
        output counts them in ``dstream_kafka_data_loss_events_total``)."""
        self._each_output("onDataLoss", DataLoss(self.label, topic, partition, from_offset,
                                                 until_offset))

    def _each_output(self, callback: str, *args: Any) -> None:
        for output in list(self._outputs):
            try:
                getattr(output, callback)(*args)
            except Exception:  # an output must not fail the batch nor the stream
                log.exception("Progress output %r failed in %s", output, callback)

    def stop(self) -> None:
        """End the run: its outputs are closed (its Prometheus series are removed from
        /metrics: a stopped stream's gauges would otherwise stay at their last values, and
        ``sum by (stream)`` would keep adding them). Progress recorded after this reaches the
        listeners, the progress file and the page, but no metrics."""
        for output in list(self._outputs):
            try:
                output.close()
            except Exception:  # the stop of the stream goes on
                log.exception("Closing progress output %r failed", output)

    def _lag_json(self) -> dict[str, Any] | None:
        sample = None if self._lag is None else self._lag.latest
        if sample is None:
            return None
        verdict = self._lag.verdict().jsonValue()
        verdict.pop("partitions")
        return {**sample.jsonValue(), **verdict}

    def record(self, batch_time: int, ranges: Sequence[OffsetRange],
               behind: Mapping[TopicPartition, int], batch_duration_s: float,
               processing: int | None, scheduling: int | None, plan_ms: float,
               commit_ms: float) -> BatchProgress:
        """Record one completed batch and return its progress (listeners are told by
        :meth:`notify`)."""
        records = sum(r.count() for r in ranges)
        # Structured Streaming's processedRowsPerSecond: rows over the trigger's execution, so a
        # batch whose jobs took under a millisecond still has a rate.
        trigger_ms = trigger_execution_ms(plan_ms, processing, commit_ms)
        progress = BatchProgress(
            batchTime=batch_time, ranges=tuple(ranges), numRecords=records,
            inputRate=records / batch_duration_s if batch_duration_s else 0.0,
            processingRate=(records * 1000.0 / trigger_ms) if trigger_ms > 0 else 0.0,
            schedulingDelay=scheduling, processingDelay=processing,
            offsetsBehindLatest=dict(behind), planMs=plan_ms, commitMs=commit_ms,
            id=self.id, runId=self.runId, batchId=self._next_batch_id,
            description=self.description, lag=self._lag_json(),
        )
        self._next_batch_id += 1
        self.recent.append(progress)
        return progress

    def notify(self, progress: BatchProgress) -> None:
        """Log the batch's one INFO line, feed the configured outputs, call every listener.

        An output or listener that raises is logged and stops neither the others nor the stream.
        """
        log.info("%s", progress.summary())
        self._each_output("onProgress", progress)
        if self._monitor_feed is not None:
            try:
                self._monitor_feed(progress)
            except Exception:  # the lag timer must not fail the batch
                log.exception("Lag timer %r failed on a progress", self._lag)
        for listener in list(self._listeners):
            try:
                listener(progress)
            except Exception:  # a user's listener must not fail the batch
                log.exception("Progress listener %r failed", listener)


class ProgressAccessors:
    """Structured Streaming's progress accessors, for a stream that keeps a ``_progress``
    :class:`ProgressTracker` (the direct stream and the DataFrame stream)."""

    _progress: ProgressTracker

    @property
    def recentProgress(self) -> collections.deque[BatchProgress]:
        """The progress of the last 100 completed batches, oldest first."""
        return self._progress.recent

    @property
    def lastProgress(self) -> BatchProgress | None:
        """The progress of the most recent completed batch, or None."""
        return self._progress.recent[-1] if self._progress.recent else None

    def addProgressListener(self, listener: Callable[[BatchProgress], None]) -> None:
        """Call ``listener(progress)`` on the thread that runs the batches, after each
        completed batch."""
        self._progress.add_listener(listener)


class JsonLinesWriter(StreamOutput):
    """Appends each progress as one JSON line (UTF-8) to ``path``, flushed per batch."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()

    def onProgress(self, progress: BatchProgress) -> None:
        line = progress.json() + "\n"
        with self._lock, open(self.path, "a", encoding="utf-8") as out:
            out.write(line)

    def __repr__(self) -> str:
        return f"JsonLinesWriter({self.path!r})"


def progress_file(run: StreamRun) -> JsonLinesWriter | None:
    """The progress file of ``run`` (``spark.streaming.kafka.progress.jsonPath``), or None."""
    path = SparkConfReader(run.conf).get_raw(_config.PROGRESS_JSON_PATH)
    return JsonLinesWriter(str(path)) if path else None


register_stream_output(progress_file)


def quiet_kafka_logger() -> bool:
    """Set the ``kafka`` logger (kafka-python) to WARNING unless the user configured it.

    The user configured it when its level is not NOTSET or it has handlers of its own.
    Returns whether the level was set.
    """
    kafka_logger = logging.getLogger("kafka")
    if kafka_logger.level != logging.NOTSET or kafka_logger.handlers:
        return False
    kafka_logger.setLevel(logging.WARNING)
    return True
