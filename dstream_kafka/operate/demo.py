"""``dstream-kafka demo``: a running word count over a live Kafka stream, exactly once.

With no arguments it starts a local broker (data kept in the cache folder), produces a steady
stream of synthetic sentences, and runs a direct stream on ``local[2]`` Spark whose per-batch
word counts and offsets are written to SQLite **in one transaction**. On a terminal a live view
(rich) is redrawn in place; piped, each batch prints one progress line. The Streaming page runs
on a free loopback port. Ctrl-C (or ``--duration``) stops gracefully: the running batch
finishes and commits. A second run resumes from the committed offsets and keeps adding to the
same totals.
"""

from __future__ import annotations

import argparse
import random
import signal
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["run_demo", "WORDS", "check_broker", "demo_dir"]

#: Vocabulary of the synthetic stream.
WORDS = ("kafka", "spark", "offset", "stream", "batch", "range", "commit", "python")


def demo_dir(data_dir: str | None = None) -> Path:
    """Folder of the demo's broker data and SQLite file: ``data_dir`` (``--data-dir``), else
    ``demo`` in the project cache."""
    from dstream_kafka.operate.services.environment import cache_dir

    path = Path(data_dir) if data_dir else cache_dir() / "demo"
    path.mkdir(parents=True, exist_ok=True)
    return path


