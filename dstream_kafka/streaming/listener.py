"""Streaming listener callbacks, the per-batch progress record and the listener bus.

The shapes follow what PySpark hands to a ``pyspark.streaming.StreamingListener`` through
its Java wrappers, so listener code written for PySpark runs unchanged:

* events expose ``batchInfo()`` / ``outputOperationInfo()`` methods and
  ``StreamingListenerStreamingStarted.time``;
* :class:`BatchInfo` exposes ``batchTime()`` (a :class:`Time` with ``milliseconds()``),
  ``submissionTime()``, ``processingStartTime()``, ``processingEndTime()``,
  ``schedulingDelay()``, ``processingDelay()``, ``totalDelay()``, ``numRecords()``,
  ``streamIdToInputInfo()`` and ``outputOperationInfos()``; a value that is not known yet
  is ``-1``, as in PySpark's ``JavaBatchInfo``.

Every record is an immutable snapshot: the engine builds a new :class:`BatchInfo` for each
event. The snake_case dataclass fields hold the same values with ``None`` for unknown.
"""

from __future__ import annotations

import logging
import queue
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

__all__ = [
    "BatchInfo",
    "OutputOperationInfo",
    "StreamInputInfo",
    "StreamingListener",
    "StreamingListenerBatchCompleted",
    "StreamingListenerBatchStarted",
    "StreamingListenerBatchSubmitted",
    "StreamingListenerOutputOperationCompleted",
    "StreamingListenerOutputOperationStarted",
    "StreamingListenerStreamingStarted",
    "Time",
    "ListenerBus",
]

log = logging.getLogger(__name__)

#: Key of the human-readable description in ``StreamInputInfo.metadata`` (Spark's
#: ``StreamInputInfo.METADATA_KEY_DESCRIPTION``).
METADATA_KEY_DESCRIPTION = "Description"


class Time(int):
    """A batch time: integer milliseconds since the epoch, with Spark's ``Time`` accessors.

    ``Time`` is an ``int``, so it compares, hashes and serialises as the plain number.

    Examples
    --------
    >>> t = Time(1500)
    >>> t.milliseconds(), t + 500
    (1500, 2000)
    """

    __slots__ = ()

    def milliseconds(self) -> int:
        """Return the time as plain integer milliseconds since the epoch."""
        return int(self)

    def to_datetime(self) -> datetime:
        """Return the local naive ``datetime`` that PySpark passes to ``foreachRDD``."""
        return datetime.fromtimestamp(int(self) / 1000.0)

    def __repr__(self) -> str:
        return f"Time({int(self)} ms)"

    def __str__(self) -> str:
        return f"{int(self)} ms"


def _or_minus_one(value: int | None) -> int:
    return -1 if value is None else value


def _jsonable(value: Any) -> Any:
    """``value`` with containers copied and anything JSON cannot hold turned into ``str``."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return str(value)


@dataclass(frozen=True)
class StreamInputInfo:
    """What one input stream read for one batch.

    ``num_records`` follows Spark: the number of records the batch's RDD of that input
    stream holds, as reported by the stream itself (no Spark job counts it).
    """

    input_stream_id: int
    num_records: int
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def inputStreamId(self) -> int:
        """Return the id of the input stream."""
        return self.input_stream_id

    def numRecords(self) -> int:
        """Return the number of records the stream reported for the batch."""
        return self.num_records

    def metadataDescription(self) -> str | None:
        """Return ``metadata["Description"]`` or ``None``."""
        value = self.metadata.get(METADATA_KEY_DESCRIPTION)
        return None if value is None else str(value)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict; metadata values JSON cannot hold become their ``str``."""
        return {"inputStreamId": self.input_stream_id, "numRecords": self.num_records,
                "metadata": _jsonable(self.metadata)}


