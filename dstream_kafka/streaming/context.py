"""StreamingContext: the entry point of a streaming application, and its stream graph.

A context moves through three states, as Spark's: ``INITIALIZED`` (streams and output
operations are added), ``ACTIVE`` (after :meth:`StreamingContext.start`; at most one
context per process) and ``STOPPED`` (final). See :mod:`.scheduler` for how batches run and
:mod:`.checkpoint_state` for what a checkpoint holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Sequence, TypeVar

from pyspark import RDD, StorageLevel

from dstream_kafka.errors import ConfigurationError, StreamingStateError
from dstream_kafka.streaming.checkpoint_state import (CheckpointLayout, CheckpointMetadata,
                                                      StateCheckpointer)
from dstream_kafka.streaming.dstream import (DStream, ForEachDStream, TransformedDStream,
                                             _call_site)
from dstream_kafka.streaming.input import InputDStream, QueueInputDStream
from dstream_kafka.streaming.listener import (BatchInfo, ListenerBus, StreamingListener,
                                              StreamingListenerStreamingStarted,
                                              StreamInputInfo)
from dstream_kafka.streaming.clock import (first_batch_time, graceful_stop_timeout_ms, now_ms,
                                           seconds_to_ms)
from dstream_kafka.streaming.scheduler import JobScheduler, OutputJob, install_sigterm_handler

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["StreamingContext", "DStreamGraph"]

log = logging.getLogger(__name__)

T = TypeVar("T")

INITIALIZED, ACTIVE, STOPPED = "INITIALIZED", "ACTIVE", "STOPPED"
_STOPPING = "STOPPING"  # internal: reported as ACTIVE


class DStreamGraph:
    """All streams of one context, in creation order, and the per-batch generation.

    ``streams[i].id == i``. ``input_streams`` and ``output_streams`` keep registration
    order; output operation ids are indexes into ``output_streams``.
    """

    def __init__(self, ssc: StreamingContext) -> None:
        self._ssc = ssc
        #: Held while RDDs are generated or forgotten.
        self.lock = threading.RLock()
        self.streams: list[DStream[Any]] = []
        self.input_streams: list[InputDStream[Any]] = []
        self.output_streams: list[ForEachDStream] = []
        #: Batch times are ``zero_time + k * batch``; set at start or by recovery.
        self.zero_time = 0
        #: The first batch time of this run (``None`` before start).
        self.start_time: int | None = None
        self.remember_ms: int | None = None
        self.recovered: CheckpointMetadata | None = None
        self._input_infos: dict[int, dict[int, StreamInputInfo]] = {}

    @property
    def batch_ms(self) -> int:
        """The batch duration in milliseconds."""
        return self._ssc._batch_ms

    def register(self, stream: DStream[Any]) -> int:
        """Add ``stream`` and return its id; only while the context is ``INITIALIZED``."""
        state = self._ssc._state
        if state != INITIALIZED:
            verb = "starting" if state in (ACTIVE, _STOPPING) else "stopping"
            raise StreamingStateError(
                f"Adding new inputs, transformations, and output operations after {verb} a "
                f"context is not supported")
        self.streams.append(stream)
        return len(self.streams) - 1

    def add_input(self, stream: InputDStream[Any]) -> None:
        """Register an input stream (called by ``InputDStream.__init__``)."""
        self.input_streams.append(stream)

    def add_output(self, stream: ForEachDStream) -> int:
        """Register an output operation and return its id."""
        self.output_streams.append(stream)
        return len(self.output_streams) - 1

    def validate(self, has_checkpoint_dir: bool) -> None:
        """Refuse to start a graph that cannot run (Spark's messages)."""
        if not self.output_streams:
            raise StreamingStateError("No output operations registered, so nothing to execute")
        for stream in self.streams:
            if stream.requires_checkpoint_dir and not has_checkpoint_dir:
                raise ConfigurationError(
                    f"The checkpoint directory has not been set. Please set it by "
                    f"StreamingContext.checkpoint(). ({stream!r} needs it.)")

    def initialize(self, zero_time: int, start_time: int) -> None:
        """Fix the time grid and give every stream its remember duration."""
        self.zero_time, self.start_time = zero_time, start_time
        for output in self.output_streams:
            self._remember(output, self.remember_ms or 0)
        for stream in self.streams:
            stream._remember_ms = max(stream._remember_ms, stream._slide_ms)

    def _remember(self, stream: DStream[Any], duration: int) -> None:
        needed = max(duration, stream._slide_ms)
        if needed <= stream._remember_ms:
            return
        stream._remember_ms = needed
        for parent in stream._parents:
            self._remember(parent, stream._parent_remember_ms())

    def generate(self, time_ms: int) -> tuple[list[OutputJob], dict[int, StreamInputInfo]]:
        """Compute every input stream, then build the output jobs of batch ``time_ms``."""
        with self.lock:
            for stream in self.input_streams:
                stream._get_or_compute(time_ms)
            jobs = [job for output in self.output_streams
                    if (job := output.generate_job(time_ms)) is not None]
            return jobs, self._input_infos.pop(time_ms, {})

    def report_input_info(self, time_ms: int, info: StreamInputInfo) -> None:
        """Store an input stream's record for batch ``time_ms``."""
        with self.lock:
            self._input_infos.setdefault(time_ms, {})[info.input_stream_id] = info

    def clear(self, time_ms: int) -> None:
        """Forget (and unpersist) RDDs no stream needs after batch ``time_ms``."""
        with self.lock:
            for stream in self.streams:
                stream._clear_before(time_ms)
            for stale in [t for t in self._input_infos if t <= time_ms]:
                del self._input_infos[stale]

    def durable_rdds(self, time_ms: int) -> dict[int, list[int]]:
        """``{stream id: [times]}`` of the RDDs a checkpoint after ``time_ms`` must hold."""
        result: dict[int, set[int]] = {}
        with self.lock:
            for stream in self.streams:
                for owner, t in stream._durable_rdds(time_ms):
                    result.setdefault(owner.id, set()).add(t)
        return {sid: sorted(times) for sid, times in result.items()}

    def state_checkpoint_ms(self) -> int | None:
        """How often checkpoints save state: the shortest interval of the stateful
        streams, or ``None`` without stateful streams (then every batch is checkpointed)."""
        intervals = [s._state_checkpoint_ms() for s in self.streams if s._keeps_state]
        return min(intervals) if intervals else None

    def signatures(self) -> dict[int, dict[str, Any]]:
        """``{id: {"kind", "slide_ms"}}``: what a checkpoint compares on recovery."""
        return {s.id: {"kind": s._kind(), "slide_ms": s._slide_ms} for s in self.streams}


class StreamingContext:
    """Main entry point of a streaming application on an existing SparkContext.

    Parameters
    ----------
    sparkContext : SparkContext
        The SparkContext that runs the batches' jobs.
    batchDuration : float
        The batch interval in seconds; fractions are allowed and rounded to whole ms.

    Examples
    --------
    >>> ssc = StreamingContext(sc, 0.5)                       # doctest: +SKIP
    >>> ssc.queueStream([[1, 2], [3]]).map(lambda x: x * 2).pprint()  # doctest: +SKIP
    >>> ssc.start(); ssc.awaitTerminationOrTimeout(2); ssc.stop(False)  # doctest: +SKIP
    """

    _class_lock: ClassVar[threading.Lock] = threading.Lock()
    _active_context: ClassVar[StreamingContext | None] = None

    def __init__(self, sparkContext: SparkContext, batchDuration: float | None = None) -> None:
        if batchDuration is None:
            raise ConfigurationError("batchDuration must be given (seconds, e.g. 0.5)")
        self._sc = sparkContext
        self._batch_ms = seconds_to_ms(batchDuration, "batchDuration")
        self._state = INITIALIZED
        self._cond = threading.Condition()
        self.graph = DStreamGraph(self)
        self._bus = ListenerBus()
        self._scheduler: JobScheduler | None = None
        self._checkpointer: StateCheckpointer | None = None
        self._error: BaseException | None = None
        self._sigterm_hook: Any = None
        self._last_checkpoint_time: int | None = None
        self._last_input_data: tuple[int, dict[int, Any]] | None = None
        self._start_site = ""
        #: The last 100 completed batches' progress records, oldest first.
        self.completed_batches: deque[BatchInfo] = deque(maxlen=100)
        conf = sparkContext.getConf().get("spark.streaming.gracefulStopTimeout")
        #: Seconds a graceful stop waits for queued batches before dropping the rest:
        #: ``spark.streaming.gracefulStopTimeout``, else 10 batch intervals. Settable
        #: before ``start``.
        self.graceful_stop_timeout: float = graceful_stop_timeout_ms(
            conf, self._batch_ms) / 1000.0

    # -- properties --------------------------------------------------------------------

    @property
    def sparkContext(self) -> SparkContext:
        """The SparkContext this context runs on."""
        return self._sc

    @property
    def batch_duration(self) -> float:
        """The batch interval in seconds."""
        return self._batch_ms / 1000.0

    @property
    def checkpoint_dir(self) -> str | None:
        """The checkpoint folder, or ``None``."""
        return None if self._checkpointer is None else self._checkpointer.layout.root

    def _checkpoint_layout(self) -> CheckpointLayout | None:
        return None if self._checkpointer is None else self._checkpointer.layout

    def getState(self) -> str:
        """Return ``"INITIALIZED"``, ``"ACTIVE"`` or ``"STOPPED"``."""
        return ACTIVE if self._state == _STOPPING else self._state

    # -- class-level access ------------------------------------------------------------

    @classmethod
    def getActive(cls) -> StreamingContext | None:
        """Return the started, not yet stopped context of this process, or ``None``."""
        return cls._active_context

    @classmethod
    def getOrCreate(cls, checkpointPath: str,
                    setupFunc: Callable[[], StreamingContext]) -> StreamingContext:
        """Build the context with ``setupFunc`` and recover it from ``checkpointPath``.

        ``setupFunc`` always runs, because the checkpoint stores data, not code: it must
        build the same graph shape as the run that wrote the checkpoint (functions may
        change). When the folder holds a checkpoint, the saved state (``updateStateByKey``
        states, window contents, input streams' ``checkpoint_data``) is put back into the
        streams with the same ids, and batch times continue on the recovered time grid.
        Inputs resume from their checkpointed positions, so batches that completed after
        the checkpoint are processed again (at-least-once, as Spark). The context is set
        to checkpoint into the folder.

        Raises
        ------
        TypeError
            When ``setupFunc`` is not callable or does not return a StreamingContext.
        CorruptCheckpointError
            When the checkpoint cannot be read.
        ConfigurationError
            When the checkpoint does not fit the graph (other batch duration or shape).
        """
        if not callable(setupFunc):
            raise TypeError("setupFunc should be callable.")
        ssc = setupFunc()
        if not isinstance(ssc, StreamingContext):
            raise TypeError(f"setupFunc should return a StreamingContext, got "
                            f"{type(ssc).__name__}")
        ssc.checkpoint(checkpointPath)
        assert ssc._checkpointer is not None
        metadata = ssc._checkpointer.read_metadata()
        if metadata is not None:
            ssc._recover(metadata)
        return ssc

    @classmethod
    def getActiveOrCreate(cls, checkpointPath: str | None,
                          setupFunc: Callable[[], StreamingContext]) -> StreamingContext:
        """Return the active context, else ``getOrCreate`` (or ``setupFunc()`` without a path)."""
        if not callable(setupFunc):
            raise TypeError("setupFunc should be callable.")
        active = cls.getActive()
        if active is not None:
            return active
        if checkpointPath is not None:
            return cls.getOrCreate(checkpointPath, setupFunc)
        return setupFunc()

    # -- configuration -----------------------------------------------------------------

    def remember(self, duration: float) -> None:
        """Keep every stream's RDDs for at least ``duration`` seconds (then unpersist them)."""
        self._require_initialized("remember")
        self.graph.remember_ms = seconds_to_ms(duration, "remember duration")

    def checkpoint(self, directory: str | None) -> None:
        """Checkpoint state and input positions into ``directory`` after every batch.

        ``None`` turns checkpointing off. See :mod:`.checkpoint_state` for the layout.
        """
        self._require_initialized("set the checkpoint directory")
        if directory is None:
            self._checkpointer = None
            return
        checkpointer = StateCheckpointer(self._sc, directory)
        checkpointer.files.mkdirs(directory)
        self._checkpointer = checkpointer

    def addStreamingListener(self, streamingListener: StreamingListener) -> None:
        """Deliver streaming events to ``streamingListener`` (see :mod:`.listener`)."""
        self._bus.add(streamingListener)

    def removeStreamingListener(self, streamingListener: StreamingListener) -> None:
        """Stop delivering events to ``streamingListener``."""
        self._bus.remove(streamingListener)

    def _require_initialized(self, what: str) -> None:
        if self._state != INITIALIZED:
            raise StreamingStateError(f"Cannot {what} after the StreamingContext has started")

    # -- inputs and graph-level operations ----------------------------------------------

    def queueStream(self, rdds: Iterable[Any], oneAtATime: bool = True,
                    default: RDD[T] | Iterable[T] | None = None) -> DStream[T]:
        """Create a stream from a queue of RDDs (or lists, which are parallelized).

        One item per batch (``oneAtATime``) or all queued items at once; an empty queue
        gives ``default`` or an empty RDD. Pass a ``collections.deque`` to add items while
        the stream runs.
        """
        if default is not None and not isinstance(default, RDD):
            default = self._sc.parallelize(list(default))
        return QueueInputDStream(self, rdds, oneAtATime, default)

    def union(self, *dstreams: DStream[T]) -> DStream[T]:
        """Return the union of streams with the same slide duration."""
        if not dstreams:
            raise ConfigurationError("should have at least one DStream to union")
        if len(dstreams) == 1:
            return dstreams[0]
        if len({s._slide_ms for s in dstreams}) > 1:
            raise ConfigurationError("All DStreams should have same slide duration")
        return TransformedDStream(self, dstreams,
                                  lambda t, rdds: self._sc.union(list(rdds)))

    def transform(self, dstreams: Sequence[DStream[Any]],
                  transformFunc: Callable[[list[RDD[Any]]], RDD[T]]) -> DStream[T]:
        """Return a stream of ``transformFunc([rdd of each stream])`` per batch."""
        return TransformedDStream(self, list(dstreams),
                                  lambda t, rdds: transformFunc(list(rdds)))

    # -- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the inputs and the batch loop.

        Starting an active context only logs a warning (as Spark).

        Raises
        ------
        StreamingStateError
            When stopped, when another context is active, or without output operations.
        ConfigurationError
            When a stateful stream needs ``checkpoint`` and none is set.
        """
        with StreamingContext._class_lock:
            if self._state in (ACTIVE, _STOPPING):
                log.warning("StreamingContext has already been started")
                return
            if self._state == STOPPED:
                raise StreamingStateError("StreamingContext has already been stopped")
            active = StreamingContext._active_context
            if active is not None:
                raise StreamingStateError(
                    "Only one StreamingContext may be started in this process. Currently "
                    f"running StreamingContext was started at {active._start_site}")
            self.graph.validate(self._checkpointer is not None)
            self._bus.start()
            started: list[InputDStream[Any]] = []
            try:
                for stream in self.graph.input_streams:
                    stream.start()
                    started.append(stream)
                scheduler, first_time = self._create_scheduler()
            except BaseException:
                for stream in started:
                    self._safe(stream.stop, "stop")
                self._bus.stop()
                self._state = STOPPED
                raise
            # ACTIVE before the threads run, so a stop they trigger finds an active context.
            self._state = ACTIVE
            self._start_site = f"{time.strftime('%Y-%m-%d %H:%M:%S')} ({_call_site('start')})"
            StreamingContext._active_context = self
            self._scheduler = scheduler
            scheduler.start(first_time)
        self._sigterm_hook = install_sigterm_handler(self._stop_on_sigterm)
        self._bus.post("onStreamingStarted", StreamingListenerStreamingStarted(now_ms()))

    def _create_scheduler(self) -> tuple[JobScheduler, int]:
        start = first_batch_time(now_ms(), self._batch_ms)
        recovered = self.graph.recovered
        if recovered is not None:
            zero = recovered.zero_time_ms
            start = max(start, recovered.checkpoint_time_ms + self._batch_ms)
            start += (zero - start) % self._batch_ms  # stay on the recovered time grid
        else:
            zero = start - self._batch_ms
        self.graph.initialize(zero, start)
        scheduler = JobScheduler(
            self._batch_ms, self.graph.generate, self._complete_batch, self._fail_batch,
            self._on_fatal, self._bus, int(self.graceful_stop_timeout * 1000),
            set_job_description=self._sc.setJobDescription)
        return scheduler, start

    def stop(self, stopSparkContext: bool = True, stopGraceFully: bool = False) -> None:
        """Stop the batch loop and the inputs; optionally the SparkContext.

        Graceful: every batch generated so far is processed and completed first (up to
        :attr:`graceful_stop_timeout`, then the rest is dropped), and a final checkpoint
        is written. Otherwise the
        running batch starts no further output operation, is not completed (no commit
        hooks) and queued batches are dropped. Stopping a stopped context does nothing
        but stop the SparkContext if asked. Called from a streaming thread (an output
        operation, a listener) the stop runs in a new thread and this call returns at once.
        """
        engine_threads = self._engine_threads()
        with self._cond:
            if self._state == INITIALIZED:
                log.warning("StreamingContext has not been started yet")
                self._state = STOPPED
                self._cond.notify_all()
            elif self._state == ACTIVE:
                if threading.current_thread() in engine_threads:
                    threading.Thread(target=self.stop, name="dstream-stop",
                                     args=(stopSparkContext, stopGraceFully)).start()
                    return
                self._state = _STOPPING
            else:
                if self._state == _STOPPING and threading.current_thread() not in engine_threads:
                    self._cond.wait_for(lambda: self._state == STOPPED)
                if stopSparkContext:
                    self._sc.stop()
                return
        if self._scheduler is not None:
            self._shutdown(stopGraceFully)
        if stopSparkContext:
            self._sc.stop()

    def _shutdown(self, graceful: bool) -> None:
        assert self._scheduler is not None
        self._scheduler.stop(graceful)
        last = self._last_input_data
        if (graceful and self._checkpointer is not None and self._error is None
                and last is not None and last[0] != self._last_checkpoint_time):
            try:  # the final state, so a restart does not re-process any batch
                self._write_checkpoint(last[0], last[1], force=True)
            except Exception:
                log.exception("Final checkpoint of batch %d ms failed", last[0])
        for stream in self.graph.input_streams:
            self._safe(stream.stop, "stop")
        self._bus.stop()
        with self._cond:
            self._state = STOPPED
            self._cond.notify_all()
        with StreamingContext._class_lock:
            if StreamingContext._active_context is self:
                StreamingContext._active_context = None
        if self._sigterm_hook is not None:
            self._sigterm_hook.uninstall()

    def _engine_threads(self) -> tuple[threading.Thread, ...]:
        threads = self._scheduler.threads if self._scheduler is not None else ()
        bus_thread = self._bus._thread
        return threads + ((bus_thread,) if bus_thread is not None else ())

    def _stop_on_sigterm(self) -> None:
        self.stop(stopSparkContext=False, stopGraceFully=True)

    def awaitTermination(self, timeout: float | None = None) -> None:
        """Wait until the context stops (or ``timeout`` seconds pass).

        Raises
        ------
        BaseException
            The error that failed a batch and stopped the context.
        """
        self.awaitTerminationOrTimeout(timeout)

    def awaitTerminationOrTimeout(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds; return whether the context has stopped.

        Raises
        ------
        BaseException
            The error that failed a batch and stopped the context.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._state != STOPPED:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                # Short waits keep the main thread responsive to signals (SIGTERM).
                self._cond.wait(0.25 if remaining is None else min(remaining, 0.25))
            stopped = self._state == STOPPED
        if self._error is not None:
            raise self._error
        return stopped

    # -- batch hooks (scheduler thread) -------------------------------------------------

    def _complete_batch(self, time_ms: int, info: BatchInfo) -> None:
        if self._checkpointer is not None:
            # Collected every batch (cheap) so the final checkpoint of a graceful stop has
            # the inputs' data of the last batch, gathered before its completion hooks.
            self._last_input_data = (time_ms, self._input_checkpoint_data(time_ms))
            self._write_checkpoint(time_ms, self._last_input_data[1])
        for stream in self.graph.input_streams:
            stream.on_batch_completed(time_ms, info)
        self.graph.clear(time_ms)
        self.completed_batches.append(info)

    def _input_checkpoint_data(self, time_ms: int) -> dict[int, Any]:
        inputs = {}
        for stream in self.graph.input_streams:
            data = stream.checkpoint_data(time_ms)
            if data is not None:
                inputs[stream.id] = data
        return inputs

    def _fail_batch(self, time_ms: int, error: BaseException) -> None:
        for stream in self.graph.input_streams:
            self._safe(lambda: stream.on_batch_failed(time_ms, error), "on_batch_failed")

    def _on_fatal(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        threading.Thread(target=self.stop, name="dstream-stop-on-error",
                         kwargs={"stopSparkContext": False}).start()

    def _write_checkpoint(self, time_ms: int, inputs: dict[int, Any],
                          force: bool = False) -> None:
        """Checkpoint batch ``time_ms`` if it is a checkpoint time (or ``force``)."""
        checkpointer = self._checkpointer
        assert checkpointer is not None
        interval = self.graph.state_checkpoint_ms()
        if not force and interval is not None and (time_ms - self.graph.zero_time) % interval:
            return
        durable = self.graph.durable_rdds(time_ms)
        for sid, times in durable.items():
            generated = self.graph.streams[sid]._generated
            checkpointer.save_stream(sid, time_ms, {t: generated[t] for t in times})
        metadata = CheckpointMetadata(
            batch_duration_ms=self._batch_ms, zero_time_ms=self.graph.zero_time,
            checkpoint_time_ms=time_ms, next_batch_time_ms=time_ms + self._batch_ms,
            streams=self.graph.signatures(), rdds=durable, inputs=inputs,
            written_at_ms=now_ms())
        checkpointer.write_metadata(metadata)
        checkpointer.prune(time_ms)
        self._last_checkpoint_time = time_ms

    def _recover(self, metadata: CheckpointMetadata) -> None:
        assert self._checkpointer is not None
        where = self._checkpointer.layout.metadata_path
        if metadata.batch_duration_ms != self._batch_ms:
            raise ConfigurationError(
                f"{where} was written with a batch duration of {metadata.batch_duration_ms} ms, "
                f"but the context has {self._batch_ms} ms; use the old batch duration or "
                f"delete the checkpoint folder")
        signatures = self.graph.signatures()
        for sid in sorted(set(metadata.rdds) | set(metadata.inputs)):
            saved, now = metadata.streams.get(sid), signatures.get(sid)
            if saved is None or now is None or dict(saved) != now:
                raise ConfigurationError(
                    f"{where} does not match the streaming graph: stream {sid} was "
                    f"{saved}, the setup function now creates {now}. Build the same streams "
                    f"in the same order, or delete the checkpoint folder")
        self.graph.zero_time = metadata.zero_time_ms
        for sid, times in metadata.rdds.items():
            stream = self.graph.streams[sid]
            restored = self._checkpointer.load_stream(sid, metadata.checkpoint_time_ms, times)
            for t, rdd in restored.items():
                rdd.persist(StorageLevel.MEMORY_AND_DISK)
                stream._owned.add(id(rdd))
                stream._generated[t] = rdd
        for sid, data in metadata.inputs.items():
            stream = self.graph.streams[sid]
            assert isinstance(stream, InputDStream)
            stream.restore_checkpoint_data(data)
        self._checkpointer.remember_restored(metadata)
        self.graph.recovered = metadata

    @staticmethod
    def _safe(call: Callable[[], Any], what: str) -> None:
        try:
            call()
        except Exception:
            log.exception("%s raised", what)
