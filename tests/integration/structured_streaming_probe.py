"""Run in a subprocess by test_offsets_structured_streaming.py: one real Structured Streaming query.

Usage: python structured_streaming_probe.py <bootstrap> <topic> <checkpoint dir>

Reads ``topic`` with Spark's own Kafka source (the spark-sql-kafka connector jars, resolved as
the benchmarks resolve them) from ``startingOffsets=earliest`` or, on a restart, from the
checkpoint, with ``Trigger.AvailableNow``, and prints the (partition, offset) of every record it
read as one JSON list. A subprocess: the connector jars must be on the JVM's class path at
launch, and the tests' shared SparkContext has none.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main() -> None:
    from pyspark.sql import SparkSession

    from benchmarks.jars import sql_kafka_jars
    from dstream_kafka.spark_settings import local_spark_conf

    bootstrap, topic, checkpoint = sys.argv[1:4]
    _, jars = sql_kafka_jars()
    conf = local_spark_conf("local[1]", app_name="ss-probe", extra={
        "spark.jars": ",".join(str(j) for j in jars), "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "1", "spark.driver.memory": "512m"})
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    read: list[tuple[int, int]] = []

    def per_batch(batch: Any, batch_id: int) -> None:
        read.extend((int(r["partition"]), int(r["offset"])) for r in batch.select("partition", "offset").collect())

    df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
          .option("subscribe", topic).option("startingOffsets", "earliest").load())
    query = (df.writeStream.foreachBatch(per_batch).trigger(availableNow=True)
             .option("checkpointLocation", checkpoint).start())
    query.awaitTermination()
    print(json.dumps(sorted(read)))
    spark.stop()


if __name__ == "__main__":
    main()
