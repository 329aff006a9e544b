"""Kafka to Kafka: exactly-once against at-least-once output on the same data (a skeleton).

Usage (from the repository root; small scale first)::

    .venv/bin/python -m benchmarks.kafka_output --records 20000 --partitions 4 --repetitions 1

It starts one local broker, fills an input topic, and for every round writes the whole input
once per guarantee (``at-least-once``, ``exactly-once``) and backend, in the same order
(ABAB; the first ``--warmup`` rounds are left out of the medians), each into a fresh output
topic: ``KafkaUtils.createRDD`` over the input's ranges,
``map`` to ``(key, value)`` pairs, :meth:`~dstream_kafka.KafkaOutput.write` (one task, one
producer and, for exactly-once, one transaction per input partition). It prints records/s per
run and the median per configuration, and checks that a ``read_committed`` reader of every
output topic sees exactly the input's record count.

Not yet here (the issue's full benchmark): end-to-end latency of a running stream (produce
time to the output's commit), and Structured Streaming's Kafka sink on the same data (needs
the ``spark-sql-kafka`` connector jars, which :mod:`benchmarks.jars` resolves). The full-scale
command will be ``--records 2000000 --partitions 8 --repetitions 5``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from typing import Any

GUARANTEES = ("at-least-once", "exactly-once")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kafka_output",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="input records (default 20000)")
    parser.add_argument("--partitions", type=int, default=4, help="input partitions (default 4)")
    parser.add_argument("--repetitions", type=int, default=1, help="rounds (default 1)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="rounds run first and left out of the medians (default 1: the "
                             "first writes also start the Python workers and consumers)")
    parser.add_argument("--backends", default="kafka-python",
                        help="comma-separated: kafka-python, confluent-kafka")
    parser.add_argument("--value-bytes", type=int, default=100, help="value size (default 100)")
    return parser.parse_args(argv)


def _fill(cluster: Any, topic: str, records: int, partitions: int, value_bytes: int) -> None:
    cluster.create_topic(topic, partitions=partitions)
    value = "x" * value_bytes
    for start in range(0, records, 10_000):
        cluster.produce(topic, [(f"k{i}", value) for i in range(start, min(records, start + 10_000))])


def _read_committed_count(cluster: Any, topic: str) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None,
                             isolation_level="read_committed", enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in cluster.partitions_for(topic)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(parts)
        count = 0
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            count += sum(len(r) for r in consumer.poll(timeout_ms=500).values())
        return count
    finally:
        consumer.close(autocommit=False)


def run_once(sc: Any, cluster: Any, source: str, partitions: int, guarantee: str,
             backend: str) -> dict[str, Any]:
    """Write the whole input once with ``guarantee`` and ``backend``; return the run's row."""
    from dstream_kafka import KafkaOutput, KafkaUtils, LocationStrategies, OffsetRange

    target = f"bench-out-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(target, partitions=partitions)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    params = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
              "isolation.level": "read_committed"}
    ranges = [OffsetRange(source, p, 0, end) for p, end in cluster.end_offsets(source).items()]
    rdd = KafkaUtils.createRDD(sc, params, ranges, LocationStrategies.PreferConsistent)
    output = KafkaOutput({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5},
                         topic=target, guarantee=guarantee, backend=backend)
    started = time.perf_counter()
    written = output.write(rdd.map(lambda r: (r.key, r.value)), source=rdd,
                           groupId=group) if guarantee == "exactly-once" else \
        output.write(rdd.map(lambda r: (r.key, r.value)))
    seconds = time.perf_counter() - started
    seen = _read_committed_count(cluster, target)
    return {"guarantee": guarantee, "backend": backend, "records": written, "seconds": seconds,
            "records_per_s": written / seconds if seconds else 0.0, "read_committed": seen}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark import SparkContext

    from benchmarks.broker import start_broker
    from dstream_kafka.spark_settings import local_spark_conf

    cluster = start_broker()
    sc = SparkContext.getOrCreate(local_spark_conf("local[2]", "bench-kafka-output"))
    sc.setLogLevel("ERROR")
    rows: list[dict[str, Any]] = []
    try:
        source = f"bench-in-{uuid.uuid4().hex[:8]}"
        _fill(cluster, source, args.records, args.partitions, args.value_bytes)
        backends = [b.strip() for b in args.backends.split(",") if b.strip()]
        for round_ in range(args.warmup + args.repetitions):
            for backend in backends:
                for guarantee in GUARANTEES:
                    row = run_once(sc, cluster, source, args.partitions, guarantee, backend)
                    row["round"] = round_
                    row["warmup"] = round_ < args.warmup
                    rows.append(row)
                    print(("warm-up " if row["warmup"] else "") + f"{guarantee:14} {backend:16} {row['records']:>9} records "
                          f"{row['seconds']:8.2f} s {row['records_per_s']:>10.0f} rec/s "
                          f"read_committed={row['read_committed']}", flush=True)
    finally:
        sc.stop()
        cluster.stop()
    print("\nmedian records/s")
    failed = 0
    for backend in {r["backend"] for r in rows}:
        for guarantee in GUARANTEES:
            mine = [r for r in rows if r["backend"] == backend and r["guarantee"] == guarantee
                    and not r["warmup"]]
            failed += sum(r["read_committed"] != args.records for r in rows
                          if r["backend"] == backend and r["guarantee"] == guarantee)
            if mine:
                print(f"{guarantee:14} {backend:16} "
                      f"{statistics.median(r['records_per_s'] for r in mine):>10.0f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
