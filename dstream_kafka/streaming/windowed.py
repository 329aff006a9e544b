"""Window streams: plain windows and incremental reduce-by-key windows.

A window at time ``t`` covers the parent's RDDs at times in ``(t - window, t]``. Windows
are produced every ``slide``; both durations are multiples of the parent's slide.

Windowed streams keep their parent's RDDs cached for the window duration, and a
checkpoint saves the parent RDDs still inside the window, so a restarted application keeps
its windows (see :mod:`.checkpoint_state`).
"""

from __future__ import annotations

from functools import reduce
from typing import Any, Callable

from pyspark import RDD, StorageLevel

from dstream_kafka.streaming.dstream import DStream
from dstream_kafka.streaming.clock import slice_times

__all__ = ["WindowedDStream", "ReducedWindowedDStream"]

# Slots of the per-key accumulator of the incremental window: previous window value,
# reduced values of batches leaving the window, reduced values of batches entering it.
_PREV, _OLD, _NEW = 0, 1, 2


def _cache_parent(parent: DStream[Any]) -> None:
    # Each parent RDD is read by window / slide windows: keep it cached (Spark persists
    # the parent of a windowed stream too).
    if parent._storage_level is None:
        parent._storage_level = StorageLevel.MEMORY_ONLY


def _parent_times_in_window(stream: DStream[Any], parent: DStream[Any], end_ms: int,
                            window_ms: int) -> list[tuple[DStream[Any], int]]:
    """The parent's generated times in ``(end_ms - window_ms, end_ms]``, computing missing ones."""
    graph = stream._ssc.graph
    pairs = []
    for t in slice_times(end_ms - window_ms + parent._slide_ms, end_ms, graph.zero_time,
                         parent._slide_ms):
        if parent._get_or_compute(t) is not None:
            pairs.append((parent, t))
    return pairs


class WindowedDStream(DStream[Any]):
    """The union of the parent's RDDs over each window."""

    _keeps_state = True

    def __init__(self, parent: DStream[Any], window_ms: int, slide_ms: int) -> None:
        super().__init__(parent._ssc, [parent], slide_ms)
        self._window_ms = window_ms
        _cache_parent(parent)

    def compute(self, time_ms: int) -> RDD[Any] | None:
        parent = self._parents[0]
        rdds = parent._slice(time_ms - self._window_ms + parent._slide_ms, time_ms)
        if not rdds:
            return self._sc.emptyRDD()
        return self._sc.union(rdds)

    def _parent_remember_ms(self) -> int:
        return self._remember_ms + self._window_ms

    def _durable_rdds(self, time_ms: int) -> list[tuple[DStream[Any], int]]:
        return _parent_times_in_window(self, self._parents[0], time_ms, self._window_ms)


def _window_combiners(func: Callable[[Any, Any], Any], inv_func: Callable[[Any, Any], Any]
                      ) -> tuple[Callable[..., Any], ...]:
    """combineByKey functions over ``(slot, value)`` records, and the final merge."""

    def create(tagged: tuple[int, Any]) -> list[Any]:
        acc: list[Any] = [False, None, False, None, False, None]
        slot, value = tagged
        acc[2 * slot], acc[2 * slot + 1] = True, value
        return acc

    def merge_value(acc: list[Any], tagged: tuple[int, Any]) -> list[Any]:
        slot, value = tagged
        i = 2 * slot
        acc[i + 1] = func(acc[i + 1], value) if acc[i] else value
        acc[i] = True
        return acc

    def merge_combiners(a: list[Any], b: list[Any]) -> list[Any]:
        for i in (0, 2, 4):
            if b[i]:
                a[i + 1] = func(a[i + 1], b[i + 1]) if a[i] else b[i + 1]
                a[i] = True
        return a

    def finish(acc: list[Any]) -> tuple[Any, ...]:
        has_prev, prev, has_old, old, has_new, new = acc
        if not has_prev:
            # A key absent from the previous window: only its new values count (old
            # values without a previous value cannot occur in a consistent window).
            return (new,) if has_new else ()
        value = prev
        if has_old:
            value = inv_func(value, old)
        if has_new:
            value = func(value, new)
        return (value,)

    return create, merge_value, merge_combiners, finish