@dataclass(frozen=True)
class OutputOperationInfo:
    """One output operation (``foreachRDD``, ``pprint``, ...) of one batch.

    ``operation_id`` (``id()``) is the index of the output operation in registration order. Times are epoch
    milliseconds; ``failure_reason`` is the formatted exception of a failed operation.
    """

    batch_time: int
    operation_id: int
    operation_name: str
    operation_description: str
    start_time: int | None = None
    end_time: int | None = None
    failure_reason: str | None = None

    def batchTime(self) -> Time:
        """Return the batch time."""
        return Time(self.batch_time)

    def id(self) -> int:
        """Return the output operation id (its index in registration order)."""
        return self.operation_id

    def name(self) -> str:
        """Return the operation name, e.g. ``"foreachRDD"``."""
        return self.operation_name

    def description(self) -> str:
        """Return where the operation was registered (``"pprint at app.py:12"``)."""
        return self.operation_description

    def startTime(self) -> int:
        """Return the start time in epoch ms, or -1 before it started."""
        return _or_minus_one(self.start_time)

    def endTime(self) -> int:
        """Return the end time in epoch ms, or -1 before it ended."""
        return _or_minus_one(self.end_time)

    def failureReason(self) -> str | None:
        """Return the failure text, or ``None`` when the operation did not fail."""
        return self.failure_reason

    def duration(self) -> int:
        """Return ``endTime - startTime`` in ms, or -1 while either is unknown."""
        if self.start_time is None or self.end_time is None:
            return -1
        return self.end_time - self.start_time

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-able dict with ``None`` for unknown times."""
        return {"batchTime": self.batch_time, "id": self.operation_id,
                "name": self.operation_name, "description": self.operation_description, "startTime": self.start_time,
                "endTime": self.end_time, "failureReason": self.failure_reason}


@dataclass(frozen=True)
class BatchInfo:
    """The progress record of one batch, as Spark's ``BatchInfo``.

    Delays follow Spark: ``schedulingDelay = processingStartTime - submissionTime``,
    ``processingDelay = processingEndTime - processingStartTime`` and ``totalDelay`` is
    their sum. ``numRecords`` is the sum of the input streams' reported record counts.
    The camelCase methods return -1 for a value that is not known yet; the fields hold
    ``None`` instead.
    """

    batch_time: int
    stream_id_to_input_info: Mapping[int, StreamInputInfo]
    submission_time: int
    processing_start_time: int | None = None
    processing_end_time: int | None = None
    output_operation_infos: Mapping[int, OutputOperationInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Snapshots are shared between threads: own private copies of the mappings.
        object.__setattr__(self, "stream_id_to_input_info", dict(self.stream_id_to_input_info))
        object.__setattr__(self, "output_operation_infos", dict(self.output_operation_infos))

    @property
    def scheduling_delay(self) -> int | None:
        """Milliseconds between submission and processing start, or ``None``."""
        if self.processing_start_time is None:
            return None
        return self.processing_start_time - self.submission_time

    @property
    def processing_delay(self) -> int | None:
        """Milliseconds the output operations took, or ``None``."""
        if self.processing_start_time is None or self.processing_end_time is None:
            return None
        return self.processing_end_time - self.processing_start_time

    @property
    def total_delay(self) -> int | None:
        """``scheduling_delay + processing_delay``, or ``None``."""
        scheduling, processing = self.scheduling_delay, self.processing_delay
        if scheduling is None or processing is None:
            return None
        return scheduling + processing

    @property
    def num_records(self) -> int:
        """Sum of the input streams' reported record counts."""
        return sum(info.num_records for info in self.stream_id_to_input_info.values())

    def batchTime(self) -> Time:
        """Return the batch time."""
        return Time(self.batch_time)

    def submissionTime(self) -> int:
        """Return when the batch was generated and queued (epoch ms)."""
        return self.submission_time

    def processingStartTime(self) -> int:
        """Return when the first output operation started (epoch ms), or -1."""
        return _or_minus_one(self.processing_start_time)

    def processingEndTime(self) -> int:
        """Return when the last output operation ended (epoch ms), or -1."""
        return _or_minus_one(self.processing_end_time)

    def schedulingDelay(self) -> int:
        """Return the scheduling delay in ms, or -1."""
        return _or_minus_one(self.scheduling_delay)

    def processingDelay(self) -> int:
        """Return the processing delay in ms, or -1."""
        return _or_minus_one(self.processing_delay)

    def totalDelay(self) -> int:
        """Return the total delay in ms, or -1."""
        return _or_minus_one(self.total_delay)

    def numRecords(self) -> int:
        """Return the number of records of all input streams for this batch."""
        return self.num_records

    def streamIdToInputInfo(self) -> Mapping[int, StreamInputInfo]:
        """Return ``{input stream id: StreamInputInfo}``."""
        return self.stream_id_to_input_info

    def outputOperationInfos(self) -> Mapping[int, OutputOperationInfo]:
        """Return ``{output operation id: OutputOperationInfo}``."""
        return self.output_operation_infos

    def to_dict(self) -> dict[str, Any]:
        """Return the progress record as a JSON-able dict (``None`` for unknown values)."""
        return {
            "batchTime": self.batch_time,
            "submissionTime": self.submission_time,
            "processingStartTime": self.processing_start_time,
            "processingEndTime": self.processing_end_time,
            "schedulingDelay": self.scheduling_delay,
            "processingDelay": self.processing_delay,
            "totalDelay": self.total_delay,
            "numRecords": self.num_records,
            "streamIdToInputInfo": {str(k): v.to_dict()
                                    for k, v in self.stream_id_to_input_info.items()},
            "outputOperationInfos": {str(k): v.to_dict()
                                     for k, v in self.output_operation_infos.items()},
        }


