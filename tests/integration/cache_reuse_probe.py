"""Run in a subprocess by test_consumer_cache.py: consumer reuse across jobs on local[1].

Usage: python cache_reuse_probe.py <bootstrap> <topic> <partitions> <first_until> <second_until>
[<backend>]

With one core there is exactly one Python worker, which serves every task, as one executor
JVM serves every task in Spark; so the worker's cache counters show what a second job reading
the successor ranges costs. Prints one JSON object.
"""

from __future__ import annotations

import json
import sys

from pyspark import SparkContext

from dstream_kafka.read import consumer_cache
from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.spark_settings import local_spark_conf


def main() -> None:
    bootstrap, topic, partitions, first, second = sys.argv[1:6]
    backend = sys.argv[6] if len(sys.argv) > 6 else "kafka-python"
    parts, first, second = int(partitions), int(first), int(second)
    sc = SparkContext(
        conf=local_spark_conf(
            "local[1]",
            "cache-reuse-probe",
            extra={
                "spark.streaming.kafka.consumer.poll.ms": "10000",
                "spark.streaming.kafka.consumer.backend": backend,
            },
        )
    )
    sc.setLogLevel("ERROR")
    params = {"bootstrap.servers": bootstrap, "group.id": "probe"}

    def worker_stats() -> dict:
        return sc.parallelize([0], 1).map(lambda _: consumer_cache.stats()).collect()[0]

    def read(start: int, until: int) -> list[int]:
        rdd = KafkaUtils.createRDD(
            sc, params, [OffsetRange(topic, p, start, until) for p in range(parts)]
        )
        return rdd.map(lambda r: r.offset).collect()

    try:
        out = {"before": worker_stats()}
        out["first"] = read(0, first)
        out["after_first"] = worker_stats()
        out["second"] = read(first, second)
        out["after_second"] = worker_stats()
        out["jump"] = read(0, 1)
        out["after_jump"] = worker_stats()
        print(json.dumps(out))
    finally:
        sc.stop()


if __name__ == "__main__":
    main()
