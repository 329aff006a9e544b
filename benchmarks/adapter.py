"""The only module that touches dstream_kafka's API: a thin adapter for the dstream_kafka contenders.

Keeping every name of the library here means an API rename breaks one file, not the harness.
Functions run in the contender's child process (see :mod:`benchmarks.runner`).

Per-task work returns ``(records, checksum, pid, cache_stats)`` so the driver learns, with no
extra job, how many consumers each Python worker created and how often it seeked: the consumer
cache counters (:func:`dstream_kafka.consumer_cache.stats`) live in each worker process.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any, Callable, Iterable, Iterator

__all__ = ["drain_rdd", "stream_drain", "partition_worker", "kafka_params", "create_direct_stream",
           "CacheTracker"]


def kafka_params(bootstrap: str, group: str) -> dict[str, Any]:
    """Kafka parameters of every dstream_kafka contender (byte values, no auto commit)."""
    return {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}


def partition_worker(kind: str) -> Callable[[Iterable[Any]], Iterator[tuple]]:
    """Return the per-partition function for workload ``kind`` (``drain`` or ``json``).

    ``drain`` counts records and value bytes; ``json`` runs ``json.loads`` on each value and adds
    up fields ``a`` and ``b``. Both yield one ``(records, checksum, pid, cache_stats)`` tuple.
    """
    def drain(records: Iterable[Any]) -> Iterator[tuple]:
        n = total = 0
        for rec in records:
            n += 1
            total += len(rec.value)
        yield n, total, os.getpid(), _cache_stats()

    def json_sum(records: Iterable[Any]) -> Iterator[tuple]:
        n = total = 0
        loads = json.loads
        for rec in records:
            doc = loads(rec.value)
            n += 1
            total += doc["a"] + doc["b"]
        yield n, total, os.getpid(), _cache_stats()

    return json_sum if kind == "json" else drain


def _cache_stats() -> dict[str, Any]:
    try:
        from dstream_kafka.consumer_cache import stats

        return stats()
    except Exception:  # an older or newer cache without stats(): report nothing, not fail
        return {}


class CacheTracker:
    """Turn per-worker cumulative cache counters into per-batch deltas."""

    KEYS = ("creations", "seeks", "misses", "hits", "polls")

    def __init__(self) -> None:
        self._last: dict[int, dict[str, int]] = {}
        self.per_batch: list[dict[str, int]] = []

    def add_batch(self, parts: list[tuple]) -> dict[str, int]:
        latest: dict[int, dict[str, int]] = {}
        for _, _, pid, st in parts:
            prev = latest.get(pid)
            # Later snapshots of the same worker have larger counters; keep the largest.
            if prev is None or st.get("polls", 0) >= prev.get("polls", 0):
                latest[pid] = st
        delta = dict.fromkeys(self.KEYS, 0)
        for pid, st in latest.items():
            before = self._last.get(pid, {})
            for key in self.KEYS:
                delta[key] += int(st.get(key, 0)) - int(before.get(key, 0))
            self._last[pid] = st
        self.per_batch.append(delta)
        return delta

    def summary(self) -> dict[str, Any]:
        """First batch, and the steady state after it (totals and per-batch maxima)."""
        first = self.per_batch[0] if self.per_batch else {}
        rest = self.per_batch[1:]
        return {
            "workers_seen": len(self._last),
            "first_batch": first,
            "after_first_total": {k: sum(b[k] for b in rest) for k in self.KEYS},
            "after_first_max_per_batch": {k: max((b[k] for b in rest), default=0) for k in self.KEYS},
            "batches": len(self.per_batch),
        }


def drain_rdd(sc: Any, bootstrap: str, topic: str, ends: dict[int, int], kind: str) -> dict[str, Any]:
    """Read ``[0, end)`` of every partition with ``KafkaUtils.createRDD`` and apply ``kind``."""
    from dstream_kafka.kafka_utils import KafkaUtils
    from dstream_kafka.offsets import OffsetRange

    ranges = [OffsetRange.create(topic, p, 0, e) for p, e in sorted(ends.items())]
    rdd = KafkaUtils.createRDD(sc, kafka_params(bootstrap, "bench-dk-rdd"), ranges)
    # KafkaRDD.count() sums the offset ranges without reading (as Spark's does): walk the records.
    parts = rdd.mapPartitions(partition_worker(kind)).collect()
    tracker = CacheTracker()
    tracker.add_batch(parts)
    return {"records": sum(p[0] for p in parts), "checksum": sum(p[1] for p in parts),
            "cache": tracker.summary()}


def create_direct_stream(ssc: Any, bootstrap: str, topic: str, ends: dict[int, int],
                         group: str) -> Any:
    """Create a direct stream over every partition of ``topic``, starting at offset 0."""
    from dstream_kafka.consumer_strategy import ConsumerStrategies
    from dstream_kafka.offsets import TopicPartition
    from dstream_kafka.placement import LocationStrategies

    tps = [TopicPartition(topic, p) for p in sorted(ends)]
    strategy = ConsumerStrategies.Assign(tps, kafka_params(bootstrap, group), {tp: 0 for tp in tps})
    try:
        from dstream_kafka.kafka_utils import KafkaUtils

        create = KafkaUtils.createDirectStream
    except AttributeError:  # streaming work not wired into KafkaUtils yet
        from dstream_kafka.direct_stream import DirectKafkaInputDStream

        return DirectKafkaInputDStream(ssc, LocationStrategies.PreferConsistent, strategy)
    return create(ssc, LocationStrategies.PreferConsistent, strategy)


def stream_drain(sc: Any, bootstrap: str, topic: str, ends: dict[int, int], kind: str,
                 batch_seconds: float, timeout: float = 1800.0) -> dict[str, Any]:
    """Stream every record present now through ``foreachRDD`` and time it.

    The batch size is bounded by ``spark.streaming.kafka.maxRatePerPartition`` in the
    SparkConf (set by the caller). The clock starts at ``ssc.start()`` and stops when the
    batch that brings the count to the expected total has finished its output.
    """
    from dstream_kafka.streaming.context import StreamingContext

    expected = sum(ends.values())
    ssc = StreamingContext(sc, batch_seconds)
    stream = create_direct_stream(ssc, bootstrap, topic, ends, "bench-dk-stream")
    tracker = CacheTracker()
    state = {"records": 0, "checksum": 0, "nonempty": 0, "done_at": None}
    done = threading.Event()
    worker = partition_worker(kind)

    def per_batch(rdd: Any) -> None:
        if done.is_set() or rdd.isEmpty():
            return
        parts = rdd.mapPartitions(worker).collect()
        tracker.add_batch(parts)
        state["records"] += sum(p[0] for p in parts)
        state["checksum"] += sum(p[1] for p in parts)
        state["nonempty"] += 1
        if state["records"] >= expected:
            state["done_at"] = time.perf_counter()
            done.set()

    stream.foreachRDD(per_batch)
    t0 = time.perf_counter()
    ssc.start()
    finished = done.wait(timeout)
    seconds = (state["done_at"] or time.perf_counter()) - t0
    batch_infos = [_batch_info(b) for b in list(getattr(ssc, "completed_batches", []))]
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
    if not finished:
        raise TimeoutError(f"stream drain read {state['records']} of {expected} records in {timeout}s")
    return {"records": state["records"], "checksum": state["checksum"], "seconds": seconds,
            "batches": state["nonempty"], "cache": tracker.summary(), "batch_infos": batch_infos}


def _batch_info(info: Any) -> dict[str, Any]:
    try:
        return {"batch_time": info.batch_time, "records": info.num_records,
                "scheduling_delay_ms": info.scheduling_delay,
                "processing_delay_ms": info.processing_delay, "total_delay_ms": info.total_delay}
    except AttributeError:
        return {}
