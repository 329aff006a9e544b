"""DStream: a sequence of RDDs, one per batch time, with PySpark's ``DStream`` API.

Every stream belongs to the graph of one :class:`~.context.StreamingContext`, gets an ``id``
in creation order, and generates at most one RDD per batch time (memoized, as Spark's
``generatedRDDs``). RDDs are generated on the scheduler thread; output operations run on
the job thread. Transformations are lazy RDD transformations, so a batch runs only the
Spark jobs its output operations need.

Functions given to ``foreachRDD``, ``transform`` and ``transformWith`` may take the batch
time as an extra first argument, a local naive ``datetime`` as in PySpark; the form is
chosen from the function's signature.
"""

from __future__ import annotations

import inspect
import operator
import sys
from functools import partial
from itertools import chain
from typing import (TYPE_CHECKING, Any, Callable, Generic, Hashable, Iterable, Optional,
                    Sequence, TypeVar, Union, cast)

from pyspark import RDD, StorageLevel

from dstream_kafka._spark_internals import detached_rdd, portable_hash
from dstream_kafka.errors import ConfigurationError, StreamingStateError
from dstream_kafka.streaming.clock import (datetime_to_ms, is_valid_time, ms_to_datetime,
                                           seconds_to_ms, slice_times)
from dstream_kafka.streaming.scheduler import OutputJob

if TYPE_CHECKING:
    from datetime import datetime

    from pyspark.resultiterable import ResultIterable

    from dstream_kafka.streaming.context import StreamingContext

__all__ = ["DStream", "TransformedDStream", "ForEachDStream"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)
U = TypeVar("U")
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
S = TypeVar("S")

#: ``func(time_ms, rdds) -> RDD | None``: the internal form of every transformation.
RDDFunc = Callable[[int, Sequence[Any]], Optional[RDD[Any]]]


