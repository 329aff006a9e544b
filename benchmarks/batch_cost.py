"""The per-batch fixed cost of a direct stream, piece by piece (issue #30 part 1).

``python -m benchmarks.batch_cost [--batches 20] [--interval 0.25] [--stores ...]`` starts its
own broker, PostgreSQL (with a password, as the published run) and a ``local[2]`` SparkContext,
and prints three tables (milliseconds, p50 / p90 over the measured batches):

1. **job pieces** of an empty and of a tiny batch (no store): ``plan`` (the stream's planMs:
   latest offsets and RDD creation), ``serialise`` (pickling the output's function and building
   the JVM PythonRDD), ``launch`` (job submitted to the first task's Python function running),
   ``tasks`` (first task start to last task end, the reads included), ``return`` (last task end
   to ``collect`` returning), ``commit`` (the stream's commitMs);
2. **store commit** per offset store, with its Kafka lag mirror on (the default since #12 item 3)
   and off (``also_commit_to_kafka_group=False``): the time of ``store.commit`` per batch;
3. **round trips** the stores' costs are built from: a synchronous Kafka group commit (what the
   mirror sends per batch), and one PostgreSQL ``UPDATE`` + ``COMMIT`` on a kept connection.

The machine load (``/proc/loadavg``) is printed before and after. Every figure is one run on a
shared machine: compare rows of the same run, not across runs.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

__all__ = ["main"]

STORES = ("kafka", "checkpoint", "sqlite", "postgres")
PIECES = ("plan", "serialise", "launch", "tasks", "return", "commit")


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "unknown"


def _p(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _cell(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f} / {_p(values, 0.9):.2f}" if values else "-"


def _mark(index: int, records: Iterable[Any]) -> Iterator[tuple[float, float, int]]:
    """A task's Python function: its wall-clock start and end, and the records it read."""
    start = time.time()
    count = sum(1 for _ in records)
    yield start, time.time(), count


class _Pieces:
    """foreachRDD output that times the job of each batch piece by piece."""

    def __init__(self) -> None:
        self.rows: list[dict[str, float]] = []

    def __call__(self, rdd: Any) -> None:
        t0 = time.time()
        mapped = rdd.mapPartitionsWithIndex(_mark)
        mapped._jrdd  # pickles the function and builds the JVM PythonRDD, as collect would
        t1 = time.time()
        marks = mapped.collect()
        t2 = time.time()
        starts, ends = [m[0] for m in marks], [m[1] for m in marks]
        self.rows.append({"serialise": (t1 - t0) * 1e3,
                          "launch": (min(starts, default=t1) - t1) * 1e3,
                          "tasks": (max(ends, default=t1) - min(starts, default=t1)) * 1e3,
                          "return": (t2 - max(ends, default=t2)) * 1e3,
                          "records": float(sum(m[2] for m in marks))})


class _CommitTimer:
    """Wraps one store instance's ``commit`` to time it (no change to dstream_kafka)."""

    def __init__(self, store: Any) -> None:
        self.ms: list[float] = []
        inner = store.commit

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.ms.append((time.perf_counter() - t0) * 1e3)
        store.commit = timed


def _producer(cluster: Any, topic: str, stop: threading.Event, per_tick: int,
              tick_s: float) -> threading.Thread:
    def run() -> None:
        n = 0
        while not stop.wait(tick_s):
            cluster.produce(topic, [f"v{n + i}" for i in range(per_tick)])
            n += per_tick
    thread = threading.Thread(target=run, name="batch-cost-producer", daemon=True)
    thread.start()
    return thread


def _run_stream(sc: Any, cluster: Any, topic: str, batches: int, interval: float,
                store: Any, tiny: bool) -> tuple[_Pieces, list[Any]]:
    """Run one direct stream for ``batches`` measured batches after 2 warm-up ones."""
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from dstream_kafka.streaming import StreamingContext

    ssc = StreamingContext(sc, interval)
    group = f"batch-cost-{uuid.uuid4().hex[:8]}"
    params = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
              "auto.offset.reset": "latest"}
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe([topic], params),
        offsetStore=store)
    pieces = _Pieces()
    stream.foreachRDD(pieces)
    stop = threading.Event()
    ssc.start()
    if tiny:
        _producer(cluster, topic, stop, 5, interval / 2)
    deadline = time.monotonic() + 60 + batches * interval * 10
    try:
        while len(stream.recentProgress) < batches + 2 and time.monotonic() < deadline:
            time.sleep(interval)
    finally:
        stop.set()
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    progress = list(stream.recentProgress)[2:batches + 2]
    pieces.rows = pieces.rows[2:batches + 2]
    return pieces, progress


