"""``updateStateByKey``: a per-key state carried from batch to batch."""

from __future__ import annotations

from typing import Any, Callable

from pyspark import RDD, StorageLevel

from dstream_kafka.streaming.dstream import DStream

__all__ = ["StateDStream"]


class StateDStream(DStream[Any]):
    """The state RDD after each batch, with PySpark's ``updateStateByKey`` semantics.

    The state at ``t`` is the state at ``t - slide`` (or the initial RDD) cogrouped with
    the parent's batch, hash-partitioned into ``num_partitions``; ``update_func(values,
    state)`` runs for every key with a state or new values, and ``None`` drops the key.
    A batch time with no parent RDD keeps the previous state.

    Each state RDD is cached and locally checkpointed, and the Python-side RDD object is
    cut from its parents, so neither the JVM lineage nor the driver's Python objects grow
    with the number of batches. The state keeps its partitioner, so each batch shuffles
    only the new records.
    """

    _detach_python_lineage = True
    _truncate_every_slide = True
    _keeps_state = True
    requires_checkpoint_dir = True

    def __init__(self, parent: DStream[Any],
                 update_func: Callable[[list[Any], Any], Any], num_partitions: int,
                 initial_rdd: RDD[Any] | None) -> None:
        super().__init__(parent._ssc, [parent])
        self._update_func = update_func
        self._num_partitions = num_partitions
        self._initial_rdd = initial_rdd
        self._storage_level = StorageLevel.MEMORY_AND_DISK

    def compute(self, time_ms: int) -> RDD[Any] | None:
        previous = self._previous_state(time_ms)
        batch = self._parents[0]._get_or_compute(time_ms)
        if batch is None:
            return previous
        n, update = self._num_partitions, self._update_func
        if previous is None:
            grouped = batch.groupByKey(n).mapValues(lambda values: (list(values), None))
        else:
            # Partitioning the batch like the state lets the cogroup reuse the state's
            # partitions instead of shuffling the whole state again.
            grouped = previous.cogroup(batch.partitionBy(n), n).mapValues(
                lambda sv: (list(sv[1]), next(iter(sv[0]), None)))
        state = grouped.mapValues(lambda vs: update(vs[0], vs[1]))
        return state.filter(lambda kv: kv[1] is not None)

    def _previous_state(self, time_ms: int) -> RDD[Any] | None:
        previous_time = time_ms - self._slide_ms
        start = self._ssc.graph.start_time
        if start is not None and previous_time >= start:
            return self._get_or_compute(previous_time)
        # Before this run's first batch: the newest state restored from a checkpoint
        # (there may be a gap while the application was down), else the initial RDD.
        restored = [t for t, rdd in self._generated.items() if t < time_ms and rdd is not None]
        if restored:
            return self._generated[max(restored)]
        return self._initial_rdd

    def _durable_rdds(self, time_ms: int) -> list[tuple[DStream[Any], int]]:
        own = [t for t, rdd in self._generated.items() if t <= time_ms and rdd is not None]
        return [(self, max(own))] if own else []
