"""Input streams: the contract between the engine and a data source, and ``queueStream``.

Lifecycle of an :class:`InputDStream` (all calls on the driver):

1. Constructed before ``ssc.start()``; it registers itself in ``ssc.graph.input_streams``
   and gets ``self.id`` (creation order, stable across restarts of the same program).
2. ``restore_checkpoint_data(data)`` once, during ``StreamingContext.getOrCreate``, when
   the checkpoint holds data this stream returned from ``checkpoint_data``. This happens
   before ``start()``.
3. ``start()`` on ``ssc.start()``, in graph order, before the first batch.
4. For every batch time, in increasing order, on the scheduler thread:
   ``compute(batch_time)`` once, before any output operation of that batch runs. Batches
   are generated on schedule, so ``compute`` for later times may run while an earlier
   batch is still processing.
5. After all output operations of ``batch_time`` succeeded, on the scheduler thread and
   before the next batch starts processing, in this order:

   a. when ``ssc.checkpoint`` is set: ``checkpoint_data(batch_time)``; the value is
      written with the state at checkpoint times (every batch without stateful streams,
      else every checkpoint interval, and the last batch of a graceful stop);
   b. ``on_batch_completed(batch_time, info)``.

   Batches complete in order. If generating the batch, an output operation, the
   checkpoint or a completion hook failed: ``on_batch_failed(batch_time, error)``, then
   ``awaitTermination`` raises ``error``, and either the context stops (when any input
   stream's :attr:`~InputDStream.failure_stops_context` is true, as for Kafka streams) or
   the batch is skipped and later batches run (Spark's behaviour, for graphs of queue,
   file and socket streams only). A batch cut short by a non-graceful stop gets no hook
   at all.
6. ``stop()`` on ``ssc.stop()``, after the last batch was processed or dropped.

Because ``compute``, the hooks and ``checkpoint_data`` all run on the scheduler thread,
never concurrently, a source may use a non-thread-safe client (e.g. a Kafka consumer)
from them without locks.
"""

from __future__ import annotations

import collections
import threading
from typing import TYPE_CHECKING, Any, Iterable, Mapping, TypeVar

from pyspark import RDD

from dstream_kafka.streaming.dstream import DStream
from dstream_kafka.streaming.listener import StreamInputInfo

if TYPE_CHECKING:
    from dstream_kafka.streaming.checkpoint_state import CheckpointLayout
    from dstream_kafka.streaming.context import StreamingContext
    from dstream_kafka.streaming.listener import BatchInfo

__all__ = ["InputDStream", "QueueInputDStream"]

T = TypeVar("T")