def takes_time(func: Callable[..., Any], n_rdds: int, what: str) -> bool:
    """Return whether ``func`` takes the batch time before its ``n_rdds`` RDD arguments.

    A function that can only be called with ``n_rdds + 1`` positional arguments takes the
    time; one that can only be called with ``n_rdds`` does not. When both work (defaults,
    ``*args``) the PySpark rule decides: the time is passed unless the function declares
    exactly ``n_rdds`` positional parameters.

    Raises
    ------
    TypeError
        When ``func`` accepts neither form.
    """
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # builtins without a signature: assume the short form
        return False

    def binds(n: int) -> bool:
        try:
            signature.bind(*([None] * n))
        except TypeError:
            return False
        return True

    short, long = binds(n_rdds), binds(n_rdds + 1)
    if short and long:
        positional = [p for p in signature.parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        return len(positional) != n_rdds
    if short or long:
        return long
    raise TypeError(f"{what} should take {n_rdds} or {n_rdds + 1} arguments")


# the whole package: the engine, the 0-8 facade (compat/) and the direct stream (plan/), whose
# foreachRDD calls the engine's; the call site is the user's line
_ENGINE_DIRS = (__file__.rsplit("/", 2)[0] + "/",)


def _call_site(name: str) -> str:
    """Return ``"<name> at <file>:<line>"`` for the first frame outside this package (the
    engine, the 0-8 facade and the direct stream, which are all the engine as users see it)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(_ENGINE_DIRS):
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return name
    return f"{name} at {frame.f_code.co_filename}:{frame.f_lineno}"


def _detached(rdd: RDD[Any]) -> RDD[Any]:
    """Return a Python RDD over the same (cached) JVM RDD without references to parents.

    Stateful streams build each RDD from the previous one; without this the chain of
    Python RDD objects (and their closures) would grow by one link per batch.
    """
    detached = detached_rdd(rdd)
    detached.partitioner = rdd.partitioner
    detached.is_cached = True
    return detached


class DStream(Generic[T_co]):
    """A discretized stream: one RDD of ``T_co`` per batch time.

    Create streams through :class:`~.context.StreamingContext` inputs and the methods
    below; streams can only be added while the context is not started.

    Subclasses implement :meth:`compute`. The engine calls :meth:`_get_or_compute`, which
    memoizes one RDD (or ``None``) per valid time, persists it when the stream is cached
    and truncates its lineage at the stream's checkpoint interval.
    """

    #: Cut the Python-side parent references of each generated RDD (stateful streams).
    _detach_python_lineage = False
    #: Cache and locally checkpoint every generated RDD (stateful streams).
    _truncate_every_slide = False
    #: The stream carries data across batches that a checkpoint must save.
    _keeps_state = False
    #: The stream needs ``StreamingContext.checkpoint`` to be set before start.
    requires_checkpoint_dir = False

    _ssc: StreamingContext
    _slide_ms: int

    def __init__(self, ssc: StreamingContext, parents: Sequence[DStream[Any]] = (),
                 slide_ms: int | None = None) -> None:
        for parent in parents:
            if parent._ssc is not ssc:
                raise ConfigurationError("All DStreams should belong to the same "
                                         "StreamingContext")
        self._ssc = ssc
        self._sc = ssc.sparkContext
        self._parents: tuple[DStream[Any], ...] = tuple(parents)
        self._slide_ms = slide_ms or (parents[0]._slide_ms if parents else ssc._batch_ms)
        self._generated: dict[int, RDD[Any] | None] = {}
        # ids of generated RDD objects this stream persisted (and so must unpersist)
        self._owned: set[int] = set()
        self._storage_level: StorageLevel | None = None
        self._checkpoint_ms: int | None = None
        self._remember_ms = 0
        self.is_cached = False
        self.is_checkpointed = False
        #: Stable id: the stream's position in creation order within its context.
        self.id: int = ssc.graph.register(self)

    # -- engine contract ---------------------------------------------------------------

    def compute(self, time_ms: int) -> RDD[Any] | None:
        """Return this stream's RDD for batch time ``time_ms`` (epoch ms), or ``None``.

        Called at most once per time, on the scheduler thread.
        """
        raise NotImplementedError

    def _get_or_compute(self, time_ms: int) -> RDD[Any] | None:
        if time_ms in self._generated:
            return self._generated[time_ms]
        graph = self._ssc.graph
        if not is_valid_time(time_ms, graph.zero_time, self._slide_ms):
            return None
        if graph.start_time is None or time_ms < graph.start_time:
            return None  # before this run: only RDDs restored from a checkpoint exist
        rdd = self.compute(time_ms)
        if rdd is not None:
            rdd = self._prepare(rdd, time_ms)
        self._generated[time_ms] = rdd
        return rdd

    def _prepare(self, rdd: RDD[Any], time_ms: int) -> RDD[Any]:
        truncate = self._truncate_every_slide or (
            self._checkpoint_ms is not None
            and (time_ms - self._ssc.graph.zero_time) % self._checkpoint_ms == 0)
        if (self._storage_level is not None or truncate) and not rdd.is_cached:
            rdd.persist(self._storage_level or StorageLevel.MEMORY_AND_DISK)
            if truncate:
                # Local checkpointing reuses the cached blocks: the lineage is cut after
                # the first job computes the RDD, without an extra job or a reliable write.
                rdd.localCheckpoint()
            if self._detach_python_lineage:
                rdd = _detached(rdd)
            self._owned.add(id(rdd))
        return rdd

    def _slice(self, from_ms: int, to_ms: int) -> list[RDD[Any]]:
        """Return the RDDs of the valid times in ``[from_ms, to_ms]``, computing them."""
        times = slice_times(from_ms, to_ms, self._ssc.graph.zero_time, self._slide_ms)
        rdds = [self._get_or_compute(t) for t in times]
        return [rdd for rdd in rdds if rdd is not None]

    def _parent_remember_ms(self) -> int:
        """How long parents must keep their RDDs for this stream."""
        return self._remember_ms

    def _durable_rdds(self, time_ms: int) -> list[tuple[DStream[Any], int]]:
        """``(stream, time)`` pairs whose RDDs a checkpoint after batch ``time_ms`` saves."""
        return []

    def _state_checkpoint_ms(self) -> int:
        """How often a checkpoint must save this stream's state.

        ``checkpoint(interval)`` when set, else Spark's default: the first multiple of the
        slide duration that is at least 10 seconds.
        """
        if self._checkpoint_ms is not None:
            return self._checkpoint_ms
        return self._slide_ms * -(-10_000 // self._slide_ms)

    def _clear_before(self, time_ms: int) -> None:
        """Forget RDDs older than the remember duration and unpersist those we cached."""
        threshold = time_ms - self._remember_ms
        for t in [t for t in self._generated if t <= threshold]:
            rdd = self._generated.pop(t)
            # A stream may return one RDD object for several times (a state without new
            # data); it stays cached while a newer time still holds it.
            if (rdd is not None and id(rdd) in self._owned
                    and all(r is not rdd for r in self._generated.values())):
                self._owned.discard(id(rdd))
                rdd.unpersist()

    def _kind(self) -> str:
        return type(self).__name__

    def _check_not_started(self, what: str) -> None:
        if self._ssc.graph.start_time is not None:
            raise StreamingStateError(f"Cannot {what} after the streaming context has started")

    def _new(self, func: RDDFunc, parents: Sequence[DStream[Any]] | None = None) -> DStream[Any]:
        return TransformedDStream(self._ssc, parents or [self], func)

    def _rdd_op(self, op: Callable[[RDD[Any]], RDD[Any]]) -> DStream[Any]:
        return self._new(lambda t, rdds: op(rdds[0]))

    def _default_partitions(self, num_partitions: int | None) -> int:
        return self._sc.defaultParallelism if num_partitions is None else num_partitions

    def __repr__(self) -> str:
        return f"{self._kind()}[{self.id}]"

    # -- basic operations --------------------------------------------------------------

    def context(self) -> StreamingContext:
        """Return the StreamingContext this stream belongs to."""
        return self._ssc

    def count(self) -> DStream[int]:
        """Return a stream with one element per batch: the number of records (0 when empty).

        As Spark's Scala ``count``: an empty batch gives ``0``, not an empty RDD.
        """
        zero: list[RDD[Any]] = []

        def count_rdd(rdd: RDD[Any]) -> RDD[int]:
            if not zero:  # one tiny RDD, reused by every batch
                zero.append(self._sc.parallelize([(None, 0)], 1))
            counts = rdd.mapPartitions(lambda it: [(None, sum(1 for _ in it))])
            return counts.union(zero[0]).reduceByKey(operator.add, 1).values()

        return self._rdd_op(count_rdd)

    def filter(self: DStream[T], f: Callable[[T], bool]) -> DStream[T]:
        """Return a stream of the records for which ``f`` is true."""
        return self.mapPartitions(lambda it: filter(f, it), True)

    def flatMap(self: DStream[T], f: Callable[[T], Iterable[U]],
                preservesPartitioning: bool = False) -> DStream[U]:
        """Apply ``f`` to each record and flatten the results."""
        return self.mapPartitionsWithIndex(
            lambda _, it: chain.from_iterable(map(f, it)), preservesPartitioning)

    def map(self: DStream[T], f: Callable[[T], U],
            preservesPartitioning: bool = False) -> DStream[U]:
        """Apply ``f`` to each record."""
        return self.mapPartitions(lambda it: map(f, it), preservesPartitioning)

    def mapPartitions(self: DStream[T], f: Callable[[Iterable[T]], Iterable[U]],
                      preservesPartitioning: bool = False) -> DStream[U]:
        """Apply ``f`` to each partition of each RDD."""
        return self.mapPartitionsWithIndex(lambda _, it: f(it), preservesPartitioning)

    def mapPartitionsWithIndex(self: DStream[T], f: Callable[[int, Iterable[T]], Iterable[U]],
                               preservesPartitioning: bool = False) -> DStream[U]:
        """Apply ``f(partition_index, iterator)`` to each partition of each RDD."""
        return self._rdd_op(lambda rdd: rdd.mapPartitionsWithIndex(f, preservesPartitioning))

    def reduce(self: DStream[T], func: Callable[[T, T], T]) -> DStream[T]:
        """Return a stream with one element per non-empty batch: the records reduced by func."""
        return (self.map(lambda x: (None, x)).reduceByKey(func, 1)
                .map(lambda kv: kv[1]))

    def reduceByKey(self: DStream[tuple[K, V]], func: Callable[[V, V], V],
                    numPartitions: int | None = None) -> DStream[tuple[K, V]]:
        """Merge the values of each key in each batch with ``func``."""
        return self.combineByKey(lambda x: x, func, func, numPartitions)

    def combineByKey(self: DStream[tuple[K, V]], createCombiner: Callable[[V], U],
                     mergeValue: Callable[[U, V], U], mergeCombiners: Callable[[U, U], U],
                     numPartitions: int | None = None) -> DStream[tuple[K, U]]:
        """Combine the values of each key in each batch, as ``RDD.combineByKey``."""
        n = self._default_partitions(numPartitions)
        return self._rdd_op(
            lambda rdd: rdd.combineByKey(createCombiner, mergeValue, mergeCombiners, n))

    def partitionBy(self: DStream[tuple[K, V]], numPartitions: int,
                    partitionFunc: Callable[[K], int] = portable_hash) -> DStream[tuple[K, V]]:
        """Partition each RDD into ``numPartitions`` by ``partitionFunc`` of the key."""
        return self._rdd_op(lambda rdd: rdd.partitionBy(numPartitions, partitionFunc))

    def mapValues(self: DStream[tuple[K, V]], f: Callable[[V], U]) -> DStream[tuple[K, U]]:
        """Apply ``f`` to each value, keeping keys and partitioning."""
        return self._rdd_op(lambda rdd: rdd.mapValues(f))

    def flatMapValues(self: DStream[tuple[K, V]],
                      f: Callable[[V], Iterable[U]]) -> DStream[tuple[K, U]]:
        """Apply ``f`` to each value and flatten, keeping keys and partitioning."""
        return self._rdd_op(lambda rdd: rdd.flatMapValues(f))

    def glom(self: DStream[T]) -> DStream[list[T]]:
        """Turn each partition into one list record."""
        return self._rdd_op(lambda rdd: rdd.glom())

    def groupByKey(self: DStream[tuple[K, V]], numPartitions: int | None = None
                   ) -> DStream[tuple[K, ResultIterable[V]]]:
        """Group the values of each key in each batch."""
        n = self._default_partitions(numPartitions)
        return self._rdd_op(lambda rdd: rdd.groupByKey(n))

    def countByValue(self: DStream[K]) -> DStream[tuple[K, int]]:
        """Count the occurrences of each distinct record in each batch."""
        return self.map(lambda x: (x, 1)).reduceByKey(operator.add)

    def repartition(self: DStream[T], numPartitions: int) -> DStream[T]:
        """Reshuffle each RDD into exactly ``numPartitions`` partitions."""
        return self._rdd_op(lambda rdd: rdd.repartition(numPartitions))

    # -- persistence and checkpointing -------------------------------------------------

    def cache(self: DStream[T]) -> DStream[T]:
        """Persist each generated RDD at ``MEMORY_ONLY``."""
        return self.persist(StorageLevel.MEMORY_ONLY)

    def persist(self: DStream[T], storageLevel: StorageLevel) -> DStream[T]:
        """Persist each generated RDD at ``storageLevel`` until the remember duration ends.

        Raises
        ------
        StreamingStateError
            After the context started.
        """
        self._check_not_started("change the storage level of a DStream")
        self._storage_level = storageLevel
        self.is_cached = True
        return self

    def checkpoint(self: DStream[T], interval: float) -> DStream[T]:
        """Checkpoint this stream every ``interval`` seconds.

        The RDD of every ``interval`` is persisted and locally checkpointed, which cuts its
        lineage. For a stateful stream (``updateStateByKey``, windows) ``interval`` is also
        how often ``StreamingContext.checkpoint`` saves its state (default: about 10 s).

        Raises
        ------
        ConfigurationError
            When ``interval`` is not a positive multiple of the slide duration.
        """
        self._check_not_started("set the checkpoint interval of a DStream")
        interval_ms = seconds_to_ms(interval, "checkpoint interval")
        if interval_ms % self._slide_ms != 0:
            raise ConfigurationError(
                f"The checkpoint interval for {self._kind()} has been set to {interval_ms} ms "
                f"which is not a multiple of its slide time ({self._slide_ms} ms). "
                f"Please set it to a multiple of {self._slide_ms} ms.")
        self._checkpoint_ms = interval_ms
        self.is_checkpointed = True
        return self

    # -- output operations -------------------------------------------------------------

    def foreachRDD(self: DStream[T], func: Union[Callable[[RDD[T]], None],
                                                  Callable[[datetime, RDD[T]], None]]) -> None:
        """Run ``func(rdd)`` or ``func(time, rdd)`` on the driver for every batch.

        Output operations run in registration order, one batch at a time, also on empty
        batches. ``time`` is the batch time as a local naive ``datetime``.
        """
        if takes_time(func, 1, "foreachRDD function"):
            timed = cast("Callable[[datetime, RDD[T]], None]", func)
        else:
            untimed = cast("Callable[[RDD[T]], None]", func)
            timed = lambda _, rdd: untimed(rdd)  # noqa: E731
        self._output("foreachRDD", lambda t, rdd: timed(ms_to_datetime(t), rdd))

    def pprint(self, num: int = 10) -> None:
        """Print the first ``num`` records of every batch, in PySpark's format."""

        def take_and_print(time_ms: int, rdd: RDD[Any]) -> None:
            taken = rdd.take(num + 1)
            print("-------------------------------------------")
            print("Time: %s" % ms_to_datetime(time_ms))
            print("-------------------------------------------")
            for record in taken[:num]:
                print(record)
            if len(taken) > num:
                print("...")
            print("")

        self._output("pprint", take_and_print)

    def saveAsTextFiles(self, prefix: str, suffix: str | None = None) -> None:
        """Save each batch as a text file directory ``prefix-<time ms>[.suffix]``.

        A directory that already exists (a batch re-run after recovery) is left as it is.
        """

        def save(time_ms: int, rdd: RDD[Any]) -> None:
            path = f"{prefix}-{time_ms}" if suffix is None else f"{prefix}-{time_ms}.{suffix}"
            try:
                rdd.saveAsTextFile(path)
            except Exception as error:
                if "FileAlreadyExistsException" not in str(error):
                    raise

        self._output("saveAsTextFiles", save)

    def _output(self, name: str, func: Callable[[int, RDD[Any]], None]) -> None:
        ForEachDStream(self, func, name, _call_site(name))

    # -- transformations with functions of RDDs ----------------------------------------

    def transform(self: DStream[T], func: Union[Callable[[RDD[T]], RDD[U]],
                                                 Callable[[datetime, RDD[T]], RDD[U]]]
                  ) -> DStream[U]:
        """Return a stream whose RDD is ``func(rdd)`` or ``func(time, rdd)`` per batch.

        ``func`` runs on the scheduler thread when the batch is generated; it may return
        ``None`` for "no RDD this batch".
        """
        if takes_time(func, 1, "transform function"):
            timed = cast("Callable[[datetime, RDD[Any]], Optional[RDD[U]]]", func)
            return self._new(lambda t, rdds: timed(ms_to_datetime(t), rdds[0]))
        untimed = cast("Callable[[RDD[Any]], Optional[RDD[U]]]", func)
        return self._new(lambda t, rdds: untimed(rdds[0]))

    def transformWith(self: DStream[T], func: Union[Callable[[RDD[T], RDD[U]], RDD[V]],
                                                     Callable[[datetime, RDD[T], RDD[U]],
                                                              RDD[V]]],
                      other: DStream[U], keepSerializer: bool = False) -> DStream[V]:
        """Combine this stream with ``other`` by ``func(a, b)`` or ``func(time, a, b)``.

        A side without an RDD at a batch time is passed as an empty RDD.
        ``keepSerializer`` exists for PySpark compatibility and has no effect.
        """
        self._check_same_slide(other, "the two DStream should have same slide duration")
        if takes_time(func, 2, "transformWith function"):
            timed = cast("Callable[..., RDD[V]]", func)
            return self._new(lambda t, rdds: timed(ms_to_datetime(t), *rdds), [self, other])
        untimed = cast("Callable[..., RDD[V]]", func)
        return self._new(lambda t, rdds: untimed(*rdds), [self, other])

    def union(self: DStream[T], other: DStream[U]) -> DStream[Union[T, U]]:
        """Return the union of this stream and ``other`` per batch."""
        self._check_same_slide(other, "the two DStream should have same slide duration")
        return self._new(lambda t, rdds: rdds[0].union(rdds[1]), [self, other])

    def cogroup(self: DStream[tuple[K, V]], other: DStream[tuple[K, U]],
                numPartitions: int | None = None
                ) -> DStream[tuple[K, tuple[ResultIterable[V], ResultIterable[U]]]]:
        """Cogroup this stream with ``other`` per batch."""
        n = self._default_partitions(numPartitions)
        return self.transformWith(lambda a, b: a.cogroup(b, n), other)

    def join(self: DStream[tuple[K, V]], other: DStream[tuple[K, U]],
             numPartitions: int | None = None) -> DStream[tuple[K, tuple[V, U]]]:
        """Inner join of this stream with ``other`` per batch."""
        n = self._default_partitions(numPartitions)
        return self.transformWith(lambda a, b: a.join(b, n), other)

    def leftOuterJoin(self: DStream[tuple[K, V]], other: DStream[tuple[K, U]],
                      numPartitions: int | None = None
                      ) -> DStream[tuple[K, tuple[V, Optional[U]]]]:
        """Left outer join of this stream with ``other`` per batch."""
        n = self._default_partitions(numPartitions)
        return self.transformWith(lambda a, b: a.leftOuterJoin(b, n), other)

    def rightOuterJoin(self: DStream[tuple[K, V]], other: DStream[tuple[K, U]],
                       numPartitions: int | None = None
                       ) -> DStream[tuple[K, tuple[Optional[V], U]]]:
        """Right outer join of this stream with ``other`` per batch."""
        n = self._default_partitions(numPartitions)
        return self.transformWith(lambda a, b: a.rightOuterJoin(b, n), other)

    def fullOuterJoin(self: DStream[tuple[K, V]], other: DStream[tuple[K, U]],
                      numPartitions: int | None = None
                      ) -> DStream[tuple[K, tuple[Optional[V], Optional[U]]]]:
        """Full outer join of this stream with ``other`` per batch."""
        n = self._default_partitions(numPartitions)
        return self.transformWith(lambda a, b: a.fullOuterJoin(b, n), other)

    def _check_same_slide(self, other: DStream[Any], message: str) -> None:
        if self._slide_ms != other._slide_ms:
            raise ConfigurationError(message)

    # -- time slices, windows and state (implemented in windowed.py / state.py) --------

    def slice(self, begin: datetime | float, end: datetime | float) -> list[RDD[T_co]]:
        """Return the RDDs this stream generated between ``begin`` and ``end`` (inclusive).

        ``begin``/``end`` are local naive datetimes or epoch seconds. Only RDDs still
        remembered are returned (see ``StreamingContext.remember``); nothing is computed.

        Raises
        ------
        StreamingStateError
            Before the context started.
        """
        graph = self._ssc.graph
        if graph.start_time is None:
            raise StreamingStateError("This DStream has not been initialized")
        times = slice_times(datetime_to_ms(begin), datetime_to_ms(end), graph.zero_time,
                            self._slide_ms)
        with graph.lock:
            rdds = [self._generated.get(t) for t in times]
        return [rdd for rdd in rdds if rdd is not None]

    def window(self: DStream[T], windowDuration: float,
               slideDuration: float | None = None) -> DStream[T]:
        """Return a stream whose RDD at time t is the union of this stream's RDDs in
        ``(t - windowDuration, t]``, produced every ``slideDuration`` seconds.

        Raises
        ------
        ConfigurationError
            When a duration is not a multiple of this stream's slide duration.
        """
        from dstream_kafka.streaming.windowed import WindowedDStream

        window_ms, slide_ms = self._window_params(windowDuration, slideDuration)
        return WindowedDStream(self, window_ms, slide_ms)

    def reduceByWindow(self: DStream[T], reduceFunc: Callable[[T, T], T],
                       invReduceFunc: Callable[[T, T], T] | None, windowDuration: float,
                       slideDuration: float | None = None) -> DStream[T]:
        """Reduce all records of each window to one (see ``reduceByKeyAndWindow``)."""
        keyed = self.map(lambda x: (1, x))
        reduced = keyed.reduceByKeyAndWindow(reduceFunc, invReduceFunc,
                                             windowDuration, slideDuration, 1)
        return reduced.map(lambda kv: kv[1])

    def countByWindow(self: DStream[T], windowDuration: float,
                      slideDuration: float | None = None) -> DStream[int]:
        """Count the records of each window (incrementally, with an inverse function)."""
        return self.map(lambda x: 1).reduceByWindow(operator.add, operator.sub,
                                                    windowDuration, slideDuration)

    def countByValueAndWindow(self: DStream[T], windowDuration: float,
                              slideDuration: float | None = None,
                              numPartitions: int | None = None) -> DStream[tuple[T, int]]:
        """Count each distinct record over each window; values that left it are dropped."""
        keyed = self.map(lambda x: (x, 1))
        counted = keyed.reduceByKeyAndWindow(operator.add, operator.sub,
                                             windowDuration, slideDuration, numPartitions)
        return counted.filter(lambda kv: kv[1] > 0)

    def groupByKeyAndWindow(self: DStream[tuple[K, V]], windowDuration: float,
                            slideDuration: float | None = None,
                            numPartitions: int | None = None
                            ) -> DStream[tuple[K, ResultIterable[V]]]:
        """Group the values of each key over each window (Spark: ``window().groupByKey()``)."""
        return self.window(windowDuration, slideDuration).groupByKey(numPartitions)

    def reduceByKeyAndWindow(self: DStream[tuple[K, V]], func: Callable[[V, V], V],
                             invFunc: Callable[[V, V], V] | None, windowDuration: float,
                             slideDuration: float | None = None,
                             numPartitions: int | None = None,
                             filterFunc: Callable[[tuple[K, V]], bool] | None = None
                             ) -> DStream[tuple[K, V]]:
        """Reduce the values of each key over each window.

        Without ``invFunc`` every window is reduced from its batches. With ``invFunc`` the
        window is computed incrementally from the previous window: values of batches that
        left the window are removed with ``invFunc`` and those of new batches added with
        ``func``. ``func`` must be associative and commutative and ``invFunc`` its inverse.
        Keys stay in the window with their reduced value (e.g. 0) unless ``filterFunc``
        drops them. The incremental form needs ``StreamingContext.checkpoint`` (as Spark).
        """
        from dstream_kafka.streaming.windowed import ReducedWindowedDStream

        window_ms, slide_ms = self._window_params(windowDuration, slideDuration)
        n = self._default_partitions(numPartitions)
        reduced = self.reduceByKey(func, n)
        if invFunc is None:
            windowed = reduced.window(window_ms / 1000.0, slide_ms / 1000.0)
            result = windowed.reduceByKey(func, n)
            return result.filter(filterFunc) if filterFunc is not None else result
        return ReducedWindowedDStream(reduced, func, invFunc, window_ms, slide_ms, n,
                                      filterFunc)

    def updateStateByKey(self: DStream[tuple[K, V]],
                         updateFunc: Callable[[list[V], Optional[S]], Optional[S]],
                         numPartitions: int | None = None,
                         initialRDD: RDD[tuple[K, S]] | Iterable[tuple[K, S]] | None = None
                         ) -> DStream[tuple[K, S]]:
        """Keep a state per key across batches: ``updateFunc(new_values, last_state)``.

        Every batch calls ``updateFunc`` for every key that has a state or new values;
        ``new_values`` is a list (empty when the key got none) and ``last_state`` is
        ``None`` for a new key. Returning ``None`` removes the key. Needs
        ``StreamingContext.checkpoint`` (as Spark).
        """
        from dstream_kafka.streaming.state import StateDStream

        if initialRDD is not None and not isinstance(initialRDD, RDD):
            initialRDD = self._sc.parallelize(list(initialRDD))
        return StateDStream(self, updateFunc, self._default_partitions(numPartitions),
                            initialRDD)

    def _window_params(self, window: float, slide: float | None) -> tuple[int, int]:
        window_ms = seconds_to_ms(window, "windowDuration")
        slide_ms = self._slide_ms if slide is None else seconds_to_ms(slide, "slideDuration")
        if window_ms % self._slide_ms != 0:
            raise ConfigurationError(
                "windowDuration must be multiple of the parent dstream's slide (batch) "
                f"duration ({self._slide_ms} ms)")
        if slide_ms % self._slide_ms != 0:
            raise ConfigurationError(
                "slideDuration must be multiple of the parent dstream's slide (batch) "
                f"duration ({self._slide_ms} ms)")
        return window_ms, slide_ms


class TransformedDStream(DStream[U]):
    """A stream whose RDD is ``func(time_ms, parent_rdds)`` per batch.

    With one parent, a missing parent RDD gives no RDD. With several, a missing parent
    RDD is replaced by an empty RDD (PySpark's ``transformWith``).
    """

    def __init__(self, ssc: StreamingContext, parents: Sequence[DStream[Any]],
                 func: RDDFunc) -> None:
        if len({p._slide_ms for p in parents}) > 1:
            raise ConfigurationError("All DStreams should have same slide duration")
        super().__init__(ssc, parents)
        self._func = func

    def compute(self, time_ms: int) -> RDD[Any] | None:
        rdds = [parent._get_or_compute(time_ms) for parent in self._parents]
        if len(rdds) == 1:
            if rdds[0] is None:
                return None
        elif any(rdd is None for rdd in rdds):
            rdds = [self._sc.emptyRDD() if rdd is None else rdd for rdd in rdds]
        result = self._func(time_ms, rdds)
        if result is not None and not isinstance(result, RDD):
            raise TypeError(f"transform function should return an RDD or None, "
                            f"got {type(result).__name__}")
        return result


class ForEachDStream(DStream[Any]):
    """An output operation: runs ``func(time_ms, rdd)`` for each RDD of its parent."""

    def __init__(self, parent: DStream[Any], func: Callable[[int, RDD[Any]], None],
                 name: str, description: str) -> None:
        super().__init__(parent._ssc, [parent])
        self._func = func
        self.name = name
        self.description = description
        #: Index among the context's output operations (the output operation id).
        self.output_id: int = self._ssc.graph.add_output(self)

    def compute(self, time_ms: int) -> RDD[Any] | None:
        return None

    def generate_job(self, time_ms: int) -> OutputJob | None:
        """Return the job for ``time_ms``, or ``None`` when the parent has no RDD then."""
        if not is_valid_time(time_ms, self._ssc.graph.zero_time, self._slide_ms):
            return None
        rdd = self._parents[0]._get_or_compute(time_ms)
        if rdd is None:
            return None
        return OutputJob(self.output_id, self.name, self.description,
                         partial(self._func, time_ms, rdd))

