"""dstream_kafka's offset stores under the exactly-once workload (5): cost per batch per store.

Part of the adapter (:mod:`benchmarks.adapter` holds the shared helpers): with it, the only
modules that touch dstream_kafka's API. Functions run in the contender's child process.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from benchmarks.adapter import CacheTracker, _cache_stats, _PlanTimer, create_direct_stream, kafka_params

__all__ = ["STORE_VARIANTS", "stream_store_cost"]

#: Offset store variants of the exactly-once workload, in run order.
STORE_VARIANTS = {
    "none": "no offset store, no commit (baseline for plan and commit)",
    "kafka-commitAsync": "no store; stream.commitAsync(ranges) to the Kafka group after the output",
    "kafka": "OffsetStores.kafka (consumer group commit after the output)",
    "checkpoint": "OffsetStores.checkpoint (write-ahead log when planning, commit log after)",
    "zookeeper": "OffsetStores.zookeeper (needs a ZooKeeper server)",
    "sqlite": "OffsetStores.sqlite, offsets only (commit after the output)",
    "sqlite-tx": "OffsetStores.sqlite, aggregate + offsets in one stream.transaction()",
    "postgres": "OffsetStores.postgres, offsets only (commit after the output)",
    "postgres-tx": "OffsetStores.postgres, aggregate + offsets in one stream.transaction(): exactly-once",
    "hbase": "OffsetStores.hbase, offsets only (checkAndPut of the group cell, then the guide's rows)",
}

_RESULTS_DDL = ('CREATE TABLE IF NOT EXISTS {t} (batch_time_ms BIGINT NOT NULL, part INTEGER NOT NULL, '
                'records BIGINT NOT NULL, value_bytes BIGINT NOT NULL, PRIMARY KEY (batch_time_ms, part))')


def _aggregate(index: int, records: Iterable[Any]) -> Iterator[tuple]:
    """The sink's per-partition aggregate: ``(records, value_bytes, pid, cache_stats, index)``."""
    n = total = 0
    for rec in records:
        n += 1
        total += len(rec.value)
    yield n, total, os.getpid(), _cache_stats(), index


