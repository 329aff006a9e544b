"""Executor-side consumer cache: one module-level LRU per Python worker process.

Spark keeps one consumer per (executor group id, topic partition) in each executor JVM
(``KafkaDataConsumer``); PySpark runs tasks in reused Python worker processes, so here the
cache lives in each worker. The rules are Spark's:

* a consumer in use is never shared: a concurrent user of the same key gets a fresh,
  uncached consumer that is closed on release;
* a task retry (``TaskContext.attemptNumber() >= 1``) discards the cached consumer (or marks
  it for close when it is in use) and reads with a fresh, uncached one;
* ``maxCapacity`` is a soft cap: inserting past it closes the least recently used idle
  consumers, never one in use;
* a read with ``use_cache=False`` gets an uncached consumer (direct streams pass
  ``spark.streaming.kafka.consumer.cache.enabled`` here; ``createRDD`` always caches, as
  Spark's does).

Beyond Spark, a cached consumer built from different Kafka parameters than requested (its
fingerprint differs) or another client library (``spark.streaming.kafka.consumer.backend``)
is replaced, and a consumer whose read failed is discarded on release.
``initialCapacity`` and ``loadFactor`` are accepted and validated for compatibility; Python
dicts size themselves. All functions are thread-safe. Counters of this process are read with
:func:`stats`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, NamedTuple

from dstream_kafka.read.backends import DEFAULT_BACKEND
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.read.counters import COUNTERS, bump, counters_snapshot, reset_counters
from dstream_kafka.read.internal_consumer import CacheKey, InternalKafkaConsumer

__all__ = [
    "COUNTERS",
    "CacheKey",
    "CacheSettings",
    "InternalKafkaConsumer",
    "KafkaDataConsumer",
    "acquire",
    "cache_size",
    "cached_consumer",
    "clear",
    "pre_position",
    "release",
    "reset_stats",
    "stats",
]

log = logging.getLogger(__name__)


class CacheSettings(NamedTuple):
    """Cache configuration, read on the driver and shipped with each task.

    Attributes mirror ``spark.streaming.kafka.consumer.cache.initialCapacity`` (16),
    ``.maxCapacity`` (64, a soft cap) and ``.loadFactor`` (0.75). Whether a read uses the
    cache at all (``spark.streaming.kafka.consumer.cache.enabled``) is decided on the driver
    and passed to :func:`acquire` as ``use_cache``, as Spark does.
    """

    initialCapacity: int = 16
    maxCapacity: int = 64
    loadFactor: float = 0.75

    def validated(self) -> CacheSettings:
        """Return self, or raise :class:`ConfigurationError` for impossible values."""
        if self.initialCapacity < 0 or self.maxCapacity < 0 or not self.loadFactor > 0:
            raise ConfigurationError(
                f"Invalid consumer cache settings {tuple(self)}: capacities must be >= 0 and the "
                "load factor > 0, e.g. spark.streaming.kafka.consumer.cache.maxCapacity=64"
            )
        return self


_lock = threading.RLock()
_cache: OrderedDict[CacheKey, InternalKafkaConsumer] = OrderedDict()
_max_capacity = CacheSettings().maxCapacity


class KafkaDataConsumer:
    """A consumer handed out by :func:`acquire`; call :meth:`release` exactly once.

    ``cached`` tells whether ``internal`` belongs to the cache. Usable as a context manager.
    """

    __slots__ = ("internal", "cached", "released", "discard")

    def __init__(self, internal: InternalKafkaConsumer, cached: bool) -> None:
        self.internal = internal
        self.cached = cached
        self.released = False
        self.discard = False

    def release(self) -> None:
        """Give the consumer back (see :func:`release`)."""
        release(self)

    def __enter__(self) -> KafkaDataConsumer:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if exc_type is not None and not issubclass(exc_type, GeneratorExit):
            self.discard = True
        self.release()

    def __repr__(self) -> str:
        return f"KafkaDataConsumer({self.internal!r}, cached={self.cached})"


def _task_attempt_number() -> int:
    try:
        from pyspark import TaskContext
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return 0
    context = TaskContext.get()
    return context.attemptNumber() if context is not None else 0


def _evict_locked() -> list[InternalKafkaConsumer]:
    evicted: list[InternalKafkaConsumer] = []
    if len(_cache) <= _max_capacity:
        return evicted
    for key in list(_cache):
        if len(_cache) <= _max_capacity:
            break
        consumer = _cache[key]
        if not consumer.in_use:
            log.warning(
                "KafkaConsumer cache hitting max capacity of %d, removing consumer for %s",
                _max_capacity,
                key,
            )
            del _cache[key]
            evicted.append(consumer)
    bump("evictions", len(evicted))
    return evicted


def _close_all(consumers: list[InternalKafkaConsumer]) -> None:
    for consumer in consumers:
        consumer.close()


def _new(
    key: CacheKey, kafka_config: Mapping[str, Any], fingerprint: str, backend: str
) -> InternalKafkaConsumer:
    return InternalKafkaConsumer(key, kafka_config, fingerprint, backend)


def acquire(
    key: CacheKey,
    kafka_config: Mapping[str, Any],
    *,
    fingerprint: str = "",
    settings: CacheSettings | None = None,
    use_cache: bool = True,
    attempt_number: int | None = None,
    backend: str = DEFAULT_BACKEND,
) -> KafkaDataConsumer:
    """Return a consumer for ``key``, cached when the rules allow (module docstring).

    Parameters
    ----------
    key : CacheKey
    kafka_config : mapping
        Executor ``kafka.KafkaConsumer`` settings (from ``fix_kafka_params``).
    fingerprint : str
        Identity of ``kafka_config``; a cached consumer with another one is replaced.
    settings : CacheSettings, optional
        The driver's cache configuration; its ``maxCapacity`` applies from this call on.
    use_cache : bool
        False reads with an uncached consumer (Spark does so for checkpoint-restored RDDs).
    attempt_number : int, optional
        Task attempt; read from ``TaskContext`` when omitted (0 outside a task).
    backend : str
        Client library of the consumer (``kafka-python`` or ``confluent-kafka``); a cached
        consumer of another backend is replaced.
    """
    global _max_capacity
    settings = (settings or CacheSettings()).validated()
    attempt = _task_attempt_number() if attempt_number is None else attempt_number
    to_close: list[InternalKafkaConsumer] = []
    with _lock:
        _max_capacity = settings.maxCapacity
        existing = _cache.get(key)
        if (
            existing is not None
            and (existing.fingerprint != fingerprint or existing.backend != backend)
            and not existing.in_use
        ):
            del _cache[key]
            to_close.append(existing)
            existing = None
        if attempt >= 1:
            # A retry may follow a failure caused by this very consumer: start afresh.
            if existing is not None:
                if existing.in_use:
                    existing.marked_for_close = True
                else:
                    del _cache[key]
                    to_close.append(existing)
            log.debug("Reattempt detected, invalidated cached consumer for %s", key)
            handle = KafkaDataConsumer(_new(key, kafka_config, fingerprint, backend), False)
            bump("misses")
        elif not use_cache:
            handle = KafkaDataConsumer(_new(key, kafka_config, fingerprint, backend), False)
            bump("misses")
        elif existing is None:
            # The client inside is created lazily by its first read, outside this lock.
            internal = _new(key, kafka_config, fingerprint, backend)
            internal.in_use = True
            _cache[key] = internal
            to_close.extend(_evict_locked())
            handle = KafkaDataConsumer(internal, True)
            bump("misses")
        elif existing.in_use:
            # Never share: another task or thread is reading this partition right now.
            handle = KafkaDataConsumer(_new(key, kafka_config, fingerprint, backend), False)
            bump("misses")
        else:
            existing.in_use = True
            _cache.move_to_end(key)
            handle = KafkaDataConsumer(existing, True)
            bump("hits")
    _close_all(to_close)
    return handle


def release(handle: KafkaDataConsumer) -> None:
    """Return ``handle``'s consumer: back to the cache, or closed.

    The cached consumer is closed and removed when it was marked for close (a retry came in
    meanwhile), when ``handle.discard`` is set (its read failed) or when the cache dropped it;
    an uncached consumer is always closed. A second release does nothing.
    """
    to_close: list[InternalKafkaConsumer] = []
    with _lock:
        if handle.released:
            return
        handle.released = True
        internal = handle.internal
        if not handle.cached:
            to_close.append(internal)
        elif (
            internal.marked_for_close or handle.discard or _cache.get(internal.key) is not internal
        ):
            if _cache.get(internal.key) is internal:
                del _cache[internal.key]
            to_close.append(internal)
        else:
            internal.in_use = False
            to_close.extend(_evict_locked())
    _close_all(to_close)


def pre_position(
    group_id: str,
    ranges: Mapping[tuple[str, int], tuple[int, int, bool]],
    *,
    fingerprint: str = "",
    backend: str = DEFAULT_BACKEND,
) -> int:
    """Move this process's idle cached consumers of ``group_id`` to where their next read starts.

    PySpark hands each task to whichever Python worker of the executor is free, so a
    partition's next task often runs in a worker whose cached consumer for it still stands
    where that worker last read it, and must seek and wait for a fetch. After each task of a
    direct stream the worker knows the batch's ranges, and Spark starts a stage's tasks in
    partition order: a range ordered before this task's (``started`` true) is being or has
    been read elsewhere, so its consumer here moves to the range's ``until``, where the next
    batch starts; a later range may still be read here, so its consumer moves to ``from``.
    Moving is a seek (:meth:`InternalKafkaConsumer.pre_position`), after which a client that
    fetches in the background (librdkafka) queues records from there. A consumer already at its target, or at
    ``until`` (it read the range itself), stays. Consumers in use, built from other parameters
    or another backend, and partitions not in ``ranges`` are left alone. Returns how many
    consumers moved; one that fails to move is closed (a new one would report the problem
    with a read's context).

    Parameters
    ----------
    group_id : str
        The executor group id of the cache keys.
    ranges : mapping
        ``(topic, partition) -> (from, until, started)`` of the batch.
    fingerprint, backend : str
        As in :func:`acquire`.
    """
    chosen: list[tuple[InternalKafkaConsumer, int]] = []
    with _lock:
        for key, consumer in _cache.items():
            if key.groupId != group_id or consumer.in_use or consumer.marked_for_close:
                continue
            span = ranges.get((key.topic, key.partition))
            if span is None or consumer.fingerprint != fingerprint or consumer.backend != backend:
                continue
            start, until, started = span
            target = until if started else start
            if start >= until or consumer.next_offset in (target, until):
                continue
            consumer.in_use = True
            chosen.append((consumer, target))
    moved = 0
    for consumer, offset in chosen:
        try:
            # marks itself for close when it fails
            moved += consumer.pre_position(offset)
        except Exception:
            log.debug("Pre-positioning %s failed; closing it", consumer.key, exc_info=True)
    to_close: list[InternalKafkaConsumer] = []
    with _lock:
        for consumer, _ in chosen:
            consumer.in_use = False
            if consumer.marked_for_close or _cache.get(consumer.key) is not consumer:
                # It failed, or clear() or a retry dropped it meanwhile.
                if _cache.get(consumer.key) is consumer:
                    del _cache[consumer.key]
                to_close.append(consumer)
    _close_all(to_close)
    return moved


def cached_consumer(key: CacheKey) -> InternalKafkaConsumer | None:
    """Return the cached consumer for ``key`` without acquiring it (for tests and probes)."""
    with _lock:
        return _cache.get(key)


def cache_size() -> int:
    """Return the number of cached consumers in this process."""
    with _lock:
        return len(_cache)


def clear() -> None:
    """Empty the cache: idle consumers are closed now, consumers in use on their release."""
    to_close = []
    with _lock:
        for consumer in _cache.values():
            if consumer.in_use:
                consumer.marked_for_close = True
            else:
                to_close.append(consumer)
        _cache.clear()
    _close_all(to_close)


def stats() -> dict[str, Any]:
    """Return this process's counters and cache state.

    Keys: the :data:`COUNTERS` (``hits``, ``misses``, ``creations``, ``closes``,
    ``evictions``, ``seeks``, ``polls``, ``records``), ``cached`` (consumers in the cache),
    ``in_use`` and ``pid``.
    """
    snapshot: dict[str, Any] = counters_snapshot()
    with _lock:
        snapshot["cached"] = len(_cache)
        snapshot["in_use"] = sum(1 for c in _cache.values() if c.in_use)
    snapshot["pid"] = os.getpid()
    return snapshot


def reset_stats() -> None:
    """Zero this process's counters (the cache itself is kept)."""
    reset_counters()
