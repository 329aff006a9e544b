"""The streaming program the crash tests kill: a Kafka direct stream with one offset store.

Run as its own process (the harness starts it with ``start_new_session=True`` so that killing
the process group also kills Spark's JVM and Python workers)::

    python tests/crash/driver.py CONFIG.json

``CONFIG.json`` (written by :mod:`tests.crash.harness`) names the store and its connection, the
topic, the group, the sink and ``end_file``, where the harness writes the end offsets of the
topic once it has produced every record (records keep arriving while the driver runs). The
driver reads the topic with ``createDirectStream`` on ``local[2]`` and writes the *effect* of
every record, ``(partition, offset)``:

* transactional stores (``sqlite``, ``postgres``): one row per record in the table
  ``effects_table``, inside ``stream.transaction(batch_time)``, so results and offsets commit
  together (exactly once);
* the other stores (``checkpoint``, ``kafka``, ``zookeeper``, ``hbase``): one JSON line per batch
  appended to the file ``sink`` with ``os.write`` + ``fsync`` *before* the stream commits the
  offsets (at least once);
* ``kafka-eos``: no offset store; one record per input record, value ``[partition, offset,
  incarnation]`` (JSON), written to the topic ``output_topic`` by an exactly-once
  :class:`~dstream_kafka.KafkaOutput`, whose transactions commit the offsets to the group;
  ``mid-output`` kills from a Python worker, half-way through partition 0's transaction;
* ``hbase`` also writes, before that line and before the offsets commit, one row per record to
  the HBase table ``results_table`` under :func:`~dstream_kafka.stores.hbase.result_row_key`
  (the store's documented pattern: a replayed batch overwrites its rows, so the table must end
  with exactly one row per record, while the file shows the replays).

Once ``end_file`` exists and every partition's committed offset reaches its end offset, the
driver stops and exits 0. It prints ``READY``, ``OUTPUT <batch> <records>`` and ``COMMITTED
<batch> <records>`` lines on stdout so the harness can time its kills.

Test-only crash hook (never in library code): the environment variable ``CRASH_AT=point:k``
makes the driver SIGKILL its own process group when it reaches ``point`` in the ``k``-th batch
with records of this run:

``before-output``  the batch is planned (write-ahead) but nothing is written yet;
``mid-output``     half of the batch's effects are written (inside the open transaction for the
                   transactional stores, one of two appended lines for the others);
``after-output``   every effect is written (the transaction committed), the store's commit in
                   ``on_batch_completed`` has not run yet: the worst window for at-least-once;
``in-commit``      checkpoint store only: the commit claim ``commits/<p>.next`` is written but
                   not the commit file;
``after-commit``   the offsets are committed, the next batch has not run.

``CRASH_INCARNATION`` (an int, default 0) is written with every effect, so the checks know which
run wrote what.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import sys
import threading
from typing import Any

#: Points of a batch where the test-only hook can kill the driver (see the module docstring).
CRASH_POINTS = ("before-output", "mid-output", "after-output", "in-commit", "after-commit")

TRANSACTIONAL = ("sqlite", "postgres")
#: Kafka to Kafka: the effects are records of an output topic written by an exactly-once
#: KafkaOutput, each input partition's records and offsets in one Kafka transaction.
KAFKA_EOS = "kafka-eos"
#: Modes whose effects must exist exactly once.
EXACTLY_ONCE = (*TRANSACTIONAL, KAFKA_EOS)

#: Column of a result row in the HBase ``results_table`` (family ``r``, one version).
RESULT_COLUMN = b"r:v"


def say(*words: Any) -> None:
    """Tell the harness (stdout, one line, flushed at once: the process may die right after)."""
    sys.stdout.write(" ".join(str(w) for w in words) + "\n")
    sys.stdout.flush()


def die() -> None:
    """SIGKILL this driver with its JVM and Python workers, as a power cut of the process would."""
    sys.stdout.flush()
    if os.getpgrp() == os.getpid():  # started as a session/group leader: take the group down
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


class CrashHook:
    """The ``CRASH_AT=point:k`` hook: ``reached(point, k)`` kills when both match."""

    def __init__(self, spec: str | None) -> None:
        self.point: str | None = None
        self.batch = 0
        if spec:
            point, _, k = spec.partition(":")
            if point not in CRASH_POINTS or not k.isdigit() or int(k) < 1:
                raise SystemExit(f"CRASH_AT must be <point>:<k> with point in {CRASH_POINTS}, got {spec!r}")
            self.point, self.batch = point, int(k)

    def reached(self, point: str, batch: int) -> None:
        if point == self.point and batch == self.batch:
            say("CRASH", point, batch)
            die()


class FileSink:
    """Append-only effects file: one JSON line per write, ``fsync``-ed before returning.

    A kill can leave a torn last line (no newline); the next run cuts it off before appending,
    as any append-only log recovers. Those effects were never complete, so they count as not
    written (their batch was not committed either, so it runs again).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.repaired = self._repair()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _repair(self) -> int:
        try:
            with open(self.path, "r+b") as handle:
                data = handle.read()
                if not data or data.endswith(b"\n"):
                    return 0
                keep = data.rfind(b"\n") + 1
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())
                return len(data) - keep
        except FileNotFoundError:
            return 0

    def write(self, incarnation: int, batch_ms: int, ranges: list[list[int]],
              records: list[list[int]]) -> None:
        line = json.dumps({"inc": incarnation, "batch": batch_ms, "ranges": ranges, "records": records},
                          separators=(",", ":")) + "\n"
        os.write(self._fd, line.encode())  # one write: a kill leaves the whole line or a torn tail
        os.fsync(self._fd)


