"""The verdict names the slowest Kafka RDD task by its wall time, measured on the executors."""

from __future__ import annotations

import time
from typing import Any

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, config

from support import wait_until

SLOW_S = 0.03  # per record of partition 1: 40 records, 1.2 s for its task


def test_the_evidence_names_the_partition_whose_records_are_slow_to_process_as_the_slowest_task(
        kafka: Any, make_ssc: Any, unique: Any, spark_conf: Any) -> None:
    spark_conf(config.LAG_INTERVAL, "300ms")
    topic = unique("skew")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [b"x"] * 40, partition=0)
    kafka.produce(topic, [b"x"] * 40, partition=1)
    context = make_ssc(0.5)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))
    slow_s = SLOW_S  # a closure, so that it pickles by value (executors cannot import tests)

    def slow_on_partition_1(record: Any) -> int:
        if record.partition == 1:
            time.sleep(slow_s)  # the user's processing, pipelined after the read in the task
        return int(record.offset)
    stream.foreachRDD(lambda rdd: rdd.map(slow_on_partition_1).count())
    context.start()
    wait_until(lambda: sum(p.numRecords for p in stream.recentProgress) >= 80,
               what="the 80 records read and processed")

    def slowest() -> str | None:
        lines = [e for e in stream.lag.verdict().evidence
                 if e.startswith("slowest task of the last batch")]
        return lines[0] if lines else None
    wait_until(lambda: slowest() is not None, what="task times in the verdict's evidence")
    line = slowest()
    context.stop(stopSparkContext=False, stopGraceFully=False)

    assert line is not None
    assert line.startswith(f"slowest task of the last batch: {topic}-1 took ")
    took = float(line.split(" took ")[1].split(" s")[0])
    assert took >= 40 * SLOW_S * 0.9  # the sleeps of the user's map count (rounded to 0.1 s)
