"""Run in a subprocess by test_frame_vs_spark.py: our DataFrames beside Spark's Kafka source.

Usage: python kafka_dataframe_probe.py <cases.json>

``cases.json`` holds ``{"bootstrap": ..., "cases": {name: {"ranges": [[topic, partition, from,
until], ...], "includeHeaders": bool, "params": {...}}}}``. For every case this reads the ranges
with ``spark.read.format("kafka")`` (one range per partition: assign, startingOffsets,
endingOffsets) and with ``KafkaUtils.createDataFrame`` on each executor backend, and prints one
JSON object: per case, each reader's schema (``StructType.json()``) and rows (bytes as hex,
timestamps as ISO text). A subprocess: the connector jars must be on the JVM's class path at
launch, and the tests' shared SparkContext has none.
"""

from __future__ import annotations

import datetime
import json
import sys
from typing import Any

BACKENDS = ("kafka-python", "confluent-kafka")


def _plain(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return value.hex()
    if isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    return value


def _rows(df: Any) -> list[Any]:
    return [_plain(list(row)) for row in df.collect()]


def _spark_read(spark: Any, bootstrap: str, case: dict[str, Any]) -> Any:
    assign: dict[str, list[int]] = {}
    starts: dict[str, dict[str, int]] = {}
    ends: dict[str, dict[str, int]] = {}
    for topic, partition, start, until in case["ranges"]:
        assign.setdefault(topic, []).append(partition)
        starts.setdefault(topic, {})[str(partition)] = start
        ends.setdefault(topic, {})[str(partition)] = until
    reader = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("assign", json.dumps(assign)).option("startingOffsets", json.dumps(starts))
              .option("endingOffsets", json.dumps(ends))
              .option("includeHeaders", str(case["includeHeaders"]).lower()))
    for key, value in case["params"].items():
        reader = reader.option(f"kafka.{key}", value)
    return reader.load().orderBy("topic", "partition", "offset")


def main() -> None:
    from pyspark.sql import SparkSession

    from benchmarks.jars import sql_kafka_jars
    from dstream_kafka import KafkaUtils, OffsetRange
    from dstream_kafka.spark_settings import local_spark_conf

    spec = json.loads(open(sys.argv[1]).read())
    bootstrap = spec["bootstrap"]
    _, jars = sql_kafka_jars()
    conf = local_spark_conf("local[2]", app_name="df-probe", extra={
        "spark.jars": ",".join(str(j) for j in jars), "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "1", "spark.driver.memory": "512m",
        "spark.sql.session.timeZone": "UTC", "spark.streaming.kafka.consumer.poll.ms": "10000"})
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    out: dict[str, Any] = {}
    for name, case in spec["cases"].items():
        theirs = _spark_read(spark, bootstrap, case)
        result = {"spark": {"schema": theirs.schema.json(), "rows": _rows(theirs)}}
        params = {"bootstrap.servers": bootstrap, "group.id": f"probe-{name}", **case["params"]}
        ranges = [OffsetRange(*r) for r in case["ranges"]]
        for backend in BACKENDS:
            spark.sparkContext._conf.set("spark.streaming.kafka.consumer.backend", backend)
            ours = KafkaUtils.createDataFrame(spark, params, ranges,
                                              includeHeaders=case["includeHeaders"])
            result[backend] = {"schema": ours.schema.json(), "rows": _rows(ours),
                               "partitions": ours.rdd.getNumPartitions()}
        out[name] = result
    print(json.dumps(out))
    spark.stop()


if __name__ == "__main__":
    main()
