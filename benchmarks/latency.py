"""Kafka-to-Kafka end-to-end latency of a direct stream (issue #30 part 3): a skeleton.

``python -m benchmarks.latency [--rate 1000] [--seconds 20] [--triggers 0,0x2,0.25]`` starts its
own broker and ``local[2]``; a producer thread sends ``--rate`` records/s (CreateTime stamped by
the producer) to a 4-partition input topic; each configuration runs one direct stream whose
output writes every record to a 4-partition output topic with ``LogAppendTime``, the input
record's timestamp in a ``source-ts`` header, from a ``foreachPartition`` producer (the package's
Kafka output was being built beside this; this skeleton does not depend on it). Latency is the
output record's broker append time minus the input record's CreateTime, p50 / p99 / max over the
records after the first ``--warmup`` seconds, counted from the end of a warm-up batch. At-least-once
only (no offset store).

Triggers: ``0`` is ``StreamingContext(sc, 0)`` (batches back to back when records arrive),
``0x2`` the same with ``spark.streaming.concurrentJobs=2`` (the next batch planned and run while
the previous one runs), a number a fixed interval in seconds. Not yet in ``python -m benchmarks``
and without Structured Streaming's side: both are what issue #30 part 3 still needs (full scale:
``--rate`` 1000, 10000 and 50000, ``--seconds 120``, exactly-once through an offset store).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterable, Sequence

__all__ = ["main"]

PARTITIONS = 4
_producers: dict[str, Any] = {}  # per Python worker: one producer per bootstrap address


def _write(servers: str, topic: str) -> Any:
    """The output of one partition: every record to ``topic``, its source timestamp kept."""
    def write(records: Iterable[Any]) -> None:
        from kafka import KafkaProducer

        producer = _producers.get(servers)
        if producer is None:
            producer = _producers[servers] = KafkaProducer(bootstrap_servers=servers, linger_ms=0)
        for r in records:
            producer.send(topic, key=r.key, value=r.value, partition=r.partition,
                          headers=[("source-ts", str(r.timestamp).encode())])
        producer.flush()
    return write


def _produce(servers: str, topic: str, rate: int, stop: threading.Event) -> threading.Thread:
    """Send ``rate`` records/s in 10 ms ticks until ``stop``."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=servers, linger_ms=0)

    def run() -> None:
        per_tick, sent, started = rate / 100.0, 0, time.monotonic()
        while not stop.wait(0.01):
            due = int((time.monotonic() - started) * 100 * per_tick)
            for n in range(sent, due):
                producer.send(topic, value=b"x" * 100, partition=n % PARTITIONS)
            sent = max(sent, due)
        producer.flush()
        producer.close()

    thread = threading.Thread(target=run, name="latency-producer", daemon=True)
    thread.start()
    return thread


def _latencies(servers: str, topic: str, since_ms: int) -> list[int]:
    """Append time minus source time of every output record whose source is after ``since_ms``."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False,
                             consumer_timeout_ms=3000)
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    out = []
    for record in consumer:
        source = int(dict(record.headers)["source-ts"])
        if source >= since_ms:
            out.append(record.timestamp - source)
    consumer.close()
    return out


def run_one(sc: Any, cluster: Any, trigger: str, rate: int, seconds: float,
            warmup: float) -> dict[str, Any]:
    """One configuration: its own input and output topics, stream and producer."""
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from dstream_kafka.streaming import StreamingContext

    tag = uuid.uuid4().hex[:8]
    source, sink = f"lat-in-{tag}", f"lat-out-{tag}"
    cluster.create_topic(source, partitions=PARTITIONS)
    cluster.create_topic(sink, partitions=PARTITIONS,
                         config={"message.timestamp.type": "LogAppendTime"})
    concurrent = "2" if trigger.endswith("x2") else "1"
    sc._conf.set("spark.streaming.concurrentJobs", concurrent)
    interval = float(trigger.removesuffix("x2"))
    ssc = StreamingContext(sc, 0 if interval == 0 else interval)
    servers = cluster.bootstrap_servers
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe(
            [source], {"bootstrap.servers": servers, "group.id": f"lat-{tag}",
                       "auto.offset.reset": "earliest", "fetch.max.wait.ms": 10}))
    write = _write(servers, sink)
    stream.foreachRDD(lambda rdd: rdd.foreachPartition(write))
    ssc.start()
    # Warm-up: the first batch spawns the Python workers, their consumers and producers (about
    # 10 s here); the window starts once a batch with a record has completed.
    cluster.produce(source, [b"warm-up"])
    deadline = time.monotonic() + 180
    while not any(p.numRecords for p in stream.recentProgress) and time.monotonic() < deadline:
        time.sleep(0.1)
    stop = threading.Event()
    started_ms = int(time.time() * 1000)
    producer = _produce(servers, source, rate, stop)
    time.sleep(seconds)  # the measured window: the workload's length, not a synchronisation
    stop.set()
    producer.join()
    time.sleep(2.0)  # let the last records through before the stop (benchmark drain time)
    progress = list(stream.recentProgress)
    batches = len(progress)
    if os.environ.get("LATENCY_DEBUG"):
        for p in progress:
            print(p.batchTime, p.numRecords, p.planMs, p.schedulingDelay, p.processingDelay,
                  p.commitMs, file=sys.stderr)
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
    sc._conf.set("spark.streaming.concurrentJobs", "1")
    values = sorted(_latencies(servers, sink, started_ms + int(warmup * 1000)))
    return {"trigger": trigger, "records": len(values), "batches": batches,
            "p50": statistics.median(values) if values else None,
            "p99": values[min(len(values) - 1, int(0.99 * len(values)))] if values else None,
            "max": values[-1] if values else None}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.latency",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1000, help="records/s")
    parser.add_argument("--seconds", type=float, default=20.0, help="producing time per row")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds dropped per row")
    parser.add_argument("--triggers", default="0,0x2,0.25",
                        help="comma-separated: 0, 0x2 (two concurrent jobs) or an interval in s")
    args = parser.parse_args(argv)
    from pyspark import SparkContext

    from benchmarks.broker import start_broker
    from dstream_kafka.spark_settings import local_spark_conf

    print(f"loadavg before: {Path('/proc/loadavg').read_text().strip()} (cores: {os.cpu_count()})")
    cluster = start_broker()
    try:
        sc = SparkContext.getOrCreate(local_spark_conf("local[2]", "latency"))
        try:
            print(f"Kafka to Kafka latency, ms ({args.rate} records/s, {PARTITIONS} partitions, "
                  f"{args.seconds:.0f} s per row, first {args.warmup:.0f} s dropped, at-least-once)")
            print("| trigger | records | batches | p50 | p99 | max |")
            print("|---|---|---|---|---|---|")
            for trigger in [t for t in args.triggers.split(",") if t]:
                row = run_one(sc, cluster, trigger, args.rate, args.seconds, args.warmup)
                print(f"| {row['trigger']} | {row['records']} | {row['batches']} | {row['p50']} | "
                      f"{row['p99']} | {row['max']} |", flush=True)
        finally:
            sc.stop()
    finally:
        cluster.stop()
    print(f"loadavg after: {Path('/proc/loadavg').read_text().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
