"""The Kafka output's per-worker producer cache, with stand-in producers (no broker)."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.write import producer_cache
from dstream_kafka.write.settings import OutputSettings


class _Producer:
    def __init__(self, settings: Any, transactional_id: str | None) -> None:
        self.transactional_id = transactional_id
        self.closed = False

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def opened(monkeypatch) -> list[_Producer]:
    made: list[_Producer] = []

    def open_producer(settings: Any, transactional_id: str | None) -> _Producer:
        made.append(_Producer(settings, transactional_id))
        return made[-1]

    monkeypatch.setattr(producer_cache, "open_producer", open_producer)
    producer_cache.clear()
    yield made
    producer_cache.clear()


def _settings(**params: Any) -> OutputSettings:
    return OutputSettings.of({"bootstrap.servers": "127.0.0.1:9", **params}, "t",
                             "at-least-once", "kafka-python")


def test_a_released_healthy_producer_is_handed_to_the_next_task(opened):
    first = producer_cache.acquire(_settings(), "app-t-0")
    producer_cache.release(first, healthy=True)
    second = producer_cache.acquire(_settings(), "app-t-0")
    assert (first.fresh, second.fresh) == (True, False)
    assert second.producer is first.producer and len(opened) == 1


def test_a_producer_released_after_a_failure_is_closed_and_replaced(opened):
    first = producer_cache.acquire(_settings(), None)
    producer_cache.release(first, healthy=False)
    second = producer_cache.acquire(_settings(), None)
    assert opened[0].closed and second.producer is opened[1] and second.fresh


def test_a_producer_in_use_is_not_shared_and_the_extra_one_is_closed_on_release(opened):
    first = producer_cache.acquire(_settings(), None)
    second = producer_cache.acquire(_settings(), None)
    assert second.producer is not first.producer and not second.cached
    producer_cache.release(second, healthy=True)
    assert opened[1].closed and not opened[0].closed


def test_other_settings_or_transactional_ids_get_their_own_producers(opened):
    for settings, txn in ((_settings(), "a"), (_settings(), "b"),
                          (_settings(**{"linger.ms": 7}), "a")):
        producer_cache.release(producer_cache.acquire(settings, txn), healthy=True)
    assert len(opened) == 3 and producer_cache.stats()["cached"] == 3


def test_idle_producers_beyond_the_bound_are_closed_least_recently_used_first(
        opened, monkeypatch):
    monkeypatch.setattr(producer_cache, "MAX_PRODUCERS", 2)
    for txn in ("a", "b"):
        producer_cache.release(producer_cache.acquire(_settings(), txn), healthy=True)
    producer_cache.release(producer_cache.acquire(_settings(), "a"), healthy=True)  # b is LRU
    producer_cache.release(producer_cache.acquire(_settings(), "c"), healthy=True)
    assert [p.transactional_id for p in opened if p.closed] == ["b"]


def test_the_fingerprint_is_a_digest_that_never_shows_a_secret():
    settings = _settings(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                            "sasl.plain.username": "u", "sasl.plain.password": "hunter2"})
    digest = producer_cache.fingerprint(settings)
    assert "hunter2" not in digest and "hunter2" not in repr(producer_cache.key_of(settings, None))
    assert digest != producer_cache.fingerprint(_settings())


def test_clear_closes_every_idle_producer(opened):
    producer_cache.release(producer_cache.acquire(_settings(), None), healthy=True)
    producer_cache.clear()
    assert opened[0].closed and producer_cache.stats()["cached"] == 0
