"""Contenders: one module per family, and the registry the harness schedules from.

Each contender runs in a fresh process per repetition. Python contenders run in
``python -m benchmarks.runner SPEC`` (:mod:`benchmarks.runner`); JVM contenders are a ``java``
command built by their module. Every contender writes one JSON result file with at least
``records``, ``seconds`` (the timed region) and, when it can measure it, ``cpu_seconds`` of its
own process tree over that region.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Contender", "CONTENDERS", "WORKLOADS", "contenders_for"]

#: Workload names and what they measure.
WORKLOADS = {
    "drain": "1. drain and count every record of the topic",
    "json": "2. json.loads of each value and a field sum",
}


@dataclass(frozen=True)
class Contender:
    """One line of the results: a way of reading the topic, for some workloads."""

    name: str
    family: str  # dstream_kafka, structured, spark-dstream, raw, limit
    workloads: tuple[str, ...]
    kind: str  # "python" (benchmarks.runner) or "java"
    description: str


CONTENDERS: dict[str, Contender] = {c.name: c for c in [
    Contender("dk-rdd", "dstream_kafka", ("drain", "json"), "python",
              "dstream_kafka KafkaUtils.createRDD over the whole topic, mapPartitions"),
    Contender("dk-stream", "dstream_kafka", ("drain", "json"), "python",
              "dstream_kafka direct stream, ~10 batches (maxRatePerPartition), foreachRDD"),
    Contender("ss-batch", "structured", ("drain",), "python",
              "Structured Streaming batch read, load().count()"),
    Contender("ss-stream", "structured", ("drain",), "python",
              "Structured Streaming availableNow + foreachBatch count, ~10 batches"),
    Contender("ss-udf", "structured", ("json",), "python",
              "Structured Streaming batch read, Python UDF json.loads + sum"),
    Contender("ss-native", "structured", ("json",), "python",
              "Structured Streaming batch read, from_json + sum (no Python)"),
    Contender("java-dstream-rdd", "spark-dstream", ("drain",), "java",
              "Spark's kafka010 KafkaUtils.createRDD (Java), mapPartitions count"),
    Contender("java-dstream-stream", "spark-dstream", ("drain",), "java",
              "Spark's kafka010 createDirectStream (Java), ~10 batches, foreachRDD count"),
    Contender("raw-kafka-python", "raw", ("drain", "json"), "python",
              "kafka-python assign/seek/poll loop, 2 processes"),
    Contender("raw-confluent", "raw", ("drain", "json"), "python",
              "confluent-kafka assign/consume loop, 2 processes"),
    Contender("kafka-perf", "limit", ("drain",), "java",
              "Kafka's ConsumerPerformance tool (fetch.nMsg.sec), the broker read limit"),
]}


def contenders_for(workload: str, selected: list[str] | None = None) -> list[Contender]:
    """Return the contenders that run ``workload``, in registry order, filtered by name."""
    return [c for c in CONTENDERS.values()
            if workload in c.workloads and (not selected or c.name in selected)]