class InputDStream(DStream[T]):
    """Base class of every source stream; subclasses implement :meth:`compute`.

    The slide duration is the batch duration. The methods below are the contract with
    the engine (see the module docstring for when each is called).
    """

    #: Whether a failed batch stops the context. True keeps a source that commits its
    #: position (the Kafka streams, and by default every source written for this engine)
    #: from moving past data no batch delivered. False (queue, file and socket streams,
    #: which commit nothing) lets Spark's behaviour apply when every input of the graph
    #: says so: the failure is reported and later batches run.
    failure_stops_context: bool = True

    def __init__(self, ssc: StreamingContext) -> None:
        super().__init__(ssc, ())
        ssc.graph.add_input(self)

    @property
    def name(self) -> str:
        """A display name: the class name without ``InputDStream`` and the id."""
        short = type(self).__name__.replace("InputDStream", "").replace("DStream", "")
        return f"{short or type(self).__name__} stream [{self.id}]"

    def start(self) -> None:
        """Acquire resources (connections, consumers) before the first batch."""

    def stop(self) -> None:
        """Release resources; called once when the context stops."""

    def on_stop_requested(self) -> None:
        """Called when the context's stop begins, before it waits for the batch loop: a
        source blocked in :meth:`compute` on an external system may give up then."""

    def has_new_data(self) -> bool:
        """Whether a batch planned now would hold data (asked on the scheduler thread).

        Only a context without a fixed interval (``batchDuration=0``) asks, before each batch,
        every ``spark.streaming.pollingDelay`` while no input has data: no batch (and no
        Spark job) runs until one has. A source that cannot tell keeps this base method and
        is refused by such a context.
        """
        raise NotImplementedError

    def compute(self, batch_time: int) -> RDD[T] | None:
        """Return the RDD of data for ``batch_time`` (epoch ms), or ``None`` for none.

        Called exactly once per batch time, in increasing order. Report what the RDD
        holds with :meth:`report_input_info` from here.
        """
        raise NotImplementedError

    def report_input_info(self, batch_time: int, num_records: int,
                          metadata: Mapping[str, Any] | None = None) -> None:
        """Record what this stream read for ``batch_time``.

        Call from :meth:`compute`. The record lands in
        ``BatchInfo.streamIdToInputInfo()[self.id]`` of that batch, and ``num_records``
        adds to ``BatchInfo.numRecords()`` (Spark's semantics: the number of records in the
        batch's RDD). Put a human-readable text under ``metadata["Description"]``.
        """
        info = StreamInputInfo(self.id, int(num_records), dict(metadata or {}))
        self._ssc.graph.report_input_info(batch_time, info)

    def on_batch_completed(self, batch_time: int, batch_info: BatchInfo) -> None:
        """Called after every output operation of ``batch_time`` succeeded.

        This is the place to commit what the batch consumed: the hook runs once per
        batch, in batch order, after the outputs and the checkpoint. An exception fails
        the batch (and stops the context).
        """

    def on_batch_failed(self, batch_time: int, error: BaseException) -> None:
        """Called when ``batch_time`` failed; nothing of it must be committed."""

    def checkpoint_data(self, batch_time: int) -> Mapping[str, Any] | None:
        """Return JSON-able data describing the input up to and including ``batch_time``.

        Called for every completed batch when ``ssc.checkpoint`` is set, before its
        ``on_batch_completed``; at checkpoint times the value is written atomically with
        the checkpoint metadata and state, and a restart hands it to
        :meth:`restore_checkpoint_data`.
        Later batches may have been generated (computed) already, so describe the
        position right after ``batch_time`` (e.g. its until-offsets), not the current
        position. ``None`` stores nothing.
        """
        return None

    def restore_checkpoint_data(self, data: Mapping[str, Any]) -> None:
        """Receive what :meth:`checkpoint_data` returned at the recovered checkpoint.

        Called by ``StreamingContext.getOrCreate`` before :meth:`start`. Batches that
        completed after that checkpoint are read again (at-least-once, as Spark).
        """

    @property
    def checkpoint_layout(self) -> CheckpointLayout | None:
        """Paths of the context's checkpoint folder (``offsets_dir``, ``commits_dir``, ...),
        or ``None`` when checkpointing is off."""
        return self._ssc._checkpoint_layout()


class QueueInputDStream(InputDStream[T]):
    """Takes RDDs from a queue: one per batch, or all queued ones at once.

    Items that are not RDDs are parallelized when taken. When the queue is empty the
    batch gets ``default`` or an empty RDD. If the caller passes a ``collections.deque``
    it is used as the queue, so more items can be appended while the stream runs.
    Queue contents are not checkpointed (Spark's ``queueStream`` cannot be at all).
    A failed batch's items are not put back (as Spark).
    """

    failure_stops_context = False

    def __init__(self, ssc: StreamingContext, rdds: Iterable[Any], one_at_a_time: bool = True,
                 default: RDD[T] | None = None) -> None:
        super().__init__(ssc)
        self.queue: collections.deque[Any] = (
            rdds if isinstance(rdds, collections.deque) else collections.deque(rdds))
        self._one_at_a_time = one_at_a_time
        self._default = default
        self._lock = threading.Lock()

    def has_new_data(self) -> bool:
        with self._lock:
            return bool(self.queue) or self._default is not None

    def compute(self, batch_time: int) -> RDD[T] | None:
        with self._lock:
            if self._one_at_a_time:
                items = [self.queue.popleft()] if self.queue else []
            else:
                items = list(self.queue)
                self.queue.clear()
        rdds = [item if isinstance(item, RDD) else self._sc.parallelize(list(item))
                for item in items]
        if len(rdds) == 1:
            return rdds[0]
        if rdds:
            return self._sc.union(rdds)
        if self._default is not None:
            return self._default
        return self._sc.emptyRDD()