class _StoreTimer:
    """Wrap a store instance's ``plan``/``commit``/``committed_in`` to time them per batch.

    Measures from outside, on this one instance only (no change to dstream_kafka): the stream
    calls ``plan`` while planning (the checkpoint store's write-ahead) and ``commit`` or, after a
    ``transaction()``, ``committed_in`` once the output finished; commitMs also holds commitAsync.
    """

    def __init__(self, store: Any) -> None:
        self.times: dict[int, dict[str, float]] = {}
        for name, phase in (("plan", "store_plan"), ("commit", "store_commit"),
                            ("committed_in", "store_commit")):
            if hasattr(store, name):
                setattr(store, name, self._wrap(getattr(store, name), phase))

    def _wrap(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def timed(group_id: str, batch_time_ms: Any, *args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(group_id, batch_time_ms, *args, **kwargs)
            finally:
                ms = (time.perf_counter() - t0) * 1000.0
                entry = self.times.setdefault(int(batch_time_ms), {})
                entry[phase] = entry.get(phase, 0.0) + ms
        return timed


def _make_store(variant: str, services: dict[str, Any], workdir: Path, bootstrap: str,
                group: str) -> Any:
    from dstream_kafka.stores import OffsetStores

    if variant in ("none", "kafka-commitAsync"):
        return None
    if variant == "kafka":
        return OffsetStores.kafka(kafka_params(bootstrap, group))
    if variant == "checkpoint":
        return OffsetStores.checkpoint(workdir / f"checkpoint-{group}")
    if variant == "zookeeper":
        if not services.get("zookeeper"):
            raise RuntimeError("no ZooKeeper server: " + str(services.get("zookeeper_error")))
        return OffsetStores.zookeeper(services["zookeeper"])
    if variant.startswith("sqlite"):
        return OffsetStores.sqlite(workdir / f"{group}.db")
    if variant.startswith("postgres"):
        if not services.get("postgres"):
            raise RuntimeError("no PostgreSQL server: " + str(services.get("postgres_error")))
        return OffsetStores.postgres(**services["postgres"])
    if variant == "hbase":
        if not services.get("hbase"):
            raise RuntimeError("no HBase server: " + str(services.get("hbase_error")))
        host, port = services["hbase"]
        return OffsetStores.hbase(host, port, table=f"bench_eo_{group.replace('-', '_')}")
    raise ValueError(f"unknown store variant {variant!r}; choose from {', '.join(STORE_VARIANTS)}")


def _results_connection(variant: str, services: dict[str, Any], workdir: Path, group: str) -> Any:
    """A separate DB-API connection to the store's database (tables, plain writes, checks)."""
    if variant.startswith("sqlite"):
        import sqlite3

        # Used on the job thread (plain writes) and the main thread (the final check).
        return sqlite3.connect(str(workdir / f"{group}.db"), timeout=30, check_same_thread=False)
    import psycopg2

    return psycopg2.connect(**services["postgres"])


def _timed_transaction(stream: Any, batch_time: Any, table: str, rows: list[tuple]) -> dict[str, float]:
    """Write ``rows`` inside ``stream.transaction(batch_time)``; time entry, writes and exit (ms)."""
    t0 = time.perf_counter()
    cm = stream.transaction(batch_time)
    tx = cm.__enter__()
    t1 = time.perf_counter()
    mark = "?" if getattr(tx, "paramstyle", "qmark") == "qmark" else "%s"
    try:
        tx.executemany(f"INSERT INTO {table} VALUES ({mark}, {mark}, {mark}, {mark})", rows)
    except BaseException:
        if not cm.__exit__(*sys.exc_info()):
            raise
    t2 = time.perf_counter()
    cm.__exit__(None, None, None)
    t3 = time.perf_counter()
    return {"tx_open": (t1 - t0) * 1000.0, "user_writes": (t2 - t1) * 1000.0,
            "tx_close": (t3 - t2) * 1000.0, "tx_total": (t3 - t0) * 1000.0}


def _plain_transaction(conn: Any, table: str, rows: list[tuple], mark: str) -> float:
    """The same writes in the user's own transaction, no offsets: the baseline (ms)."""
    t0 = time.perf_counter()
    cur = conn.cursor()
    cur.executemany(f"INSERT INTO {table} VALUES ({mark}, {mark}, {mark}, {mark})", rows)
    conn.commit()
    return (time.perf_counter() - t0) * 1000.0


def stream_store_cost(sc: Any, bootstrap: str, topic: str, ends: dict[int, int], variant: str,
                      batch_seconds: float, services: dict[str, Any], workdir: Path,
                      warmup: int = 2, timeout: float = 600.0,
                      tracker: CacheTracker | None = None) -> dict[str, Any]:
    """Stream the whole topic through one offset store variant; time the store per batch.

    Every batch runs the sink's aggregate (records and value bytes per partition, one Spark job).
    ``*-tx`` variants write the aggregate and the offsets in ``stream.transaction(time)`` and,
    before it, the same rows in a plain transaction on a second connection (the cost of the
    user's writes alone). Rows of milliseconds per batch: ``plan``, ``queue``, ``output``,
    ``commit`` (commitMs), ``job``; ``store_plan``/``store_commit`` (the store's own methods,
    timed on the instance); ``tx_open``/``user_writes``/``tx_close``/``tx_total``/``plain_tx``;
    ``store_cost`` = store_plan + store_commit + tx_open + tx_close: what the offsets add;
    ``eo_extra`` = tx_total + store_commit - plain_tx, the same batch's exactly-once transaction
    over the plain one. Pass one ``tracker`` to every stream of a process so each one's consumer
    cache counts start where the previous stream's ended.
    """
    from dstream_kafka.streaming import datetime_to_ms
    from dstream_kafka.streaming.context import StreamingContext

    expected = sum(ends.values())
    tag = f"{variant.replace('-', '_')}_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    group = f"bench-eo-{tag}"
    store = _make_store(variant, services, workdir, bootstrap, group)
    timer = _StoreTimer(store) if store is not None else None
    transactional = variant.endswith("-tx")
    table, plain_table, conn, mark = f"bench_eo_{tag}", f"bench_eo_plain_{tag}", None, "?"
    if transactional:
        conn = _results_connection(variant, services, workdir, group)
        mark = "?" if variant.startswith("sqlite") else "%s"
        cur = conn.cursor()
        for t in (table, plain_table):
            cur.execute(_RESULTS_DDL.format(t=t))
        conn.commit()
    ssc = StreamingContext(sc, batch_seconds)
    stream = create_direct_stream(ssc, bootstrap, topic, ends, group, offset_store=store)
    plan_timer = _PlanTimer(stream)
    tracker = tracker if tracker is not None else CacheTracker()
    first_batch = len(tracker.per_batch)
    jobs: dict[int, dict[str, float]] = {}
    rows: list[dict[str, Any]] = []
    state = {"records": 0}
    done = threading.Event()
    errors: list[BaseException] = []

    def per_batch(batch_time: Any, rdd: Any) -> None:
        try:
            ms = datetime_to_ms(batch_time)
            ranges = rdd.offsetRanges()
            t0 = time.perf_counter()
            parts = rdd.mapPartitionsWithIndex(_aggregate).collect()
            phases = {"job": (time.perf_counter() - t0) * 1000.0}
            tracker.add_batch(parts)
            results = [(ms, ranges[p[4]].partition, p[0], p[1]) for p in parts]
            if transactional:
                phases["plain_tx"] = _plain_transaction(conn, plain_table, results, mark)
                phases.update(_timed_transaction(stream, batch_time, table, results))
            elif variant == "kafka-commitAsync":
                stream.commitAsync(ranges)
            jobs[ms] = phases
        except BaseException as exc:
            errors.append(exc)
            done.set()
            raise

    def on_progress(progress: Any) -> None:
        bt = progress.batchTime
        row = {"batch_time": bt, "records": progress.numRecords, "plan": progress.planMs,
               "queue": progress.schedulingDelay, "output": progress.processingDelay,
               "commit": progress.commitMs, **jobs.pop(bt, {}), **plan_timer.pop(bt)}
        if timer is not None:
            row.update(timer.times.pop(bt, {}))
        row["store_cost"] = sum(row.get(k) or 0.0 for k in ("store_plan", "store_commit", "tx_open",
                                                            "tx_close"))
        if "tx_total" in row and "plain_tx" in row:
            # Paired in the same batch: what exactly-once adds over the user's own transaction.
            row["eo_extra"] = row["tx_total"] + (row.get("store_commit") or 0.0) - row["plain_tx"]
        if variant == "kafka-commitAsync":
            row["store_cost"] = row["commit"]
        rows.append(row)
        state["records"] += progress.numRecords
        if state["records"] >= expected:
            done.set()

    stream.foreachRDD(per_batch)
    stream.addProgressListener(on_progress)
    ssc.start()
    finished = done.wait(timeout)
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
    verified = None
    if conn is not None:
        try:
            if not errors:
                cur = conn.cursor()
                cur.execute(f"SELECT COUNT(DISTINCT batch_time_ms), COALESCE(SUM(records), 0) FROM {table}")
                stored_batches, stored_records = cur.fetchone()
                verified = {"batches": int(stored_batches), "records": int(stored_records),
                            "exactly_once": int(stored_records) == state["records"] == expected}
        finally:
            conn.close()
    if errors:
        raise errors[0]
    if not finished:
        raise TimeoutError(f"store {variant}: read {state['records']} of {expected} records in {timeout}s")
    data = [r for r in rows if r["records"]]
    return {"records": state["records"], "rows": data[warmup:], "warmup_rows": data[:warmup],
            "cache": tracker.summary(since=first_batch), "verified": verified}