def _kafka_commit_round_trips(cluster: Any, topic: str, count: int) -> list[float]:
    """A group member's synchronous commit of one partition, as the mirror sends it."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers,
                             group_id=f"batch-cost-rt-{uuid.uuid4().hex[:8]}",
                             enable_auto_commit=False)
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        times = []
        for n in range(count + 2):
            t0 = time.perf_counter()
            consumer.commit({tp: OffsetAndMetadata(n, "", -1)})
            times.append((time.perf_counter() - t0) * 1e3)
        return times[2:]
    finally:
        consumer.close()


def _postgres_round_trips(dsn: dict[str, Any], count: int) -> list[float]:
    import psycopg2

    conn = psycopg2.connect(**dsn)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS rt (k INT PRIMARY KEY, v BIGINT)")
            cur.execute("INSERT INTO rt VALUES (1, 0) ON CONFLICT DO NOTHING")
        conn.commit()
        times = []
        for n in range(count + 2):
            t0 = time.perf_counter()
            with conn.cursor() as cur:
                cur.execute("UPDATE rt SET v = %s WHERE k = 1", (n,))
            conn.commit()
            times.append((time.perf_counter() - t0) * 1e3)
        return times[2:]
    finally:
        conn.close()


def _make_store(kind: str, mirror: bool, cluster: Any, workdir: Path, dsn: dict[str, Any] | None,
                sc: Any) -> Any:
    from dstream_kafka.stores import OffsetStores

    name = f"{kind}-{'m' if mirror else 'n'}-{uuid.uuid4().hex[:6]}"
    flag: Any = None if mirror else False
    if kind == "kafka":
        return OffsetStores.kafka({"bootstrap.servers": cluster.bootstrap_servers})
    if kind == "checkpoint":
        return OffsetStores.checkpoint(str(workdir / name), spark_context=sc,
                                       also_commit_to_kafka_group=flag)
    if kind == "sqlite":
        return OffsetStores.sqlite(str(workdir / f"{name}.db"), also_commit_to_kafka_group=flag)
    assert dsn is not None
    return OffsetStores.postgres(**dsn, table_prefix=name.replace("-", "_"),
                                 also_commit_to_kafka_group=flag)


def _table(title: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = [title, "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def measure(sc: Any, cluster: Any, dsn: dict[str, Any] | None, batches: int, interval: float,
            stores: Sequence[str], workdir: Path, out: Callable[[str], None] = print) -> None:
    """Run every measurement and print its tables."""
    topic = f"batch-cost-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(topic, partitions=2)
    rows = []
    for kind in ("empty", "tiny"):
        pieces, progress = _run_stream(sc, cluster, topic, batches, interval, None, kind == "tiny")
        values = {name: [r[name] for r in pieces.rows] for name in ("serialise", "launch", "tasks",
                                                                     "return")}
        values["plan"] = [p.planMs for p in progress]
        values["commit"] = [p.commitMs for p in progress]
        records = sum(r["records"] for r in pieces.rows) / max(len(pieces.rows), 1)
        rows.append([kind, str(len(pieces.rows)), f"{records:.1f}",
                     *(_cell(values[name]) for name in PIECES)])
    out(_table(f"Job pieces, ms p50 / p90 ({interval} s batches, 2 partitions, no store)",
               ["batch", "batches", "records/batch", *PIECES], rows))
    rows = []
    for kind in stores:
        if kind == "postgres" and dsn is None:
            continue
        for mirror in ((True,) if kind == "kafka" else (True, False)):
            store = _make_store(kind, mirror, cluster, workdir, dsn, sc)
            timer = _CommitTimer(store)
            _pieces, progress = _run_stream(sc, cluster, topic, batches, interval, store, True)
            label = "n/a (the store is the group)" if kind == "kafka" else ("on" if mirror else "off")
            rows.append([kind, label, str(len(progress)), _cell(timer.ms[2:batches + 2]),
                         _cell([p.commitMs for p in progress])])
    out("")
    out(_table("Store commit per tiny batch, ms p50 / p90", ["store", "lag mirror", "batches",
                                                             "store.commit", "commitMs"], rows))
    rows = [["Kafka group commit, synchronous (the mirror's per batch)",
             _cell(_kafka_commit_round_trips(cluster, topic, 3 * batches))]]
    if dsn is not None:
        rows.append(["PostgreSQL UPDATE + COMMIT, kept connection",
                     _cell(_postgres_round_trips(dsn, 3 * batches))])
    out("")
    out(_table("Round trips, ms p50 / p90", ["what", "ms"], rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.batch_cost",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=20, help="measured batches per row")
    parser.add_argument("--interval", type=float, default=0.25, help="batch interval, s")
    parser.add_argument("--stores", default=",".join(STORES),
                        help=f"comma-separated, of {','.join(STORES)}")
    args = parser.parse_args(argv)
    stores = [s for s in args.stores.split(",") if s]
    unknown = sorted(set(stores) - set(STORES))
    if unknown:
        parser.error(f"unknown store {unknown[0]!r}; choose from {','.join(STORES)}")
    from pyspark import SparkContext

    from benchmarks.broker import start_broker
    from dstream_kafka.spark_settings import local_spark_conf

    print(f"loadavg before: {_loadavg()}  (cores: {os.cpu_count()})")
    cluster = start_broker()
    server = None
    try:
        dsn = None
        if "postgres" in stores:
            from tests.support.postgres import PostgresServer

            server = PostgresServer(dbname="bench", password=secrets.token_urlsafe(18)).start()
            dsn = server.dsn_params()
        sc = SparkContext.getOrCreate(local_spark_conf("local[2]", "batch-cost"))
        try:
            with tempfile.TemporaryDirectory(prefix="batch-cost-") as workdir:
                measure(sc, cluster, dsn, args.batches, args.interval, stores, Path(workdir))
        finally:
            sc.stop()
    finally:
        if server is not None:
            server.stop()
        cluster.stop()
    print(f"loadavg after: {_loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
