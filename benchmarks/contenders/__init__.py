"""Contenders: one module per family, and the registry the harness schedules from.

Each contender runs in a fresh process per repetition. Python contenders run in
``python -m benchmarks.runner SPEC`` (:mod:`benchmarks.runner`); JVM contenders are a ``java``
command built by their module. Every contender writes one JSON result file with at least
``records``, ``seconds`` (the timed region) and, when it can measure it, ``cpu_seconds`` of its
own process tree over that region.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Contender", "CONTENDERS", "WORKLOADS", "LATENCY_WORKLOADS", "contenders_for",
           "FAST_BACKEND_CONF", "CLUSTER_SUFFIX", "CONNECT_SUFFIX", "MULTICORE_PREFIX", "base_name", "is_fast",
           "EO_BATCH_SECONDS", "EO_RECORDS_PER_PARTITION",
           "overhead_batches", "workload_kind"]

#: Workload names and what they measure.
WORKLOADS = {
    "drain": "1. drain and count every record of the topic",
    "json": "2. json.loads of each value and a field sum",
    "overhead": "3. empty-batch overhead on an idle topic at 0.1-1 s intervals, per phase",
    "steady": "4. steady producer rate steps: end-to-end latency p50/p99 and the highest rate held",
    "exactly-once": "5. offset store cost per batch: PostgreSQL exactly-once sink and the other stores",
    "partitions": "6. drain throughput, consumers, connections and memory at 1, 16, 64 and 256 "
                  "partitions",
    "planning": "7. the driver's planning per batch at 1-1,000 partitions and over 50 topics "
                "(SubscribePattern): latest offsets, RDD creation, commitAsync",
    "multicore": "8. a streaming drain on one standalone executor of 1, 2 and 4 cores: consumer "
                 "creations, seeks, consumers and connections per executor, records/s",
    "soak": "9. 30 minutes of steady input through the PostgreSQL exactly-once store: memory, fds, "
            "threads, consumers and connections after the warm-up, exactly-once at the end "
            "(only when named in --workloads)",
    "k2k": "10. Kafka to Kafka end-to-end latency (output LogAppendTime - input CreateTime) at "
           "1k, 10k and 50k records/s: dstream_kafka's Kafka output at-least-once and exactly-once "
           "beside Structured Streaming micro-batch (ProcessingTime 0 and 1 s) and real-time mode; "
           "its variants are benchmarks.latency's, not contenders (only when named in --workloads)",
}

#: Workloads whose runs report per-batch latencies (milliseconds per phase), not throughput.
LATENCY_WORKLOADS = ("overhead", "exactly-once", "planning")
#: Exactly-once workload: batch interval and records per partition per batch (1,000 over 4).
EO_BATCH_SECONDS = 0.5
EO_RECORDS_PER_PARTITION = 250


@dataclass(frozen=True)
class Contender:
    """One line of the results: a way of reading the topic, for some workloads."""

    name: str
    family: str  # dstream_kafka, structured, spark-dstream, raw, limit
    workloads: tuple[str, ...]
    kind: str  # "python" (benchmarks.runner) or "java"
    description: str


CONTENDERS: dict[str, Contender] = {c.name: c for c in [
    Contender("dk-rdd", "dstream_kafka", ("drain", "json", "partitions"), "python",
              "dstream_kafka KafkaUtils.createRDD over the whole topic, mapPartitions"),
    Contender("dk-rdd-fast", "dstream_kafka", ("drain", "json", "partitions"), "python",
              "dk-rdd with spark.streaming.kafka.consumer.backend=confluent-kafka"),
    Contender("dk-df", "dstream_kafka", ("drain",), "python",
              "dstream_kafka KafkaUtils.createDataFrame over the whole topic (Arrow, mapInArrow), "
              "count()"),
    Contender("dk-df-fast", "dstream_kafka", ("drain",), "python",
              "dk-df with spark.streaming.kafka.consumer.backend=confluent-kafka"),
    Contender("dk-df-parquet", "dstream_kafka", ("drain",), "python",
              "dk-df written to Parquet (key, value, topic, partition, offset, timestamp)"),
    Contender("dk-df-parquet-fast", "dstream_kafka", ("drain",), "python",
              "dk-df-parquet with spark.streaming.kafka.consumer.backend=confluent-kafka"),
    Contender("dk-df-connect", "dstream_kafka", ("drain",), "python",
              "dk-df through a Spark Connect session, against a local Connect server started "
              "from PySpark's own jars for the run (local[2], same settings)"),
    Contender("dk-df-fast-connect", "dstream_kafka", ("drain",), "python",
              "dk-df-connect with spark.streaming.kafka.consumer.backend=confluent-kafka"),
    Contender("dk-df-parquet-connect", "dstream_kafka", ("drain",), "python",
              "dk-df-parquet through a Spark Connect session"),
    Contender("dk-df-parquet-fast-connect", "dstream_kafka", ("drain",), "python",
              "dk-df-parquet-connect with spark.streaming.kafka.consumer.backend=confluent-kafka"),
    Contender("dk-stream", "dstream_kafka", ("drain", "json", "overhead", "steady", "exactly-once",
                                             "planning", "soak"),
              "python",
              "dstream_kafka direct stream, ~10 batches (maxRatePerPartition), foreachRDD; "
              "overhead: empty batches per interval and output; steady: one stream through the "
              "rate steps, commitAsync; exactly-once: one stream per store; planning: one "
              "stream per partition count and one over 50 topics; soak: one stream with the "
              "PostgreSQL store for the soak's minutes"),
    Contender("dk-stream-fast", "dstream_kafka", ("drain", "json", "steady"), "python",
              "dk-stream with spark.streaming.kafka.consumer.backend=confluent-kafka"),
    Contender("dk-stream-cluster", "dstream_kafka", ("steady", "multicore"), "python",
              "dk-stream on a Spark standalone cluster on loopback: two workers of one core, so "
              "two executors with one Python worker each; PreferConsistent sends each "
              "partition's task to the same executor every batch (CPU and memory figures "
              "cover the driver only: the executors are the workers' children); multicore: "
              "one executor of 1, 2 or 4 cores, a streaming drain of ~20 batches"),
    Contender("dk-stream-fast-cluster", "dstream_kafka", ("multicore",), "python",
              "dk-stream-cluster with spark.streaming.kafka.consumer.backend=confluent-kafka"),
    Contender("ss-batch", "structured", ("drain", "partitions"), "python",
              "Structured Streaming batch read, load().count()"),
    Contender("ss-parquet", "structured", ("drain",), "python",
              "Structured Streaming batch read written to Parquet (the rival of dk-df-parquet)"),
    Contender("ss-batch-connect", "structured", ("drain",), "python",
              "ss-batch through a Spark Connect session (the connector jars on the server's "
              "class path)"),
    Contender("ss-parquet-connect", "structured", ("drain",), "python",
              "ss-parquet through a Spark Connect session (the rival of dk-df-parquet-connect)"),
    Contender("ss-stream", "structured", ("drain", "overhead", "steady", "exactly-once"), "python",
              "Structured Streaming availableNow + foreachBatch count, ~10 batches; overhead: "
              "processingTime trigger on the idle topic (no batch runs, durationMs per trigger); "
              "steady: processingTime trigger, foreachBatch timestamp histogram; "
              "exactly-once: its checkpoint's offsets + commits logs per batch (walCommit + "
              "commitOffsets), the rival of OffsetStores.checkpoint"),
    Contender("ss-udf", "structured", ("json",), "python",
              "Structured Streaming batch read, Python UDF json.loads + sum"),
    Contender("ss-native", "structured", ("json",), "python",
              "Structured Streaming batch read, from_json + sum (no Python)"),
    Contender("java-dstream-rdd", "spark-dstream", ("drain",), "java",
              "Spark's kafka010 KafkaUtils.createRDD (Java), mapPartitions count"),
    Contender("java-dstream-stream", "spark-dstream", ("drain", "overhead"), "java",
              "Spark's kafka010 createDirectStream (Java), ~10 batches, foreachRDD count; "
              "overhead: empty batches per interval and output (DStreamOverhead.java)"),
    Contender("raw-kafka-python", "raw", ("drain", "json", "partitions"), "python",
              "kafka-python assign/seek/poll loop, 2 processes"),
    Contender("raw-confluent", "raw", ("drain", "json", "partitions"), "python",
              "confluent-kafka assign/consume loop, 2 processes"),
    Contender("kafka-perf", "limit", ("drain",), "java",
              "Kafka's ConsumerPerformance tool (fetch.nMsg.sec), the broker read limit"),
]}


def contenders_for(workload: str, selected: list[str] | None = None) -> list[Contender]:
    """Return the contenders that run ``workload``, in registry order, filtered by name."""
    return [c for c in CONTENDERS.values()
            if workload in c.workloads and (not selected or c.name in selected)]


def overhead_batches(interval: float, seconds: float, min_batches: int) -> int:
    """Measured batches of one overhead configuration: ``seconds`` worth, at least ``min_batches``."""
    if interval <= 0:
        raise ValueError(f"interval must be positive, got {interval!r}")
    return max(int(min_batches), int(math.ceil(seconds / interval - 1e-9)))


#: The Spark conf that selects dstream_kafka's confluent-kafka executor backend (``*-fast``).
FAST_BACKEND_CONF = {"spark.streaming.kafka.consumer.backend": "confluent-kafka"}


#: Suffix of a contender that runs on the benchmark's Spark standalone cluster, not local[2].
CLUSTER_SUFFIX = "-cluster"
#: Suffix of a contender that runs through a Spark Connect session (a local Connect server).
CONNECT_SUFFIX = "-connect"


def _placed(contender: str) -> str:
    """``contender`` without its deployment suffix (``-cluster`` or ``-connect``)."""
    for suffix in (CLUSTER_SUFFIX, CONNECT_SUFFIX):
        if contender.endswith(suffix):
            return contender[:-len(suffix)]
    return contender


def base_name(contender: str) -> str:
    """The contender a variant runs (``dk-rdd-fast`` -> ``dk-rdd``, ``dk-stream-fast-cluster`` ->
    ``dk-stream``, ``dk-df-fast-connect`` -> ``dk-df``)."""
    name = _placed(contender)
    return name[:-len("-fast")] if name.endswith("-fast") else name


def is_fast(contender: str) -> bool:
    """True for a variant on the confluent-kafka backend (``*-fast``, ``*-fast-cluster``,
    ``*-fast-connect``)."""
    return _placed(contender).endswith("-fast")


#: Sub-workloads ``multicore-c<K>``: a streaming drain on one executor of K cores.
MULTICORE_PREFIX = "multicore-c"


def workload_kind(workload: str) -> str:
    """The per-record work of a (sub-)workload: ``partitions-p8`` drains like ``drain``."""
    if workload.startswith("partitions-"):
        return "drain"
    if workload.startswith(MULTICORE_PREFIX):
        return "multicore"
    return workload
