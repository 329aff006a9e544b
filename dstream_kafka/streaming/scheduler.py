"""The driver-side batch loop: the job queue and graceful stop (SIGTERM: :mod:`.sigterm`).

Threads
-------
* **scheduler thread** (``dstream-scheduler``): fires batch times on schedule and
  generates each batch (input streams' ``compute``, transform functions), then queues it.
  It also finishes each batch: checkpoint, input streams' ``on_batch_completed`` /
  ``on_batch_failed`` hooks, clearing old RDDs. Generation and completion therefore never
  run concurrently, and a batch's completion work ends before the next batch starts.
* **job threads** (``dstream-jobs``): ``spark.streaming.concurrentJobs`` of them (default
  1) each run the output operations of one batch, in registration order; so with the
  default one batch runs at a time. With more, consecutive batches run at once but still
  complete in batch-time order, and once a batch fails no later batch completes (its
  offsets are never committed past the failed one) unless the scheduler was told to go on
  after failures (``on_error``, Spark's behaviour for graphs without committed positions).
* **listener bus** (see :mod:`.listener`): delivers events.

Batch times come from :mod:`.clock`: multiples of the batch interval since the epoch, as
Spark's ``RecurringTimer``. A batch
that runs long never makes the loop skip a batch time: later batches are generated on
schedule and wait in the queue, and their scheduling delay shows the wait.

Without a fixed interval (``batchDuration=0``, Structured Streaming's ``ProcessingTime(0)``)
a batch is generated as soon as a job thread is free and an input stream has new data
(``has_new_data``); while none has, the check repeats every ``poll_ms``, so an idle stream
runs no Spark job. Batch times are then the wall clock when the batch is generated, made
strictly increasing. With ``spark.streaming.concurrentJobs`` above 1 the next batch is
planned and runs while the previous one's job still runs; it completes (commits) after it.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import queue
import sys
import threading
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from dstream_kafka.streaming.clock import now_ms
from dstream_kafka.streaming.listener import (
    BatchInfo,
    ListenerBus,
    OutputOperationInfo,
    StreamingListenerBatchCompleted,
    StreamingListenerBatchStarted,
    StreamingListenerBatchSubmitted,
    StreamingListenerOutputOperationCompleted,
    StreamingListenerOutputOperationStarted,
    StreamInputInfo,
)

__all__ = [
    "JobScheduler",
    "OutputJob",
]

log = logging.getLogger(__name__)

#: How long a stop waits for the scheduler beyond the graceful timeout (a non-graceful stop
#: waits this long for the running output operation, as Spark's job executor waits a
#: bounded time before it gives up on its threads).
STOP_WAIT_SECONDS = 30.0


def _stacks(threads: Sequence[threading.Thread]) -> str:
    """The current stack of each live thread in ``threads``, for a stuck-stop report."""
    frames = sys._current_frames()
    parts = []
    for thread in threads:
        frame = frames.get(thread.ident) if thread.ident is not None else None
        if thread.is_alive() and frame is not None:
            parts.append(f"{thread.name}:\n" + "".join(traceback.format_stack(frame)))
    return "\n".join(parts) or "(no engine thread is alive any more)"


# ---------------------------------------------------------------------------------------
# Batches and the loop
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class OutputJob:
    """One output operation of one batch, ready to run on the job thread."""

    output_id: int
    name: str
    description: str
    run: Callable[[], None]


@dataclass
class _Batch:
    time: int
    jobs: Sequence[OutputJob]
    input_infos: dict[int, StreamInputInfo]
    submission_time: int
    start_time: int | None = None
    end_time: int | None = None
    op_infos: dict[int, OutputOperationInfo] = field(default_factory=dict)
    error: BaseException | None = None
    aborted: bool = False

    def info(self) -> BatchInfo:
        return BatchInfo(batch_time=self.time, stream_id_to_input_info=self.input_infos,
                         submission_time=self.submission_time,
                         processing_start_time=self.start_time,
                         processing_end_time=self.end_time,
                         output_operation_infos=self.op_infos)


#: ``generate(time) -> (jobs, input infos)``; runs on the scheduler thread.
GenerateFn = Callable[[int], "tuple[Sequence[OutputJob], dict[int, StreamInputInfo]]"]


class JobScheduler:
    """Generates batches on schedule and runs their output operations one batch at a time.

    Parameters
    ----------
    batch_ms : int
        The batch interval.
    generate : callable
        ``generate(time) -> (jobs, input_infos)`` builds one batch; an exception stops the
        scheduler and is reported through ``on_fatal``.
    complete : callable
        ``complete(time, batch_info)`` runs after every output operation of a batch
        succeeded (checkpoint, commit hooks, cleanup); an exception fails the batch.
    fail : callable
        ``fail(time, error)`` runs when generating or processing a batch failed.
    on_fatal : callable
        ``on_fatal(error)`` is told once that the scheduler stops because of ``error``.
    on_error : callable, optional
        Given: a failed batch (generation, output operation or completion) is reported with
        ``on_error(error)`` and later batches run and complete, as Spark's scheduler does.
        ``None`` (the default): the first failure stops the scheduler (``on_fatal``).
    bus : ListenerBus
        Receives the batch and output-operation events.
    graceful_timeout_ms : int
        How long a graceful stop waits for queued batches before it drops the rest.
    concurrent_jobs : int
        ``spark.streaming.concurrentJobs``: how many batches run their output operations at
        once (default 1).
    set_job_description : callable, optional
        Called on the job thread before each output operation with a description for the
        Spark UI.
    clock : callable, optional
        Returns epoch milliseconds; replaceable in tests.
    has_new_data : callable, optional
        Given: no fixed interval. ``has_new_data()`` says whether a batch would hold data; a
        batch is generated when it is true and a job thread is free. An exception counts as
        true, so the batch's planning meets the error and reports it.
    poll_ms : int
        With ``has_new_data``: the pause between two checks that found nothing.
    """

    def __init__(self, batch_ms: int, generate: GenerateFn,
                 complete: Callable[[int, BatchInfo], None],
                 fail: Callable[[int, BaseException], None],
                 on_fatal: Callable[[BaseException], None], bus: ListenerBus,
                 graceful_timeout_ms: int,
                 set_job_description: Callable[[str], None] | None = None,
                 clock: Callable[[], int] = now_ms, concurrent_jobs: int = 1,
                 on_error: Callable[[BaseException], None] | None = None,
                 has_new_data: Callable[[], bool] | None = None, poll_ms: int = 10) -> None:
        self._batch_ms = batch_ms
        self._has_new_data = has_new_data
        self._poll_ms = max(1, poll_ms)
        self._next_poll = 0  # continuous: epoch ms of the next check for new data
        #: Continuous: checks for new data that found none (a test reads the poll rate).
        self.empty_polls = 0
        self._generate_fn = generate
        self._complete_fn = complete
        self._fail_fn = fail
        self._on_fatal = on_fatal
        self._on_error = on_error
        self._bus = bus
        self._graceful_timeout_ms = graceful_timeout_ms
        self._set_job_description = set_job_description
        self._clock = clock
        self._events: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._jobs: queue.SimpleQueue[_Batch | None] = queue.SimpleQueue()
        self._interrupt = threading.Event()
        self._abandoned = threading.Event()
        self._stop_requested = threading.Event()
        self._stop_lock = threading.Lock()
        #: Cleared by a non-graceful stop: batches are completed only while it is set.
        self._completing = threading.Event()
        self._completing.set()
        self._scheduler_thread: threading.Thread | None = None
        self._job_threads: list[threading.Thread] = []
        self._concurrent_jobs = max(1, concurrent_jobs)
        self.next_batch_time: int | None = None

    @property
    def threads(self) -> tuple[threading.Thread, ...]:
        """The engine threads (a stop requested from one of them must not join it)."""
        scheduler = () if self._scheduler_thread is None else (self._scheduler_thread,)
        return scheduler + tuple(self._job_threads)

    def start(self, first_time: int) -> None:
        """Start both threads; the first batch is generated at ``first_time``."""
        self.next_batch_time = first_time
        self._job_threads = [
            threading.Thread(target=self._run_jobs, name="dstream-jobs", daemon=True)
            for _ in range(self._concurrent_jobs)
        ]
        self._scheduler_thread = threading.Thread(target=self._run_scheduler,
                                                  name="dstream-scheduler", daemon=True)
        for thread in self._job_threads:
            thread.start()
        self._scheduler_thread.start()

    @property
    def stop_requested(self) -> bool:
        """Whether :meth:`request_stop` (or :meth:`stop`) was called."""
        return self._stop_requested.is_set()

    def request_stop(self, graceful: bool) -> None:
        """Tell the loop to stop, without waiting; :meth:`stop` then waits. Once only.

        Non-graceful: from this call on no batch is completed (no completion hook, so no
        commit), including one whose output operations are running or have just returned,
        and the running batch starts no further output operation.
        """
        with self._stop_lock:
            if self._stop_requested.is_set():
                return
            if not graceful:
                self._completing.clear()
                self._interrupt.set()
            self._stop_requested.set()
        self._events.put(("stop", graceful))

    def stop(self, graceful: bool) -> None:
        """Stop generating batches and wait for the threads to end.

        Graceful: every batch generated so far is processed and completed (up to the
        graceful timeout). Otherwise queued batches are dropped, the running batch starts
        no further output operation and no batch is completed after this call began: an
        output operation that returns after it does not commit its batch (it is read again
        at the next start), as in Spark, whose non-graceful stop sends no commit queue.
        The wait is bounded (the graceful timeout plus :data:`STOP_WAIT_SECONDS`): a batch
        still running then is left to its daemon threads and never completed.
        """
        self.request_stop(graceful)
        thread = self._scheduler_thread
        if thread is None or thread is threading.current_thread():
            return
        bound = STOP_WAIT_SECONDS + (self._graceful_timeout_ms / 1000.0 if graceful else 0.0)
        thread.join(bound)
        if thread.is_alive():
            # A Python thread cannot be interrupted: leave it (a daemon) and make sure that
            # whatever it finishes later is never completed, so nothing is committed after
            # the stop returned.
            self._abandoned.set()
            log.warning(
                "The streaming scheduler did not stop within %.0f s: a batch is still being "
                "generated or an output operation is still running (a stuck Spark job or "
                "Kafka call). The stop goes on without it; that batch is not completed and "
                "its offsets are not committed. Cancel stuck jobs in the Spark UI. Where the "
                "engine threads are:\n%s", bound, _stacks(self.threads))

    # -- scheduler thread --------------------------------------------------------------

    def _run_scheduler(self) -> None:
        pending: collections.deque[_Batch] = collections.deque()
        # Batches handed to the job threads, oldest first; each completes only after every
        # older one did, so completion (commits) stays in batch-time order.
        running: collections.deque[_Batch] = collections.deque()
        processed: set[int] = set()  # times of running batches whose jobs are done
        failed = False
        ticking = True
        deadline: int | None = None
        events: list[tuple[str, Any]] = []
        assert self.next_batch_time is not None

        def hand_over() -> None:
            while len(running) < self._concurrent_jobs and pending:
                running.append(pending.popleft())
                self._jobs.put(running[-1])

        while True:
            # Events first, then one due batch: behind schedule, the loop completes finished
            # batches and hands the next one over before it plans another, so jobs run while
            # it plans and never wait for a whole backlog to be planned first. A late loop
            # still generates every batch time, back to back.
            for kind, payload in events:
                if kind == "stop":
                    ticking = False
                    if payload:
                        deadline = self._clock() + self._graceful_timeout_ms
                    else:
                        pending.clear()
                elif kind == "done":
                    processed.add(payload.time)
                    while running and running[0].time in processed:
                        batch = running.popleft()
                        processed.discard(batch.time)
                        if failed:
                            continue  # a later batch never completes past a failed one
                        if not self._finish(batch):
                            failed = True
                            ticking = False
                            pending.clear()
                            self._interrupt.set()
            events = []
            hand_over()
            batch_time = self._due_time(ticking, pending, running)
            if batch_time is not None:
                self.next_batch_time = batch_time + self._batch_ms
                generated = self._generate(batch_time)
                if generated is None:  # continuous: a failing input is not retried in a spin
                    self._next_poll = self._clock() + self._poll_ms
                if generated is None and self._stop_requested.is_set():
                    ticking = False  # dropped at the stop: the queued batches still run if graceful
                elif generated is None and self._on_error is None:  # stop like a failed batch
                    ticking = False
                    pending.clear()
                    self._interrupt.set()
                elif generated is not None:  # (a failed generation reported: go on)
                    pending.append(generated)
                    hand_over()
            if not ticking and not running:
                break
            if deadline is not None and self._clock() >= deadline:
                log.warning("Graceful stop timed out; dropping %d queued batches", len(pending))
                pending.clear()
                self._interrupt.set()
                deadline = None
            with contextlib.suppress(queue.Empty):
                events.append(self._events.get(timeout=self._wait_seconds(
                    ticking and (self._has_new_data is None or self._free(pending, running)),
                    deadline)))
                while True:  # everything already posted, in order
                    events.append(self._events.get_nowait())
        for _ in self._job_threads:
            self._jobs.put(None)
        for thread in self._job_threads:
            thread.join()

    def _free(self, pending: Sequence[_Batch], running: Sequence[_Batch]) -> bool:
        """Whether a job thread could take a new batch now."""
        return not pending and len(running) < self._concurrent_jobs

    def _due_time(self, ticking: bool, pending: Sequence[_Batch],
                  running: Sequence[_Batch]) -> int | None:
        """The time of the batch to generate now, or ``None`` for none yet."""
        assert self.next_batch_time is not None
        if not ticking:
            return None
        now = self._clock()
        if self._has_new_data is None:  # the oldest due time: none is ever skipped
            return self.next_batch_time if now >= self.next_batch_time else None
        if not self._free(pending, running) or now < self._next_poll:
            return None
        try:
            ready = self._has_new_data()
        except Exception:  # the batch's planning meets the error again and reports it
            log.debug("Checking the inputs for new data failed", exc_info=True)
            ready = True
        if not ready:
            self.empty_polls += 1
            self._next_poll = self._clock() + self._poll_ms
            return None
        return max(self._clock(), self.next_batch_time)

    def _wait_seconds(self, ticking: bool, deadline: int | None) -> float | None:
        targets = []
        if ticking and self._has_new_data is not None:
            targets.append(self._next_poll)
        elif ticking and self.next_batch_time is not None:
            targets.append(self.next_batch_time)
        if deadline is not None:
            targets.append(deadline)
        if not targets:
            return None
        return max(0.0, (min(targets) - self._clock()) / 1000.0)

    def _generate(self, batch_time: int) -> _Batch | None:
        try:
            jobs, input_infos = self._generate_fn(batch_time)
        except BaseException as error:
            if self._stop_requested.is_set():
                # The stop came while this batch was planned (a source gave up its wait at the
                # stop): the batch is dropped, which fails nothing the user asked for.
                log.warning("Batch %d ms was being planned when the stop came and is dropped: %s",
                            batch_time, error)
                self._safe_fail(batch_time, error)
                return None
            log.error("Error generating jobs for time %d ms", batch_time, exc_info=error)
            self._safe_fail(batch_time, error)
            self._report(error)
            return None
        batch = _Batch(batch_time, list(jobs), dict(input_infos), self._clock())
        self._bus.post("onBatchSubmitted", StreamingListenerBatchSubmitted(batch.info()))
        return batch

    def _finish(self, batch: _Batch) -> bool:
        """Complete or fail a processed batch; return False when the scheduler must stop."""
        if batch.aborted or self._abandoned.is_set() or not self._completing.is_set():
            return True  # stopped non-gracefully mid-batch: nothing is committed
        if batch.error is None:
            info = batch.info()
            try:
                self._complete_fn(batch.time, info)
            except BaseException as error:
                log.error("Completing batch %d ms failed", batch.time, exc_info=error)
                batch.error = error
        if batch.error is not None:
            self._safe_fail(batch.time, batch.error)
            self._bus.post("onBatchCompleted", StreamingListenerBatchCompleted(batch.info()))
            return self._report(batch.error)
        self._bus.post("onBatchCompleted", StreamingListenerBatchCompleted(batch.info()))
        return True

    def _report(self, error: BaseException) -> bool:
        """Report a failed batch; return True when later batches go on."""
        if self._on_error is None:
            self._on_fatal(error)
            return False
        try:
            self._on_error(error)
        except Exception:
            log.exception("Reporting the failure raised")
        return True

    def _safe_fail(self, batch_time: int, error: BaseException) -> None:
        try:
            self._fail_fn(batch_time, error)
        except Exception:
            log.exception("on_batch_failed hooks raised for batch %d ms", batch_time)

    # -- job thread --------------------------------------------------------------------

    def _run_jobs(self) -> None:
        while True:
            batch = self._jobs.get()
            if batch is None:
                return
            try:
                self._process(batch)
            except BaseException as error:  # never leave the scheduler waiting for "done"
                log.exception("Processing batch %d ms failed", batch.time)
                batch.error = batch.error or error
                batch.end_time = batch.end_time or self._clock()
            self._events.put(("done", batch))

    def _process(self, batch: _Batch) -> None:
        batch.start_time = self._clock()
        self._bus.post("onBatchStarted", StreamingListenerBatchStarted(batch.info()))
        for job in batch.jobs:
            if self._interrupt.is_set():
                batch.aborted = True
                return
            op = OutputOperationInfo(batch.time, job.output_id, job.name, job.description,
                                     start_time=self._clock())
            batch.op_infos[job.output_id] = op
            self._bus.post("onOutputOperationStarted",
                           StreamingListenerOutputOperationStarted(op))
            failure = None
            try:
                if self._set_job_description is not None:
                    self._set_job_description(
                        f"Streaming job from [output operation {job.output_id}, "
                        f"batch time {batch.time} ms]")
                job.run()
            except BaseException as error:  # reported, then the context stops
                batch.error = error
                failure = "".join(traceback.format_exception(error))
            op = OutputOperationInfo(batch.time, job.output_id, job.name, job.description,
                                     start_time=op.start_time, end_time=self._clock(),
                                     failure_reason=failure)
            batch.op_infos[job.output_id] = op
            self._bus.post("onOutputOperationCompleted",
                           StreamingListenerOutputOperationCompleted(op))
            if batch.error is not None:
                break
        batch.end_time = self._clock()