@dataclass(frozen=True)
class StreamingListenerStreamingStarted:
    """Posted once when the context starts; ``time`` is epoch ms."""

    time: int


@dataclass(frozen=True)
class _BatchEvent:
    batch_info: BatchInfo

    def batchInfo(self) -> BatchInfo:
        """Return the batch's progress record at the time of the event."""
        return self.batch_info


class StreamingListenerBatchSubmitted(_BatchEvent):
    """A batch was generated and queued for processing."""


class StreamingListenerBatchStarted(_BatchEvent):
    """The first output operation of a batch is about to run."""


class StreamingListenerBatchCompleted(_BatchEvent):
    """All output operations of a batch ended (failed ones carry a failure reason)."""


@dataclass(frozen=True)
class _OutputOperationEvent:
    output_operation_info: OutputOperationInfo

    def outputOperationInfo(self) -> OutputOperationInfo:
        """Return the output operation's record at the time of the event."""
        return self.output_operation_info


class StreamingListenerOutputOperationStarted(_OutputOperationEvent):
    """An output operation is about to run."""


class StreamingListenerOutputOperationCompleted(_OutputOperationEvent):
    """An output operation ended, successfully or not."""


class StreamingListener:
    """Receives streaming events; override the callbacks you need.

    Callbacks run on one listener-bus thread, in the order the events happened. A slow
    listener never delays batches; an exception in a listener is logged and ignored.
    The receiver callbacks exist for PySpark compatibility and are never called (direct
    streams have no receivers).
    """

    def onStreamingStarted(self, streamingStarted: StreamingListenerStreamingStarted) -> None:
        """Called once when the streaming context has started."""

    def onReceiverStarted(self, receiverStarted: Any) -> None:
        """Never called: there are no receivers."""

    def onReceiverError(self, receiverError: Any) -> None:
        """Never called: there are no receivers."""

    def onReceiverStopped(self, receiverStopped: Any) -> None:
        """Never called: there are no receivers."""

    def onBatchSubmitted(self, batchSubmitted: StreamingListenerBatchSubmitted) -> None:
        """Called when a batch has been generated and queued."""

    def onBatchStarted(self, batchStarted: StreamingListenerBatchStarted) -> None:
        """Called when processing of a batch starts."""

    def onBatchCompleted(self, batchCompleted: StreamingListenerBatchCompleted) -> None:
        """Called when all output operations of a batch have ended."""

    def onOutputOperationStarted(
            self, outputOperationStarted: StreamingListenerOutputOperationStarted) -> None:
        """Called when an output operation of a batch starts."""

    def onOutputOperationCompleted(
            self, outputOperationCompleted: StreamingListenerOutputOperationCompleted) -> None:
        """Called when an output operation of a batch has ended."""


_STOP = object()


class ListenerBus:
    """Delivers events to listeners on one daemon thread, in posting order.

    ``post`` never blocks on listeners. ``stop`` delivers everything already posted,
    then ends the thread.
    """

    def __init__(self) -> None:
        self._listeners: list[StreamingListener] = []
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def add(self, listener: StreamingListener) -> None:
        """Register ``listener`` for every later event."""
        with self._lock:
            self._listeners.append(listener)

    def remove(self, listener: StreamingListener) -> None:
        """Unregister ``listener``; unknown listeners are ignored."""
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def start(self) -> None:
        """Start the delivery thread."""
        self._thread = threading.Thread(target=self._run, name="dstream-listener-bus",
                                        daemon=True)
        self._thread.start()

    def post(self, callback: str, event: Any) -> None:
        """Queue ``event`` for ``listener.<callback>(event)`` on every listener."""
        self._queue.put((callback, event))

    def stop(self) -> None:
        """Deliver the queued events, then stop the thread (a no-op from the bus itself)."""
        thread = self._thread
        if thread is None:
            return
        self._queue.put(_STOP)
        if thread is not threading.current_thread():
            thread.join()
        self._thread = None

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            callback, event = item
            with self._lock:
                listeners = list(self._listeners)
            for listener in listeners:
                try:
                    getattr(listener, callback)(event)
                except Exception:  # a broken listener must not stop the others
                    log.exception("StreamingListener %r failed in %s", listener, callback)
