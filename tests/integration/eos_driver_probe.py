"""Run in a subprocess by test_kafka_output_fencing.py: a second driver of an exactly-once
application.

Usage: python eos_driver_probe.py <bootstrap> <source> <target> <group> <records> <backend>

Reads ``source``-0 with a direct stream (``Assign``) of group ``group`` (read_committed) and copies it to
``target`` through an exactly-once ``KafkaOutput`` (application id: the group), as the test's
own driver does; stops once the group's committed offset of ``source``-0 is ``records``, prints
``DONE`` and exits 0. Its start initialises the transactional id of ``source``-0, which fences
the other driver's producer and aborts its open transaction.
"""

from __future__ import annotations

import sys
import time

from kafka import KafkaConsumer, TopicPartition
from pyspark import SparkContext

from dstream_kafka import ConsumerStrategies, KafkaOutput, KafkaUtils, LocationStrategies
from dstream_kafka.spark_settings import local_spark_conf
from dstream_kafka.streaming import StreamingContext


def main() -> int:
    bootstrap, source, target, group, records, backend = sys.argv[1:7]
    sc = SparkContext(conf=local_spark_conf("local[1]", "eos-second-driver", extra={
        "spark.streaming.kafka.consumer.poll.ms": "10000",
        "spark.streaming.kafka.consumer.backend": backend,
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}))
    sc.setLogLevel("ERROR")
    ssc = StreamingContext(sc, 0.5)
    params = {"bootstrap.servers": bootstrap, "group.id": group,
              "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    # Assign, as the test's driver: two drivers subscribed with one group would also revoke
    # each other's partitions (PartitionsRevokedError), which is not what is tested here.
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Assign([TopicPartition(source, 0)], params))
    KafkaOutput({"bootstrap.servers": bootstrap}, topic=target,
                guarantee="exactly-once").writeStream(stream.map(lambda r: (r.key, r.value)))
    offsets = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                            enable_auto_commit=False, isolation_level="read_committed")
    ssc.start()
    try:
        deadline = time.monotonic() + 240
        while (offsets.committed(TopicPartition(source, 0)) or 0) < int(records):
            if ssc.awaitTerminationOrTimeout(0.5) or time.monotonic() > deadline:
                return 1
        print("DONE", flush=True)
        return 0
    finally:
        offsets.close(autocommit=False)
        ssc.stop(stopSparkContext=True, stopGraceFully=False)


if __name__ == "__main__":
    sys.exit(main())
