"""Executor-side producer cache: the Kafka output's producers, kept per Python worker.

Opening a producer costs a bootstrap, a metadata round and, for a transactional one,
``init_transactions`` (InitProducerId): hundreds of milliseconds, paid by every task of every
batch when each task opens its own. Here each Python worker process keeps its producers
across tasks and batches, keyed by (backend, fingerprint of the producer settings,
``transactional.id`` or None): at-least-once tasks of one output share one producer per
worker; an exactly-once producer belongs to one input partition (its transactional id).

* A producer in use is never shared: a second user of the same key (another thread) gets an
  uncached producer, closed when it is released.
* A producer whose task failed is released with ``healthy=False``: it is closed and dropped,
  so the next task starts with a new one.
* At most :data:`MAX_PRODUCERS` idle producers are kept; the least recently used beyond that
  are closed. Every cached producer is closed when the worker exits (``atexit``).

Counters of this process (:func:`stats`, :func:`creations`) let tests and probes see the reuse.
All functions are thread-safe.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import threading
from collections import Counter, OrderedDict
from typing import Any, NamedTuple

from dstream_kafka.write.producers import OutputProducer, open_producer
from dstream_kafka.write.settings import OutputSettings

__all__ = ["MAX_PRODUCERS", "Lease", "ProducerKey", "acquire", "clear", "count", "creations",
           "fingerprint", "key_of", "release", "stats"]

log = logging.getLogger(__name__)

#: Idle producers kept per Python worker; more are closed, least recently used first.
#: Exactly-once needs one per input partition the worker writes, at-least-once one per output.
MAX_PRODUCERS = 64


class ProducerKey(NamedTuple):
    """What a cached producer is for: its client library, settings and transactional id."""

    backend: str
    fingerprint: str
    transactional_id: str | None


class _Entry:
    __slots__ = ("producer", "in_use")

    def __init__(self, producer: OutputProducer) -> None:
        self.producer = producer
        self.in_use = True


_lock = threading.Lock()
_cache: OrderedDict[ProducerKey, _Entry] = OrderedDict()
_created: Counter[ProducerKey] = Counter()
_counters: Counter[str] = Counter()


def fingerprint(settings: OutputSettings) -> str:
    """Return a digest of the producer settings of ``settings`` (never the settings: they may
    hold secrets); producers built from other settings are not reused."""
    described = repr((sorted((k, repr(v)) for k, v in settings.producer.items()),
                      sorted((k, repr(v)) for k, v in (settings.librdkafka or {}).items()),
                      settings.timeout_s))
    return hashlib.sha256(described.encode("utf-8")).hexdigest()[:32]


def key_of(settings: OutputSettings, transactional_id: str | None) -> ProducerKey:
    """Return the cache key of the producer ``settings`` and ``transactional_id`` need."""
    return ProducerKey(settings.backend, fingerprint(settings), transactional_id)


class Lease(NamedTuple):
    """A producer handed out by :func:`acquire`: give it back with :func:`release`.

    ``fresh`` tells that the producer was created for this lease (a transactional one still
    needs ``init_transactions``); ``cached`` that it belongs to the cache.
    """

    key: ProducerKey
    producer: OutputProducer
    fresh: bool
    cached: bool


def acquire(settings: OutputSettings, transactional_id: str | None,
            use_cache: bool = True) -> Lease:
    """Return an idle cached producer for (``settings``, ``transactional_id``), or a new one
    (cached unless ``use_cache`` is false or the cached one is in use)."""
    key = key_of(settings, transactional_id)
    with _lock:
        entry = _cache.get(key) if use_cache else None
        if entry is not None and not entry.in_use:
            entry.in_use = True
            _cache.move_to_end(key)
            _counters["hits"] += 1
            return Lease(key, entry.producer, False, True)
        cache_it = use_cache and entry is None
    # Opening connects to the brokers: outside the lock.
    producer = open_producer(settings, transactional_id)
    to_close: list[OutputProducer] = []
    with _lock:
        _created[key] += 1
        _counters["creations"] += 1
        if cache_it and key not in _cache:
            _cache[key] = _Entry(producer)
            to_close = _evict_locked()
        else:
            cache_it = False
    _close_all(to_close)
    return Lease(key, producer, True, cache_it)


def release(lease: Lease, healthy: bool) -> None:
    """Give back ``lease``'s producer: kept when it is cached and ``healthy``, else closed
    (and dropped from the cache)."""
    to_close: list[OutputProducer] = []
    with _lock:
        entry = _cache.get(lease.key)
        mine = lease.cached and entry is not None and entry.producer is lease.producer
        if mine and healthy:
            assert entry is not None
            entry.in_use = False
            to_close = _evict_locked()
        else:
            if mine:
                del _cache[lease.key]
                _counters["discards"] += 1
            to_close = [lease.producer]
    _close_all(to_close)


def _evict_locked() -> list[OutputProducer]:
    evicted: list[OutputProducer] = []
    for key in list(_cache):
        if len(_cache) <= MAX_PRODUCERS:
            break
        if not _cache[key].in_use:
            evicted.append(_cache.pop(key).producer)
    _counters["evictions"] += len(evicted)
    return evicted


def _close_all(producers: list[OutputProducer]) -> None:
    for producer in producers:
        _counters["closes"] += 1
        producer.close()  # best effort: never raises


def clear() -> None:
    """Close every idle cached producer and forget those in use (closed on release)."""
    with _lock:
        idle = [entry.producer for entry in _cache.values() if not entry.in_use]
        _cache.clear()
    _close_all(idle)


def creations(key: ProducerKey) -> int:
    """Return how many producers of ``key`` this process created."""
    with _lock:
        return _created[key]


def stats() -> dict[str, int]:
    """Return this process's counters: ``creations``, ``hits``, ``discards`` (closed after a
    failure), ``evictions``, ``closes``, ``fenced_replacements`` (a cached transactional
    producer found fenced and replaced), ``unsettled_replacements`` (a transactional producer
    replaced, and its epoch bumped, after its commit or abort failed or timed out),
    ``cached`` and ``pid``."""
    with _lock:
        out = {name: _counters[name] for name in ("creations", "hits", "discards", "evictions",
                                                   "closes", "fenced_replacements",
                                                   "unsettled_replacements")}
        out["cached"] = len(_cache)
    out["pid"] = os.getpid()
    return out


def count(name: str) -> None:
    """Add one to counter ``name`` (see :func:`stats`)."""
    with _lock:
        _counters[name] += 1


atexit.register(clear)
