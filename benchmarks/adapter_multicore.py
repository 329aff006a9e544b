"""Workload 8, ``multicore``: a streaming drain on one standalone executor of K cores.

PySpark runs an executor's tasks in up to K reused Python worker processes and hands each task
to whichever worker has been idle longest, so a partition's cached consumer (one per worker
process, :mod:`dstream_kafka.read.consumer_cache`) is found by the next batch's task only when that
task lands on the same worker; elsewhere it seeks, or creates a consumer there first. This
workload measures what that costs: every task reports its partition, worker, records, read time
and the seeks and creations it caused; every worker reports its cached consumers, TCP
connections and memory. :func:`multicore_summary` turns the task rows into the figures of the
report (pure, unit-tested).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any, Iterable, Iterator, Sequence

__all__ = ["timed_drain", "stream_multicore", "multicore_summary", "task_row"]


def timed_drain(records: Iterable[Any]) -> Iterator[tuple]:
    """Count records and value bytes of one partition, timing the read.

    Yields ``(records, value_bytes, pid, cache_stats, partition, read_seconds, seeks,
    creations, prepositions)``: the first four as :func:`benchmarks.adapter.partition_worker`'s,
    then the Spark partition, and the seeks, consumer creations and pre-positioned consumers
    (:func:`dstream_kafka.read.consumer_cache.pre_position`, at the end of the task's records, so
    inside the read time) of this worker during this task.
    """
    from pyspark import TaskContext

    from benchmarks.adapter import _cache_stats

    before = _cache_stats()
    t0 = time.perf_counter()
    n = total = 0
    for rec in records:
        n += 1
        total += len(rec.value)
    read_s = time.perf_counter() - t0
    after = _cache_stats()
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else -1
    yield (n, total, os.getpid(), after, partition, read_s,
           int(after.get("seeks", 0)) - int(before.get("seeks", 0)),
           int(after.get("creations", 0)) - int(before.get("creations", 0)),
           int(after.get("prepositions", 0)) - int(before.get("prepositions", 0)))


def task_row(batch: int, part: tuple) -> dict[str, Any]:
    """One :func:`timed_drain` tuple as a row of the result."""
    return {"batch": batch, "partition": part[4], "pid": part[2], "records": part[0],
            "read_ms": part[5] * 1000.0, "seeks": part[6], "creations": part[7],
            "prepositions": part[8] if len(part) > 8 else 0}


def stream_multicore(sc: Any, bootstrap: str, topic: str, ends: dict[int, int],
                     batch_seconds: float, timeout: float = 1800.0) -> dict[str, Any]:
    """Drain the topic with a direct stream, keeping one row per task (:func:`task_row`)."""
    from benchmarks.adapter import stream_drain

    rows: list[dict[str, Any]] = []

    def keep(batch: int, parts: list[tuple]) -> None:
        rows.extend(task_row(batch, p) for p in parts)

    out = stream_drain(sc, bootstrap, topic, ends, "drain", batch_seconds, timeout,
                       worker=timed_drain, on_parts=keep)
    out["multicore"] = multicore_summary(rows, len(ends), out["cache"].get("resources", {}))
    out["tasks"] = rows
    return out


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def multicore_summary(rows: Sequence[dict[str, Any]], partitions: int,
                      resources: dict[str, Any], warm_batches: int = 1) -> dict[str, Any]:
    """The multicore figures of one run.

    Parameters
    ----------
    rows : sequence of dict
        :func:`task_row` rows of every non-empty batch.
    partitions : int
        Kafka partitions read (one Spark partition each).
    resources : dict
        :meth:`benchmarks.adapter.CacheTracker.resources` at the end of the run (one executor).
    warm_batches : int
        Leading batches left out of the steady figures: the first batch creates every consumer.

    Returns
    -------
    dict
        ``steady_batches``; ``seeks_per_batch`` (reads of an existing consumer that had to
        seek; a new consumer's first positioning belongs to its creation),
        ``prepositions_per_batch`` (idle consumers moved ahead after tasks) and
        ``creations_after_warm`` over the steady batches; ``consumers_per_partition`` (consumers cached in the executor's workers per
        partition, 1.0 is Spark's JVM executor); ``tcp_connections`` and ``workers`` of the
        executor; ``read_ms_per_10k_seek`` / ``read_ms_per_10k_no_seek`` /
        ``read_ms_per_10k_creation``: median read time per 10,000 records of steady tasks that
        seeked, that neither seeked nor created a consumer, and that created one;
        ``seek_overhead_share``:
        the steady tasks' extra read time when they seeked, as a share of all steady read time
        (each seeking task's read time minus its records at the no-seek median rate; None
        without tasks of both kinds).
    """
    steady = [r for r in rows if r["batch"] >= warm_batches and r["records"] > 0]
    batches = sorted({r["batch"] for r in steady})
    # A new consumer's first positioning is part of its creation, counted apart.
    seeks = sum(r["seeks"] for r in steady if not r["creations"])

    def per_10k(group: list[dict[str, Any]]) -> float | None:
        return _median([r["read_ms"] / r["records"] * 1e4 for r in group])

    seeking = [r for r in steady if r["seeks"] > 0 and r["creations"] == 0]
    plain = [r for r in steady if r["seeks"] == 0 and r["creations"] == 0]
    creating = [r for r in steady if r["creations"] > 0]
    seek_rate, plain_rate = per_10k(seeking), per_10k(plain)
    share = None
    total_read = sum(r["read_ms"] for r in steady)
    if seeking and plain_rate is not None and total_read > 0:
        extra = sum(r["read_ms"] - r["records"] / 1e4 * plain_rate for r in seeking)
        share = extra / total_read
    cached = resources.get("consumers_cached")
    return {
        "steady_batches": len(batches),
        "seeks_per_batch": seeks / len(batches) if batches else None,
        "prepositions_per_batch": (sum(r.get("prepositions", 0) for r in steady) / len(batches)
                                   if batches else None),
        "seeking_tasks_share": len(seeking) / len(steady) if steady else None,
        "creations_after_warm": sum(r["creations"] for r in steady),
        "creations_total": sum(r["creations"] for r in rows),
        "consumers_per_partition": cached / partitions if cached is not None and partitions else None,
        "tcp_connections": resources.get("tcp_connections"),
        "workers": resources.get("workers"),
        "workers_rss_mb": resources.get("workers_rss_mb"),
        "read_ms_per_10k_seek": seek_rate,
        "read_ms_per_10k_creation": per_10k(creating),
        "read_ms_per_10k_no_seek": plain_rate,
        "seek_overhead_share": share,
    }
