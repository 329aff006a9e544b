"""The driver's planning cost per batch at many partitions and topics (workload 7, ``planning``).

Part of the adapter (:mod:`benchmarks.adapter` holds the shared helpers): with it, the only
modules that touch dstream_kafka's API. :func:`planning_configs` is pure (the harness creates the
topics it names); :func:`stream_planning` runs in the contender's child process.

Every configuration is one direct stream over idle topics, as users subscribe: ``Subscribe`` to
one topic of 1 to 1,000 partitions, or ``SubscribePattern`` over 50 topics. Each batch plans
(latest offsets of every partition, rate limits, one RDD of one Spark partition per Kafka
partition), counts its ranges (no Spark job: the topics are idle) and commits them with
``commitAsync``, so the rows measure what the driver does per batch as partitions grow.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from benchmarks.adapter import kafka_params, stream_overhead

__all__ = ["PLANNING_PREFIX", "planning_configs", "stream_planning"]

#: Name prefix of the planning workload's topics.
PLANNING_PREFIX = "bench-planning"


def planning_configs(partition_counts: list[int], topics: int,
                     topic_partitions: int) -> dict[str, dict[str, Any]]:
    """The planning configurations and the topics each one reads, by configuration name.

    ``p<N>``: one topic of N partitions (``Subscribe``); ``t<T>``: T topics of
    ``topic_partitions`` partitions each, matched by one pattern (``SubscribePattern``), left
    out when ``topics`` is 0.
    """
    configs: dict[str, dict[str, Any]] = {
        f"p{n}": {"topics": {f"{PLANNING_PREFIX}-p{n}": n}, "partitions": n}
        for n in sorted(set(partition_counts))}
    if topics:
        base = f"{PLANNING_PREFIX}-t{topics}x{topic_partitions}"
        configs[f"t{topics}"] = {
            "topics": {f"{base}-{i:03d}": topic_partitions for i in range(topics)},
            "pattern": base + r"-\d{3}", "partitions": topics * topic_partitions}
    return configs


def _memory_probe() -> Callable[[], dict[str, float]]:
    """Resident memory of the driver (this Python process, its JVM) and its Python workers, and
    the driver's TCP connections, in each batch's row; nothing without psutil."""
    try:
        import psutil
    except ImportError:
        return dict
    from benchmarks.monitor import role_usage, tree_roles

    me = psutil.Process(os.getpid())
    seen: dict[int, bool] = {}

    def probe() -> dict[str, float]:
        roles = tree_roles(me, seen)
        connections = getattr(me, "net_connections", None) or me.connections
        return {"driver_py_mb": me.memory_info().rss / 2**20,
                "driver_jvm_mb": role_usage(roles["driver_jvm"])["rss_mb"],
                "workers_mb": role_usage(roles["workers"])["rss_mb"],
                "driver_tcp": float(len(connections(kind="tcp")))}

    return probe


def stream_planning(sc: Any, bootstrap: str, config: dict[str, Any], batch_seconds: float,
                    batches: int, warmup: int = 2, timeout: float = 300.0) -> dict[str, Any]:
    """Run one planning configuration (see :func:`planning_configs`): rows of milliseconds per
    batch as :func:`benchmarks.adapter.stream_overhead` gives them (``plan``, ``plan_offsets``,
    ``plan_rdd``, ``commit``...), plus the memory and connections of :func:`_memory_probe`."""
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

    def make_stream(ssc: Any, group: str) -> Any:
        params = kafka_params(bootstrap, group)
        if "pattern" in config:
            strategy = ConsumerStrategies.SubscribePattern(config["pattern"], params)
        else:
            strategy = ConsumerStrategies.Subscribe(sorted(config["topics"]), params)
        return KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent, strategy)

    out = stream_overhead(sc, bootstrap, "", [], batch_seconds, "count", batches, warmup, timeout,
                          make_stream=make_stream, probe=_memory_probe())
    out["params"] = {"partitions": config["partitions"], "topics": len(config["topics"]),
                     "strategy": "SubscribePattern" if "pattern" in config else "Subscribe",
                     "interval": batch_seconds, "output": "count"}
    return out
