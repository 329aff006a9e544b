"""The consumer-cache counters of a Python worker, and their sum over every executor.

Each process counts what its consumers and cache do (:data:`COUNTERS`; thread-safe). The
executors' counters reach the driver the way Spark's task metrics do, with the tasks' results:
every task of a Kafka RDD that reads its ranges to the end adds what its worker's counters
moved by during the task (:func:`report_cache_counters`) to one Spark accumulator per
SparkContext (:func:`cache_accumulator`), so :func:`executor_cache_counters` is their sum over
every executor and worker, with no extra job. Prometheus and the Streaming page read that sum
(:mod:`dstream_kafka.ui.metrics`); this module serves the read path and imports nothing of ``ui``.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Mapping
from typing import Any

from pyspark.accumulators import AccumulatorParam

__all__ = [
    "COUNTERS",
    "CacheCountersParam",
    "bump",
    "cache_accumulator",
    "counters_snapshot",
    "executor_cache_counters",
    "report_cache_counters",
    "reset_counters",
]

#: Names of the per-process counters, as :func:`counters_snapshot` reports them.
COUNTERS = ("hits", "misses", "creations", "closes", "evictions", "seeks", "polls", "records",
            "prepositions")
_counters = dict.fromkeys(COUNTERS, 0)
_counter_lock = threading.Lock()

# Its own lock: creating the accumulator must not wait for a counter update, nor the reverse.
_accumulator_lock = threading.Lock()
_accumulator: tuple[Any, Any] | None = None  # (SparkContext, its cache-counter accumulator)


def bump(name: str, n: int = 1) -> None:
    """Add ``n`` to counter ``name`` (thread-safe)."""
    with _counter_lock:
        _counters[name] += n


def counters_snapshot() -> dict[str, int]:
    """Return a copy of the counters of this process."""
    with _counter_lock:
        return dict(_counters)


def reset_counters() -> None:
    """Set every counter of this process to zero."""
    with _counter_lock:
        for name in _counters:
            _counters[name] = 0


class CacheCountersParam(AccumulatorParam[dict[str, int]]):
    """Adds consumer-cache counter dicts key by key."""

    def zero(self, value: dict[str, int]) -> dict[str, int]:
        return dict.fromkeys(COUNTERS, 0)

    def addInPlace(self, value1: dict[str, int], value2: dict[str, int]) -> dict[str, int]:
        for name, n in value2.items():
            value1[name] = value1.get(name, 0) + n
        return value1


def cache_accumulator(sc: Any) -> Any:
    """Driver side: the accumulator of ``sc`` that Kafka RDD tasks add their consumer-cache
    counters to."""
    global _accumulator
    with _accumulator_lock:
        if _accumulator is None or _accumulator[0] is not sc:
            _accumulator = (sc, sc.accumulator(dict.fromkeys(COUNTERS, 0), CacheCountersParam()))
        return _accumulator[1]


def executor_cache_counters() -> dict[str, int]:
    """Driver side: the consumer-cache counters of every executor's Python workers, summed
    (hits, misses, creations, closes, evictions, seeks, polls, records), for the tasks that
    read their ranges to the end; zeros before any Kafka RDD ran."""
    current = _accumulator
    values: Mapping[str, int] = current[1].value if current is not None else {}
    return {name: int(values.get(name, 0)) for name in COUNTERS}


def report_cache_counters(accumulator: Any, before: Mapping[str, int]) -> Generator[Any, None, None]:
    """Executor side: a reader that yields nothing and, once reached (every range before it
    was read to the end), adds what this worker's counters moved by since ``before``."""
    after = counters_snapshot()
    accumulator.add({name: after[name] - before.get(name, 0) for name in COUNTERS})
    yield from ()
