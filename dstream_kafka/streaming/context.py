"""StreamingContext: the entry point of a streaming application.

A context moves through three states, as Spark's: ``INITIALIZED`` (streams and output
operations are added), ``ACTIVE`` (after :meth:`StreamingContext.start`; at most one
context per process) and ``STOPPED`` (final). See :mod:`.graph` for the streams and how a
batch is generated, :mod:`.scheduler` for how batches run and :mod:`.checkpoint_state` for
what a checkpoint holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Sequence, TypeVar

from pyspark import RDD, StorageLevel

from dstream_kafka._spark_internals import live_conf
from dstream_kafka.config import SparkConfReader
from dstream_kafka.errors import ConfigurationError, StreamingStateError
from dstream_kafka.streaming.checkpoint_state import (CheckpointLayout, CheckpointMetadata,
                                                      StateCheckpointer)
from dstream_kafka.streaming.clock import (first_batch_time, graceful_stop_timeout_ms, now_ms,
                                           seconds_to_ms)
from dstream_kafka.streaming.dstream import DStream, TransformedDStream, _call_site
from dstream_kafka.streaming.input import InputDStream, QueueInputDStream
from dstream_kafka.streaming.listener import (BatchInfo, ListenerBus, StreamingListener,
                                              StreamingListenerStreamingStarted)
from dstream_kafka.streaming.outputs import context_outputs
from dstream_kafka.streaming.graph import _STOPPING, ACTIVE, INITIALIZED, STOPPED, DStreamGraph
from dstream_kafka.streaming.scheduler import JobScheduler
from dstream_kafka.streaming.sigterm import install_sigterm_handler
from dstream_kafka.streaming.sources import FileInputDStream, SocketInputDStream

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = ["StreamingContext", "DStreamGraph"]  # DStreamGraph: see .graph

log = logging.getLogger(__name__)

T = TypeVar("T")


class StreamingContext:
    """Main entry point of a streaming application on an existing SparkContext.

    Parameters
    ----------
    sparkContext : SparkContext
        The SparkContext that runs the batches' jobs.
    batchDuration : float
        The batch interval in seconds; fractions are allowed and rounded to whole ms.
        ``0``: no fixed interval (Structured Streaming's ``ProcessingTime(0)``): the next
        batch is planned as soon as the previous one finished and an input stream has new
        data; while none has, the inputs are checked every ``spark.streaming.pollingDelay``
        (default 10 ms) and no Spark job runs. Window and state operations need an
        interval; ``spark.streaming.concurrentJobs=2`` plans and runs the next batch while
        the previous one runs (offsets still commit in order).

    Examples
    --------
    >>> ssc = StreamingContext(sc, 0.5)                       # doctest: +SKIP
    >>> ssc.queueStream([[1, 2], [3]]).map(lambda x: x * 2).pprint()  # doctest: +SKIP
    >>> ssc.start(); ssc.awaitTerminationOrTimeout(2); ssc.stop(False)  # doctest: +SKIP
    """

    _class_lock: ClassVar[threading.Lock] = threading.Lock()
    _active_context: ClassVar[StreamingContext | None] = None

    def __init__(self, sparkContext: SparkContext, batchDuration: float | None = None) -> None:
        from dstream_kafka.spark_connect import refuse_connect

        refuse_connect(sparkContext, "StreamingContext", "dstream_kafka.sql.createDataFrameStream "
                       "(see the Spark Connect guide)")
        if batchDuration is None:
            raise ConfigurationError("batchDuration must be given (seconds, e.g. 0.5)")
        self._sc = sparkContext
        #: No fixed interval (batchDuration=0): batch times are then distinct wall-clock ms,
        #: on a grid of 1 ms, so the time arithmetic of the graph holds unchanged.
        self._continuous = (isinstance(batchDuration, (int, float))
                            and not isinstance(batchDuration, bool) and batchDuration == 0)
        self._batch_ms = 1 if self._continuous else seconds_to_ms(batchDuration, "batchDuration")
        self._state = INITIALIZED
        self._cond = threading.Condition()
        self.graph = DStreamGraph(self)
        self._bus = ListenerBus()
        self._scheduler: JobScheduler | None = None
        self._checkpointer: StateCheckpointer | None = None
        self._error: BaseException | None = None  # the failure that stopped the context
        self._batch_error: BaseException | None = None  # the last failure it went on after
        self._sigterm_hook: Any = None
        self._last_checkpoint_time: int | None = None
        self._last_input_data: tuple[int, dict[int, Any]] | None = None
        self._start_site = ""
        #: The last 100 completed batches' progress records, oldest first.
        self.completed_batches: deque[BatchInfo] = deque(maxlen=100)
        conf = SparkConfReader(live_conf(sparkContext))  # every engine key, read here once
        #: Seconds a graceful stop waits for queued batches before dropping the rest:
        #: ``spark.streaming.gracefulStopTimeout``, else 10 batch intervals (10 s with
        #: ``batchDuration=0``). Settable before ``start``.
        self.graceful_stop_timeout: float = graceful_stop_timeout_ms(
            conf.graceful_stop_timeout_ms, 1000 if self._continuous else self._batch_ms) / 1000.0
        self._polling_delay_ms = conf.polling_delay_ms
        #: Whether SIGTERM stops gracefully: ``spark.streaming.stopGracefullyOnShutdown``
        #: (default false, as Spark: SIGTERM then stops at once, queued batches dropped).
        self.stop_gracefully_on_shutdown: bool = conf.stop_gracefully_on_shutdown
        #: ``spark.streaming.concurrentJobs``: batches whose output operations run at once.
        self._concurrent_jobs = conf.concurrent_jobs
        self._file_remember_ms = conf.file_stream_min_remember_ms
        #: The outputs the registered factories made for this context (the Streaming page of
        #: ``spark.streaming.kafka.ui.port``), served while this runs; see :mod:`.outputs`.
        self._outputs = context_outputs(sparkContext, self._batch_ms, conf.conf)

    # -- properties --------------------------------------------------------------------

    @property
    def sparkContext(self) -> SparkContext:
        """The SparkContext this context runs on."""
        return self._sc

    @property
    def batch_duration(self) -> float:
        """The batch interval in seconds (0.0: none, batches run back to back)."""
        return 0.0 if self._continuous else self._batch_ms / 1000.0

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

    def textFileStream(self, directory: str) -> DStream[str]:
        """Create a stream of the lines of new files in ``directory``.

        Files are picked as Spark's ``FileInputDStream`` picks them: see
        :mod:`.sources`. Files must be moved into the directory complete.
        """
        return FileInputDStream(self, directory, lambda sc, path: sc.textFile(path),
                                self._file_remember_ms)

    def binaryRecordsStream(self, directory: str, recordLength: int) -> DStream[bytes]:
        """Create a stream of the fixed-length records (``bytes``) of new files in
        ``directory``; files are picked as by :meth:`textFileStream`.

        Raises
        ------
        ConfigurationError
            When ``recordLength`` is not a positive whole number.
        """
        if (not isinstance(recordLength, int) or isinstance(recordLength, bool)
                or recordLength <= 0):
            raise ConfigurationError(
                f"recordLength must be a positive whole number of bytes, got {recordLength!r}")
        return FileInputDStream(self, directory,
                                lambda sc, path: sc.binaryRecords(path, recordLength),
                                self._file_remember_ms, recordLength)

    def socketTextStream(self, hostname: str, port: int,
                         storageLevel: StorageLevel = StorageLevel.MEMORY_AND_DISK_2
                         ) -> DStream[str]:
        """Create a stream of the UTF-8 lines a TCP server at ``hostname:port`` sends.

        A driver thread receives the lines (see :mod:`.sources`); each batch gets those
        received since the previous batch. Not fault tolerant, as Spark's receiver
        without a write-ahead log. ``storageLevel`` is accepted for compatibility: the
        lines wait in driver memory until their batch.
        """
        return SocketInputDStream(self, hostname, port)

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
            # Spark takes the SparkContext's checkpoint folder too: it is where Spark's
            # stateful streams checkpoint their RDDs (here they are checkpointed locally).
            self.graph.validate(self._checkpointer is not None
                                or self._sc.getCheckpointDir() is not None)
            self._bus.start()
            started: list[InputDStream[Any]] = []
            try:
                for output in self._outputs:  # before the inputs start: they feed them
                    if output.listener is not None:
                        self._bus.add(output.listener)
                    output.start()
                for stream in self.graph.input_streams:
                    stream.start()
                    started.append(stream)
                scheduler, first_time = self._create_scheduler()
            except BaseException:
                for stream in started:
                    self._safe(stream.stop, "stop")
                self._bus.stop()
                self._stop_outputs()
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
            set_job_description=next(
                (s for s in (o.job_description_setter() for o in self._outputs) if s),
                self._sc.setJobDescription),
            concurrent_jobs=self._concurrent_jobs,
            on_error=None if self._failure_stops() else self._on_batch_error,
            has_new_data=self.graph.has_new_data if self._continuous else None,
            poll_ms=self._polling_delay_ms)
        return scheduler, start

    def _failure_stops(self) -> bool:
        """Whether a failed batch stops this context (else it is reported and skipped)."""
        return any(stream.failure_stops_context for stream in self.graph.input_streams)

    def stop(self, stopSparkContext: bool = True, stopGraceFully: bool = False) -> None:
        """Stop the batch loop and the inputs; optionally the SparkContext.

        Graceful: every batch generated so far is processed and completed first (up to
        :attr:`graceful_stop_timeout`, then the rest is dropped), and a final checkpoint
        is written. Otherwise the running batch starts no further output operation and is
        not completed (no commit hooks, so nothing of it is committed, even when its last
        output operation returns while the stop waits for it; it is read again at the next
        start), and queued batches are dropped. Stopping a stopped context does nothing
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
        # First: a non-graceful stop completes no batch from here on, even one whose output
        # returns while the sources below are told to give up.
        self._scheduler.request_stop(graceful)
        for stream in self.graph.input_streams:  # a source waiting on a dead broker gives up
            self._safe(stream.on_stop_requested, "on_stop_requested")
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
        self._stop_outputs()
        with self._cond:
            self._state = STOPPED
            self._cond.notify_all()
        with StreamingContext._class_lock:
            if StreamingContext._active_context is self:
                StreamingContext._active_context = None
        if self._sigterm_hook is not None:
            self._sigterm_hook.uninstall()

    def _stop_outputs(self) -> None:
        for output in self._outputs:
            self._safe(output.stop, f"{type(output).__name__}.stop")

    def _engine_threads(self) -> tuple[threading.Thread, ...]:
        threads = self._scheduler.threads if self._scheduler is not None else ()
        bus_thread = self._bus._thread
        return threads + ((bus_thread,) if bus_thread is not None else ())

    def _stop_on_sigterm(self) -> None:
        # Spark's shutdown hook: stopSparkContext=false, graceful only when configured.
        self.stop(stopSparkContext=False, stopGraceFully=self.stop_gracefully_on_shutdown)

    def awaitTermination(self, timeout: float | None = None) -> None:
        """Wait until the context stops (or ``timeout`` seconds pass).

        Raises
        ------
        BaseException
            The error that failed a batch and stopped the context; or, in a context that
            goes on after failed batches (no input stream commits positions, see
            ``InputDStream.failure_stops_context``), the latest batch failure, at once
            and on every later call (Spark's behaviour).
        """
        self.awaitTerminationOrTimeout(timeout)

    def awaitTerminationOrTimeout(self, timeout: float | None) -> bool:
        """Wait up to ``timeout`` seconds; return whether the context has stopped.

        Raises
        ------
        BaseException
            The error that failed a batch and stopped the context; or, in a context that
            goes on after failed batches (no input stream commits positions, see
            ``InputDStream.failure_stops_context``), the latest batch failure, at once
            and on every later call (Spark's behaviour).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._state != STOPPED and self._batch_error is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                # Short waits keep the main thread responsive to signals (SIGTERM).
                self._cond.wait(0.25 if remaining is None else min(remaining, 0.25))
            stopped = self._state == STOPPED
        error = self._error or self._batch_error
        if error is not None:
            raise error
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

    def _on_batch_error(self, error: BaseException) -> None:
        # Spark's ContextWaiter.notifyError: awaitTermination raises it, batches go on.
        with self._cond:
            self._batch_error = error
            self._cond.notify_all()

    def _on_fatal(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        threading.Thread(target=self.stop, name="dstream-stop-on-error",
                         kwargs={"stopSparkContext": False}).start()

    def _write_checkpoint(self, time_ms: int, inputs: dict[int, Any],
                          force: bool = False) -> None:
        """Checkpoint batch ``time_ms`` if it is a checkpoint time (or ``force``)."""
        assert self._checkpointer is not None
        if self.graph.write_checkpoint(self._checkpointer, time_ms, inputs, force):
            self._last_checkpoint_time = time_ms

    def _recover(self, metadata: CheckpointMetadata) -> None:
        assert self._checkpointer is not None
        self.graph.recover(self._checkpointer, metadata)

    @staticmethod
    def _safe(call: Callable[[], Any], what: str) -> None:
        try:
            call()
        except Exception:
            log.exception("%s raised", what)