class ReducedWindowedDStream(DStream[Any]):
    """``reduceByKeyAndWindow`` with an inverse function, computed incrementally.

    The window at ``t`` is derived from the window at ``t - slide``: one ``combineByKey``
    over the previous window, the per-batch reduced RDDs that left the window and those
    that entered it. All inputs share the hash partitioner of ``numPartitions``, so the
    combine needs no shuffle. Each window RDD is cached and locally checkpointed so the
    lineage does not grow. Without a previous window (first windows, after a restart
    with a gap) the window is reduced from its batches.
    """

    _detach_python_lineage = True
    _truncate_every_slide = True
    _keeps_state = True
    requires_checkpoint_dir = True

    def __init__(self, reduced: DStream[Any], func: Callable[[Any, Any], Any],
                 inv_func: Callable[[Any, Any], Any], window_ms: int, slide_ms: int,
                 num_partitions: int,
                 filter_func: Callable[[tuple[Any, Any]], bool] | None) -> None:
        super().__init__(reduced._ssc, [reduced], slide_ms)
        self._func = func
        self._window_ms = window_ms
        self._num_partitions = num_partitions
        self._filter_func = filter_func
        self._combiners = _window_combiners(func, inv_func)
        self._storage_level = StorageLevel.MEMORY_AND_DISK
        _cache_parent(reduced)

    def compute(self, time_ms: int) -> RDD[Any] | None:
        parent, window, slide = self._parents[0], self._window_ms, self._slide_ms
        step = parent._slide_ms
        previous = self._previous_window(time_ms)
        if previous is not None:
            old = parent._slice(time_ms - slide - window + step, time_ms - window)
            new = parent._slice(time_ms - slide + step, time_ms)
            merged = self._merge(previous, old, new)
        else:
            current = parent._slice(time_ms - window + step, time_ms)
            if not current:
                return self._sc.emptyRDD()
            merged = reduce(lambda a, b: a.union(b), current).reduceByKey(
                self._func, self._num_partitions)
        if self._filter_func is not None:
            merged = merged.filter(self._filter_func)
        return merged

    def _previous_window(self, time_ms: int) -> RDD[Any] | None:
        previous_time = time_ms - self._slide_ms
        start = self._ssc.graph.start_time
        if start is not None and previous_time >= start:
            return self._get_or_compute(previous_time)
        return self._generated.get(previous_time)  # restored from a checkpoint, if any

    def _merge(self, previous: RDD[Any], old: list[RDD[Any]], new: list[RDD[Any]]
               ) -> RDD[Any]:
        create, merge_value, merge_combiners, finish = self._combiners
        tagged = [previous.mapValues(lambda v: (_PREV, v))]
        tagged += [rdd.mapValues(lambda v: (_OLD, v)) for rdd in old]
        tagged += [rdd.mapValues(lambda v: (_NEW, v)) for rdd in new]
        # Pairwise RDD.union keeps a common partitioner, which lets combineByKey skip
        # the shuffle (SparkContext.union would drop it).
        union = reduce(lambda a, b: a.union(b), tagged)
        combined = union.combineByKey(create, merge_value, merge_combiners,
                                      self._num_partitions)
        return combined.flatMapValues(finish)

    def _parent_remember_ms(self) -> int:
        return self._remember_ms + self._window_ms

    def _durable_rdds(self, time_ms: int) -> list[tuple[DStream[Any], int]]:
        own = [t for t, rdd in self._generated.items() if t <= time_ms and rdd is not None]
        if not own:
            return []
        latest = max(own)
        # The next window needs this window plus the parent batches that will leave it;
        # a window computed from scratch needs the parent batches up to time_ms.
        pairs: list[tuple[DStream[Any], int]] = [(self, latest)]
        pairs += _parent_times_in_window(self, self._parents[0], time_ms,
                                         self._window_ms + time_ms - latest)
        return pairs