def read_end_offsets(path: str) -> dict[int, int]:
    """The topic's final end offsets, once the harness finished producing (else ``{}``)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return {int(p): int(o) for p, o in json.load(handle).items()}
    except FileNotFoundError:
        return {}


def make_store(config: dict[str, Any]) -> Any:
    """Create the offset store the config names."""
    from dstream_kafka import OffsetStores

    kind = config["store"]
    if kind == "sqlite":
        return OffsetStores.sqlite(config["sqlite_path"], table_prefix=config["table_prefix"])
    if kind == "postgres":
        return OffsetStores.postgres(**config["postgres"], table_prefix=config["table_prefix"])
    if kind == "checkpoint":
        return OffsetStores.checkpoint(config["checkpoint_dir"])
    if kind == "kafka":
        return OffsetStores.kafka({"bootstrap.servers": config["bootstrap"]})
    if kind == KAFKA_EOS:  # the group the transactions commit to (read by the checks only)
        return OffsetStores.kafka({"bootstrap.servers": config["bootstrap"],
                                   "isolation.level": "read_committed"})
    if kind == "zookeeper":
        return OffsetStores.zookeeper(config["zookeeper"])
    if kind == "hbase":
        return OffsetStores.hbase(config["hbase"]["host"], int(config["hbase"]["port"]),
                                  table=config["hbase_table"])
    raise SystemExit(f"unknown store {kind!r}")


def create_effects_table(config: dict[str, Any]) -> None:
    """Create the results table of a transactional store (no unique key: duplicates must show)."""
    table = config["effects_table"]
    ddl = (f'CREATE TABLE IF NOT EXISTS "{table}" ("inc" INTEGER NOT NULL, "batch_ms" BIGINT NOT NULL, '
           '"partition" INTEGER NOT NULL, "offset" BIGINT NOT NULL)')
    conn = connect_results(config)
    try:
        cur = conn.cursor()
        cur.execute(ddl)
        conn.commit()
    finally:
        conn.close()


def connect_hbase(config: dict[str, Any]) -> Any:
    """A happybase connection to the HBase Thrift gateway of the ``hbase`` store."""
    import happybase

    return happybase.Connection(config["hbase"]["host"], int(config["hbase"]["port"]), timeout=60000)


def open_hbase_results(config: dict[str, Any]) -> tuple[Any, Any]:
    """The HBase results table of the ``hbase`` store (created by the first run), and its connection."""
    conn = connect_hbase(config)
    name = config["results_table"]
    if name.encode() not in conn.tables():
        conn.create_table(name, {"r": dict(max_versions=1)})
    return conn, conn.table(name)


def result_value(partition: int, offset: int) -> bytes:
    """A result row's value: the record it came from (the same bytes on every replay)."""
    return f"{partition}/{offset}".encode()


def connect_results(config: dict[str, Any]) -> Any:
    """A DB-API connection to the database holding the transactional store's results table."""
    if config["store"] == "sqlite":
        return sqlite3.connect(config["sqlite_path"], timeout=30)
    import psycopg2

    return psycopg2.connect(**config["postgres"])


