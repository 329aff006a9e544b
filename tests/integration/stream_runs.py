"""Helpers of the tests that run a direct stream: start it and collect its batches; ``_params``,
``_values``, ``_running`` and ``_members`` serve the stream-and-broker tests of issue #18 (group
leave, assignment wait, start past the log end, deleted topics, broker restarts).

Pytest puts this folder on ``sys.path``; test modules import it as ``from stream_runs import ...``.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from dstream_kafka import KafkaUtils, LocationStrategies

from support import STRING_DESERIALIZER, wait_until

BATCH = 0.2  # seconds


def params(kafka: Any, group: str, **extra: Any) -> dict[str, Any]:
    """kafkaParams for ``group``: string values, ``auto.offset.reset=latest`` unless ``extra``."""
    return {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
            "value.deserializer": STRING_DESERIALIZER, "auto.offset.reset": "latest", **extra}


class Run:
    """A started direct stream whose batches are collected: values and ranges, thread-safe."""

    def __init__(self, context: Any, stream: Any) -> None:
        self.context = context
        self.stream = stream
        self.lock = threading.Lock()
        self.values: list[str] = []
        self.ranges: list[Any] = []
        self.batches = 0
        stream.foreachRDD(self._add)

    def _add(self, rdd: Any) -> None:
        values = rdd.map(lambda r: r.value).collect()
        with self.lock:
            self.values.extend(values)
            self.ranges.extend(r for r in rdd.offsetRanges() if r.count())
            self.batches += 1

    def read(self) -> list[str]:
        with self.lock:
            return list(self.values)

    def wait_for(self, count: int, what: str = "the records") -> list[str]:
        """Wait until ``count`` values were read; return them sorted."""
        wait_until(lambda: len(self.read()) >= count, f"{count} {what}")
        return sorted(self.read())

    def wait_batches(self, count: int) -> None:
        start = self.batches
        wait_until(lambda: self.batches >= start + count, f"{count} more batches")


def start_run(make_ssc: Callable[..., Any], strategy: Any, batch: float = BATCH,
              **stream_args: Any) -> Run:
    """Create a context and a direct stream over ``strategy``, collect it and start it."""
    context = make_ssc(batch)
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent, strategy,
                                           **stream_args)
    run = Run(context, stream)
    context.start()
    return run


def values(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i:04d}" for i in range(count)]


def _params(servers: str, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": servers, "group.id": group, "auto.offset.reset": "earliest",
            "value.deserializer": STRING_DESERIALIZER, **extra}


def _values(stream: Any) -> list[str]:
    seen: list[str] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: r.value).collect()))
    return seen


# -- item 7: a topic deleted under a running stream --------------------------------------------
def _running(kafka: Any, make_ssc: Any, strategy: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    ssc = make_ssc()
    seen = _values(KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                                 strategy, **kwargs))
    ssc.start()
    return ssc, seen


def _members(kafka: Any, group: str) -> int:
    info = kafka.admin().describe_groups([group])[group]
    return len(info.get("members") or [])