class _Producer(threading.Thread):
    """Sends ``rate`` sentences per second until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: int) -> None:
        super().__init__(name="demo-producer", daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, max(rate, 1)
        self.stop_event = threading.Event()
        self.sent = 0

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=20)
        rng = random.Random()
        tick = 0.1
        per_tick = max(1, round(self.rate * tick))
        try:
            while not self.stop_event.wait(tick):
                for _ in range(per_tick):
                    line = " ".join(rng.choice(WORDS) for _ in range(4))
                    producer.send(self.topic, key=str(self.sent % 97).encode(), value=line.encode())
                    self.sent += 1
            producer.flush()
        finally:
            producer.close()


def check_broker(bootstrap: str, timeout: float) -> None:
    """Return once a broker at ``bootstrap`` answers; wait at most ``timeout`` seconds.

    Raises
    ------
    BrokerTimeoutError
        Naming the servers, the likely cause and ``--connect-timeout``, when no broker
        answered in time.
    """
    from kafka import KafkaAdminClient

    from dstream_kafka.errors import BrokerTimeoutError
    from dstream_kafka.client.kafka_params import bootstrap_failure

    config = {"bootstrap_servers": bootstrap, "bootstrap_timeout_ms": max(1, int(timeout * 1000))}
    try:
        admin = KafkaAdminClient(**config)
    except Exception as exc:
        if bootstrap_failure(config, exc) is None:
            raise
        raise BrokerTimeoutError(
            f"no Kafka broker answered at {bootstrap} within --connect-timeout {timeout:g} s: "
            "check the address and that the broker is running (dstream-kafka broker start), "
            "or leave out --bootstrap-servers to let the demo start its own broker"
        ) from None
    admin.close()


def _ensure_topic(bootstrap: str, topic: str, partitions: int = 4) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic
    from kafka.errors import TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    except TopicAlreadyExistsError:
        pass
    finally:
        admin.close()


def _top_words(db: Path, n: int = 4) -> str:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT word, total FROM word_counts ORDER BY total DESC, word LIMIT ?",
                            (n,)).fetchall()
    except sqlite3.OperationalError:
        rows = []
    finally:
        conn.close()
    return ", ".join(f"{w} {c}" for w, c in rows)


class _StopRequested(Exception):
    """SIGINT or SIGTERM arrived while the demo was starting: nothing was read yet."""


class _Signals:
    """The demo's SIGINT/SIGTERM handler: a stop request, which aborts a start in progress."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.name = ""
        self.starting = True

    def install(self) -> None:
        """(Re)install for SIGINT and SIGTERM: PySpark's SparkContext takes SIGINT over (it
        cancels jobs and raises KeyboardInterrupt) and ``ssc.start()`` SIGTERM."""
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self)

    def __call__(self, signum: int, _frame: Any) -> None:
        self.name = self.name or signal.Signals(signum).name
        self.requested.set()
        if self.starting:
            raise _StopRequested(self.name)


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit code.

    SIGINT (Ctrl-C) and SIGTERM (``timeout``, systemd, Kubernetes) stop it gracefully and
    exit with code 0: during start-up with one line, before anything is read; afterwards once
    the running batch committed, with the usual summary. The broker it started is stopped
    either way.
    """
    signals = _Signals()
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signals.install()
    try:
        return _run(args, signals)
    except _StopRequested as stop:
        print(f"{stop} received during start-up: stopped before reading anything.", flush=True)
        return 0
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # None: a handler not set from Python, left alone
                signal.signal(sig, handler)


def _run(args: argparse.Namespace, signals: _Signals) -> int:
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetStores
    from dstream_kafka.operate.services.kafka import KafkaCluster
    from dstream_kafka.spark_settings import local_spark_conf, spark_context_in_own_session
    from dstream_kafka.streaming import StreamingContext
    from dstream_kafka.ui import active_page
    from dstream_kafka.operate.terminal import create_display

    folder = demo_dir(getattr(args, "data_dir", None))
    cluster = None
    bootstrap = args.bootstrap_servers
    if bootstrap is not None:
        # Before any thread or SparkContext starts, so a wrong address is one error line.
        check_broker(bootstrap, getattr(args, "connect_timeout", 30.0))
    db = folder / "demo.db"
    producer: _Producer | None = None
    sc = None
    try:
        if bootstrap is None:
            print("Starting a local Kafka broker ...", flush=True)
            # Assigned before start(): a signal during the start still stops the broker.
            cluster = KafkaCluster(data_dir=folder / "broker")
            cluster.start()
            bootstrap = cluster.bootstrap_servers
        producer = _Producer(bootstrap, args.topic, args.rate)
        _ensure_topic(bootstrap, args.topic)
        producer.start()
        # The Streaming page on a free loopback port: the demo shows what a user can turn on.
        # Spark's JVM in its own session: a SIGTERM to our process group (`timeout`) must not
        # end it before the running batch commits.
        sc = spark_context_in_own_session(local_spark_conf("local[2]", "dstream_kafka-demo", extra={
            "spark.streaming.kafka.ui.port": "0"}))
        signals.install()
        sc.setLogLevel("ERROR")
        ssc = StreamingContext(sc, args.batch_seconds)
        params = {"bootstrap.servers": bootstrap, "group.id": args.group,
                  "auto.offset.reset": "earliest"}
        store = OffsetStores.sqlite(db)
        stream = KafkaUtils.createDirectStream(
            ssc, LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([args.topic], params), offsetStore=store)
        counts = (stream.flatMap(lambda record: record.value.decode("utf-8").split())
                  .map(lambda word: (word, 1))
                  .reduceByKey(lambda a, b: a + b))

        def save(batch_time: Any, rdd: Any) -> None:
            rows = rdd.collect()
            # Results and offsets commit together: a crash never counts a record twice.
            with stream.transaction(batch_time) as tx:
                tx.execute("CREATE TABLE IF NOT EXISTS word_counts "
                           "(word TEXT PRIMARY KEY, total INTEGER NOT NULL)")
                tx.executemany("INSERT INTO word_counts VALUES (?, ?) ON CONFLICT(word) "
                               "DO UPDATE SET total = total + excluded.total", rows)

        counts.foreachRDD(save)
        stored = store.load(args.group, [args.topic])
        where = ("from the committed offsets " + ", ".join(
            f"p{tp.partition}@{off}" for tp, off in sorted(stored.items()))) if stored else "from the beginning"
        # From here a signal asks for a graceful stop: the view below is closed, the stream
        # started and stopped in order.
        signals.starting = False
        display = create_display(f"{args.topic} at {bootstrap} -> {db.name}",
                                 lambda: _top_words(db))
        stream.addProgressListener(display.batch)
        display.message(f"Reading {args.topic} at {bootstrap} {where}; offsets and counts in {db}.")
        display.message("Press Ctrl-C to stop gracefully; run the demo again to resume.")
        ssc.start()
        signals.install()  # over the engine's SIGTERM handler: the demo stops gracefully itself
        page = active_page()
        if page is not None:
            display.message(f"Streaming page: {page.url}")
        deadline = time.monotonic() + args.duration if args.duration else None
        while not ssc.awaitTerminationOrTimeout(0.2):
            if signals.requested.is_set() or (deadline is not None and time.monotonic() > deadline):
                break
        why = f"{signals.name} received: stopping" if signals.name else "Stopping"
        display.message(f"{why} gracefully (finishing the running batch) ...")
        _stop_producer(producer)
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
        display.close()
        final = OffsetStores.sqlite(db).load(args.group, [args.topic])
        print(f"Processed {display.processed} records this run; committed offsets: "
              + ", ".join(f"p{tp.partition}={off}" for tp, off in sorted(final.items())))
        print(f"Totals: {_top_words(db, len(WORDS))}")
        return 0
    finally:
        signals.starting = False  # a signal now must not interrupt the clean-up below
        if producer is not None:
            _stop_producer(producer)
        if sc is not None:
            sc.stop()
        if cluster is not None:
            cluster.stop()


def _stop_producer(producer: _Producer) -> None:
    # Joined before the broker stops: a producer left sending would log connection errors.
    producer.stop_event.set()
    if producer.is_alive():
        producer.join(timeout=15)