def main(argv: list[str]) -> int:
    # Timestamped warnings and the group's join/assignment events: the run log of a trial that
    # went wrong tells when the driver waited for what.
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka.coordinator").setLevel(logging.INFO)
    with open(argv[1], encoding="utf-8") as handle:
        config = json.load(handle)
    hook = CrashHook(os.environ.get("CRASH_AT"))
    incarnation = int(os.environ.get("CRASH_INCARNATION", "0"))
    kind = config["store"]
    transactional = kind in TRANSACTIONAL

    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from dstream_kafka.streaming import StreamingContext, datetime_to_ms

    if kind == KAFKA_EOS:
        return run_kafka_eos(config, hook, incarnation)
    sink = None
    results: Any = None
    if transactional:
        create_effects_table(config)
    else:
        sink = FileSink(config["sink"])
        if sink.repaired:
            say("REPAIRED", sink.repaired)
        if kind == "hbase":
            _, results = open_hbase_results(config)
    store = make_store(config)

    sc = _spark(config, kind)
    ssc = StreamingContext(sc, float(config["batch_seconds"]))
    params = {"bootstrap.servers": config["bootstrap"], "group.id": config["group"],
              "auto.offset.reset": "earliest", "enable.auto.commit": False,
              # A killed driver never leaves the group; its successor waits for the dead
              # member's session to expire (45 s by default) before it gets the partitions.
              # 10 s still tolerates a busy machine starving the heartbeat thread for a while.
              "session.timeout.ms": 10000, "heartbeat.interval.ms": 2000}
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe([config["topic"]], params),
        offsetStore=store, maxOffsetsPerTrigger=int(config["max_per_batch"]))
    insert = (f'INSERT INTO "{config.get("effects_table")}" ("inc", "batch_ms", "partition", "offset") '
              + ("VALUES (?, ?, ?, ?)" if kind == "sqlite" else "VALUES (%s, %s, %s, %s)"))
    counter = {"batches": 0}

    topic = config["topic"]

    def put_results(records: list[tuple[int, int]]) -> None:
        """The hbase store's results: one row per record, under a key derived from it."""
        if results is None:
            return
        from dstream_kafka.stores.hbase import result_row_key

        with results.batch() as rows:
            for p, o in records:
                rows.put(result_row_key(topic, p, o), {RESULT_COLUMN: result_value(p, o)})

    def output(batch_time: Any, rdd: Any) -> None:
        records = sorted(rdd.map(lambda r: (r.partition, r.offset)).collect())
        if not records:
            return
        counter["batches"] += 1
        k = counter["batches"]
        ms = datetime_to_ms(batch_time)
        half = len(records) // 2
        hook.reached("before-output", k)
        if transactional:
            with stream.transaction(batch_time) as tx:
                tx.executemany(insert, [(incarnation, ms, p, o) for p, o in records[:half]])
                hook.reached("mid-output", k)
                tx.executemany(insert, [(incarnation, ms, p, o) for p, o in records[half:]])
        else:
            assert sink is not None
            ranges = [[r.partition, r.fromOffset, r.untilOffset] for r in rdd.offsetRanges()]
            put_results(records[:half])
            sink.write(incarnation, ms, ranges, [list(x) for x in records[:half]])
            hook.reached("mid-output", k)
            put_results(records[half:])
            sink.write(incarnation, ms, ranges, [list(x) for x in records[half:]])
        hook.reached("after-output", k)
        say("OUTPUT", ms, len(records))

    stream.foreachRDD(output)

    if hook.point == "in-commit":
        if kind != "checkpoint":
            raise SystemExit("in-commit is a crash point of the checkpoint store only")
        _arm_claim_crash(store, hook, counter)

    return _run_to_end(ssc, stream, config, hook, counter)


def _spark(config: dict[str, Any], kind: str) -> Any:
    """The run's SparkContext (one fresh, short-lived JVM per run)."""
    from pyspark import SparkContext

    from dstream_kafka.spark_settings import local_spark_conf

    conf = local_spark_conf("local[2]", f"crash-driver-{kind}", extra={
        "spark.streaming.kafka.consumer.poll.ms": "10000",
        "spark.streaming.kafka.consumer.backend": config.get("backend", "kafka-python"),
        # Every run is a fresh, short-lived JVM: the C1 compiler alone and the serial GC halve
        # its start and first job on a small machine (about 17 s down to 8 s on 2 cores).
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    })
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    return sc


