"""The PySpark contenders: dstream_kafka (through :mod:`benchmarks.adapter`) and Structured Streaming.

All of them run in ``local[2]`` with the same SparkConf: the project's low-overhead settings
(:data:`dstream_kafka.services.spark.LOW_OVERHEAD_SETTINGS`: Unix-socket workers, frozen daemon,
worker reuse) plus, for Structured Streaming, the Kafka connector jars via ``spark.jars``. The
timed region starts after the SparkContext is up and a trivial Python job has started the
workers; it includes planning, consumer creation and reading.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from typing import Any

from benchmarks.monitor import tree_cpu_seconds

__all__ = ["run_pyspark"]

#: Streaming drains are split into about this many batches.
STREAM_BATCHES = 10
#: Batch interval of the streaming drains: short, so processing, not the clock, sets the pace.
STREAM_BATCH_SECONDS = 0.2


def _per_batch_per_partition(topic: dict[str, Any]) -> int:
    return max(1, math.ceil(topic["records"] / topic["partitions"] / STREAM_BATCHES))


def _session(spec: dict[str, Any], with_kafka_jars: bool) -> tuple[Any, dict[str, Any]]:
    from pyspark.sql import SparkSession

    from dstream_kafka.services.spark import local_spark_conf

    extra: dict[str, Any] = {"spark.driver.memory": "1g"}
    info: dict[str, Any] = {}
    if with_kafka_jars:
        from benchmarks.jars import sql_kafka_jars

        version, jars = sql_kafka_jars()
        extra["spark.jars"] = ",".join(str(j) for j in jars)
        info["connector"] = f"spark-sql-kafka-0-10_2.13:{version}"
    if spec["contender"] == "dk-stream":
        rate = _per_batch_per_partition(spec["topic"]) / STREAM_BATCH_SECONDS
        extra["spark.streaming.kafka.maxRatePerPartition"] = str(int(math.ceil(rate)))
    conf = local_spark_conf(app_name=f"bench-{spec['contender']}", extra=extra)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    # Warm-up: start the Python daemon and workers, as a long-running application has them.
    spark.sparkContext.parallelize(range(4), 2).map(lambda x: x).count()
    return spark, info


def _kafka_reader(spark: Any, bootstrap: str, topic: str, stream: bool) -> Any:
    reader = spark.readStream if stream else spark.read
    return (reader.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest"))


def _ss_batch(spark: Any, spec: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    df = _kafka_reader(spark, spec["bootstrap"], spec["topic"]["name"], False) \
        .option("endingOffsets", "latest").load()
    name = spec["contender"]
    if name == "ss-batch":
        return {"records": df.count()}
    if name == "ss-udf":
        @F.udf(returnType=LongType())
        def field_sum(value: bytes) -> int:
            doc = json.loads(value)
            return doc["a"] + doc["b"]

        row = df.select(field_sum("value").alias("s")).agg(F.count("*"), F.sum("s")).first()
    else:  # ss-native
        parsed = F.from_json(F.col("value").cast("string"), "a INT, b INT")
        row = df.select(parsed.alias("d")).agg(
            F.count("*"), F.sum(F.col("d.a").cast("long") + F.col("d.b").cast("long"))).first()
    return {"records": int(row[0]), "checksum": int(row[1])}


def _ss_stream(spark: Any, spec: dict[str, Any], workdir: str) -> dict[str, Any]:
    topic = spec["topic"]
    per_trigger = _per_batch_per_partition(topic) * topic["partitions"]
    df = _kafka_reader(spark, spec["bootstrap"], topic["name"], True) \
        .option("maxOffsetsPerTrigger", str(per_trigger)).load()
    counts: list[int] = []

    def per_batch(batch_df: Any, batch_id: int) -> None:
        counts.append(batch_df.count())

    t0 = time.perf_counter()
    query = (df.writeStream.foreachBatch(per_batch).trigger(availableNow=True)
             .option("checkpointLocation", f"{workdir}/ss-checkpoint").start())
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    durations = [p.get("durationMs", {}) for p in (json.loads(x.json) for x in query.recentProgress)]
    return {"records": sum(counts), "seconds": seconds, "extra": {
        "batches": len([c for c in counts if c]), "maxOffsetsPerTrigger": per_trigger,
        "trigger_execution_ms": [d.get("triggerExecution") for d in durations]}}


def run_pyspark(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one PySpark contender described by ``spec`` and return its raw result."""
    from benchmarks import adapter

    name = spec["contender"]
    topic = spec["topic"]
    ends = {int(p): int(e) for p, e in topic["end_offsets"].items()}
    spark, info = _session(spec, with_kafka_jars=name.startswith("ss-"))
    workdir = tempfile.mkdtemp(prefix="bench-ss-")
    try:
        cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
        if name == "dk-rdd":
            out = adapter.drain_rdd(spark.sparkContext, spec["bootstrap"], topic["name"], ends,
                                    spec["workload"])
        elif name == "dk-stream":
            out = adapter.stream_drain(spark.sparkContext, spec["bootstrap"], topic["name"], ends,
                                       spec["workload"], STREAM_BATCH_SECONDS)
        elif name == "ss-stream":
            out = _ss_stream(spark, spec, workdir)
        else:
            out = _ss_batch(spark, spec)
        seconds = time.perf_counter() - t0
        cpu = tree_cpu_seconds() - cpu0
    finally:
        spark.stop()
    result = {"records": out.pop("records"), "checksum": out.pop("checksum", None),
              "seconds": out.pop("seconds", seconds), "cpu_seconds": cpu}
    result["extra"] = {**info, **out.pop("extra", {}), **out}
    return result