def run_kafka_eos(config: dict[str, Any], hook: CrashHook, incarnation: int) -> int:
    """The ``kafka-eos`` program: Kafka to Kafka through an exactly-once KafkaOutput."""
    from dstream_kafka import ConsumerStrategies, KafkaOutput, KafkaUtils, LocationStrategies
    from dstream_kafka.streaming import StreamingContext, datetime_to_ms

    sc = _spark(config, KAFKA_EOS)
    ssc = StreamingContext(sc, float(config["batch_seconds"]))
    params = {"bootstrap.servers": config["bootstrap"], "group.id": config["group"],
              "auto.offset.reset": "earliest", "isolation.level": "read_committed",
              "session.timeout.ms": 10000, "heartbeat.interval.ms": 2000}
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([config["topic"]], params),
        maxOffsetsPerTrigger=int(config["max_per_batch"]))
    counter = {"planned": 0, "batches": 0}
    mid_output = hook.point == "mid-output"

    def effects(rdd: Any) -> Any:
        # Driver side, when the batch is generated: the k-th batch with records of this run
        # kills from inside partition 0's transaction (mid-output), from a Python worker.
        counter["planned"] += 1 if rdd.count() else 0
        victim = next((i for i, r in enumerate(rdd.offsetRanges()) if r.count()), -1)
        kill_here = mid_output and counter["planned"] == hook.batch
        group = os.getpgrp()  # the driver's: its JVM and workers go down with it

        def write(index: int, records: Any) -> Any:
            listed = list(records)
            for i, r in enumerate(listed):
                if kill_here and index == victim and i == len(listed) // 2:
                    sys.stdout.write(f"CRASH mid-output {hook.batch}\n")
                    os.killpg(group, signal.SIGKILL)
                    os.kill(os.getpid(), signal.SIGKILL)  # workers have a group of their own
                yield (None, json.dumps([r.partition, r.offset, incarnation]).encode())

        return rdd.mapPartitionsWithIndex(write, preservesPartitioning=True)

    def before(batch_time: Any, rdd: Any) -> None:
        if rdd.count():
            counter["batches"] += 1
            hook.reached("before-output", counter["batches"])

    def after(batch_time: Any, rdd: Any) -> None:
        if rdd.count():
            hook.reached("after-output", counter["batches"])
            say("OUTPUT", datetime_to_ms(batch_time), rdd.count())

    stream.foreachRDD(before)
    # output_params: the copier scenario (tests/crash/copier.py) bounds transaction steps.
    KafkaOutput({"bootstrap.servers": config["bootstrap"], **config.get("output_params", {})},
                topic=config["output_topic"],
                guarantee="exactly-once").writeStream(stream.transform(effects))
    stream.foreachRDD(after)
    return _run_to_end(ssc, stream, config, hook, counter)


def _run_to_end(ssc: Any, stream: Any, config: dict[str, Any], hook: CrashHook,
                counter: dict[str, int]) -> int:
    """Start ``ssc``, report progress, stop once every partition committed its end offset."""
    committed: dict[int, int] = {}
    end: dict[int, int] = {}
    done = threading.Event()

    def progress(p: Any) -> None:
        for r in p.ranges:
            committed[r.partition] = r.untilOffset
        if p.numRecords:
            say("COMMITTED", p.batchTime, p.numRecords)
            hook.reached("after-commit", counter["batches"])
        if not end:
            end.update(read_end_offsets(config["end_file"]))
        if end and all(committed.get(part, -1) >= off for part, off in end.items()):
            done.set()

    stream.addProgressListener(progress)
    ssc.start()
    logging.getLogger("crash.driver").warning("READY")  # the same moment in the run log
    say("READY")
    while not ssc.awaitTerminationOrTimeout(0.1):
        if done.is_set():
            # Everything is committed: queued batches are empty, a graceful stop would only
            # wait for them (up to 10 batch intervals).
            ssc.stop(stopSparkContext=True, stopGraceFully=False)
            say("DONE")
            return 0
    return 1  # stopped without reaching the end offsets: awaitTermination raised or someone stopped it


def _arm_claim_crash(store: Any, hook: CrashHook, counter: dict[str, int]) -> None:
    """Die right after the checkpoint store writes its commit claim of the chosen batch.

    Wraps the store's file system (test-only instrumentation; the library is unchanged): the
    claim ``commits/<p>.next`` is the first file a commit writes, the commit file the second.
    """
    fs = store._fs
    write_new = fs.write_new
    committing = {"batch": 0}
    commit = store.commit

    def commit_and_watch(group_id: str, batch_time_ms: int, ranges: Any, **options: Any) -> None:
        committing["batch"] = counter["batches"] if any(r.count() for r in ranges) else 0
        try:
            commit(group_id, batch_time_ms, ranges, **options)  # the stream passes its epoch
        finally:
            committing["batch"] = 0

    def write_and_maybe_die(path: str, data: bytes) -> bool:
        written = write_new(path, data)
        if path.endswith(".next") and committing["batch"]:
            hook.reached("in-commit", committing["batch"])
        return written

    store.commit = commit_and_watch
    fs.write_new = write_and_maybe_die


if __name__ == "__main__":
    sys.exit(main(sys.argv))
