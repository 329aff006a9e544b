"""Unit tests for the executor consumer cache's bookkeeping (no broker: clients are never built).

The cached objects create their kafka-python client only on their first read, so acquiring
and releasing exercises every cache rule without network access.
"""

from __future__ import annotations

import logging
import random
import threading

import pytest

from dstream_kafka.read import consumer_cache
from dstream_kafka.read.consumer_cache import CacheKey, CacheSettings, acquire
from dstream_kafka.errors import ConfigurationError

CONFIG = {
    "bootstrap_servers": "127.0.0.1:1",
    "auto_offset_reset": "none",
    "enable_auto_commit": False,
}
K0 = CacheKey("spark-executor-g", "t", 0)
K1 = CacheKey("spark-executor-g", "t", 1)
K2 = CacheKey("spark-executor-g", "t", 2)


@pytest.fixture(autouse=True)
def empty_cache():
    consumer_cache.clear()
    consumer_cache.reset_stats()
    yield
    consumer_cache.clear()


def test_sequential_users_of_a_key_share_the_cached_consumer():
    first = acquire(K0, CONFIG, attempt_number=0)
    first.release()
    second = acquire(K0, CONFIG, attempt_number=0)
    second.release()
    assert second.internal is first.internal
    assert consumer_cache.cache_size() == 1
    assert consumer_cache.stats()["hits"] == 1


def test_a_concurrent_user_gets_a_fresh_uncached_consumer_closed_on_release():
    holder = acquire(K0, CONFIG, attempt_number=0)
    other = acquire(K0, CONFIG, attempt_number=0)
    assert other.internal is not holder.internal and not other.cached
    other.release()
    assert other.internal.closed
    holder.release()
    assert not holder.internal.closed
    assert consumer_cache.cached_consumer(K0) is holder.internal


def test_a_task_retry_discards_the_cached_consumer_and_reads_with_a_new_one():
    first = acquire(K0, CONFIG, attempt_number=0)
    first.release()
    retry = acquire(K0, CONFIG, attempt_number=1)
    assert consumer_cache.cache_size() == 0
    assert retry.internal is not first.internal and not retry.cached
    assert first.internal.closed
    retry.release()


def test_a_retry_while_the_cached_consumer_is_in_use_closes_it_on_release():
    holder = acquire(K0, CONFIG, attempt_number=0)
    retry = acquire(K0, CONFIG, attempt_number=1)
    assert holder.internal.marked_for_close and not holder.internal.closed
    holder.release()
    retry.release()
    assert holder.internal.closed
    assert consumer_cache.cache_size() == 0


def test_max_capacity_evicts_and_closes_the_least_recently_used_idle_consumer():
    settings = CacheSettings(maxCapacity=2)
    handles = [acquire(k, CONFIG, settings=settings, attempt_number=0) for k in (K0, K1)]
    for h in handles:
        h.release()
    acquire(K0, CONFIG, settings=settings, attempt_number=0).release()  # K0 is now most recent
    acquire(K2, CONFIG, settings=settings, attempt_number=0).release()
    assert consumer_cache.cached_consumer(K1) is None and handles[1].internal.closed
    assert consumer_cache.cached_consumer(K0) is handles[0].internal
    assert consumer_cache.stats()["evictions"] == 1


def test_max_capacity_is_a_soft_cap_that_never_evicts_consumers_in_use():
    settings = CacheSettings(maxCapacity=1)
    held = [acquire(k, CONFIG, settings=settings, attempt_number=0) for k in (K0, K1, K2)]
    assert consumer_cache.cache_size() == 3
    assert not any(h.internal.closed for h in held)
    for h in held:
        h.release()
    assert consumer_cache.cache_size() == 1


def test_use_cache_false_gives_an_uncached_consumer():
    handle = acquire(K0, CONFIG, use_cache=False, attempt_number=0)
    assert not handle.cached and consumer_cache.cache_size() == 0
    handle.release()
    assert handle.internal.closed


def test_a_consumer_built_for_other_settings_is_replaced():
    old = acquire(K0, CONFIG, fingerprint="a", attempt_number=0)
    old.release()
    new = acquire(K0, CONFIG, fingerprint="b", attempt_number=0)
    assert new.internal is not old.internal and new.cached and old.internal.closed
    new.release()


def test_a_consumer_whose_read_failed_is_discarded_on_release():
    with pytest.raises(RuntimeError):
        with acquire(K0, CONFIG, attempt_number=0) as handle:
            raise RuntimeError("read failed")
    assert handle.internal.closed and consumer_cache.cache_size() == 0


def test_releasing_twice_is_harmless():
    handle = acquire(K0, CONFIG, attempt_number=0)
    handle.release()
    handle.release()
    assert consumer_cache.cached_consumer(K0) is handle.internal and not handle.internal.in_use


def test_attempt_number_defaults_to_zero_outside_a_task():
    acquire(K0, CONFIG).release()
    handle = acquire(K0, CONFIG)
    handle.release()
    assert handle.cached


def test_counters_count_hits_and_misses_and_reset():
    acquire(K0, CONFIG, attempt_number=0).release()
    acquire(K0, CONFIG, attempt_number=0).release()
    stats = consumer_cache.stats()
    assert (stats["hits"], stats["misses"], stats["creations"], stats["cached"]) == (1, 1, 0, 1)
    consumer_cache.reset_stats()
    assert consumer_cache.stats()["hits"] == 0


def test_clear_closes_idle_consumers_now_and_busy_ones_on_release():
    idle = acquire(K0, CONFIG, attempt_number=0)
    idle.release()
    busy = acquire(K1, CONFIG, attempt_number=0)
    consumer_cache.clear()
    assert consumer_cache.cache_size() == 0 and idle.internal.closed and not busy.internal.closed
    busy.release()
    assert busy.internal.closed


def test_impossible_cache_settings_are_rejected():
    with pytest.raises(ConfigurationError, match="load factor > 0"):
        acquire(K0, CONFIG, settings=CacheSettings(loadFactor=0.0))


def test_threads_never_hold_the_same_cached_consumer_at_once(caplog):
    caplog.set_level(logging.ERROR, logger="dstream_kafka.read.consumer_cache")  # evictions are expected
    holders: dict[int, int] = {}
    lock = threading.Lock()
    errors: list[str] = []
    settings = CacheSettings(maxCapacity=2)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(300):
            key = rng.choice((K0, K1, K2))
            handle = acquire(
                key,
                CONFIG,
                settings=settings,
                use_cache=rng.random() < 0.8,
                attempt_number=rng.choice((0, 0, 0, 1)),
            )
            ident = id(handle.internal)
            with lock:
                if ident in holders:
                    errors.append(f"{key} shared")
                holders[ident] = seed
            if handle.internal.closed:
                errors.append(f"{key} handed out closed")
            with lock:
                del holders[ident]
            handle.release()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert consumer_cache.stats()["in_use"] == 0


class _LogClient:
    """A client over an in-memory partition log of offsets 0..size-1 (items are offsets)."""

    offset_of = staticmethod(int)

    def __init__(self, size: int = 100, fail: bool = False) -> None:
        self.size, self.fail = size, fail
        self.position_ = 0
        self.seeks: list[int] = []
        self.fetches = 0

    def seek(self, offset: int) -> None:
        if self.fail:
            raise RuntimeError("broker gone")
        self.seeks.append(offset)
        self.position_ = offset

    def fetch(self, timeout_ms: int, max_records: int | None = None) -> list[int]:
        self.fetches += 1
        end = min(self.size, self.position_ + (max_records or 10))
        items, self.position_ = list(range(self.position_, end)), end
        return items

    def to_record(self, item: int) -> int:
        return item

    def position(self) -> int:
        return self.position_

    def close(self) -> None:
        pass


def _cached_at(key: CacheKey, offset: int, **client: int | bool) -> consumer_cache.InternalKafkaConsumer:
    """A cached, idle consumer whose client last read up to ``offset``."""
    handle = acquire(key, CONFIG, attempt_number=0)
    handle.internal._consumer = _LogClient(**client)  # type: ignore[assignment]
    if offset:
        list(handle.internal.iter_range(0, offset, 1000))
    handle.release()
    return handle.internal


def test_pre_position_moves_a_started_range_s_consumer_to_its_end():
    stale = _cached_at(K1, 10)
    moved = consumer_cache.pre_position("spark-executor-g", {("t", 1): (30, 40, True)})
    assert moved == 1
    assert stale.next_offset == 40
    assert stale._consumer.seeks[-1] == 40
    assert consumer_cache.stats()["prepositions"] == 1
    seeks = consumer_cache.stats()["seeks"]
    assert [r for r in stale.iter_range(40, 45, 1000)] == [40, 41, 42, 43, 44]
    assert consumer_cache.stats()["seeks"] == seeks  # the next batch's read needs no seek


def test_a_range_not_started_yet_gets_its_consumer_moved_to_its_start():
    stale = _cached_at(K1, 10)
    assert consumer_cache.pre_position("spark-executor-g", {("t", 1): (30, 40, False)}) == 1
    assert stale.next_offset == 30


def test_a_started_range_read_elsewhere_moves_this_worker_s_consumer_from_its_start():
    behind = _cached_at(K1, 30)  # this worker read up to 30 last batch; 30-40 was read elsewhere
    assert consumer_cache.pre_position("spark-executor-g", {("t", 1): (30, 40, True)}) == 1
    assert behind.next_offset == 40


def test_consumers_at_their_target_or_at_the_range_end_stay():
    ready = _cached_at(K1, 30)
    done = _cached_at(K2, 40)
    spans = {("t", 1): (30, 40, False), ("t", 2): (30, 40, False)}
    assert consumer_cache.pre_position("spark-executor-g", spans) == 0
    assert ready.next_offset == 30 and done.next_offset == 40


def test_pre_position_leaves_consumers_in_use_of_other_groups_and_of_other_partitions():
    in_use = acquire(K0, CONFIG, attempt_number=0)
    in_use.internal._consumer = _LogClient()  # type: ignore[assignment]
    other_group = _cached_at(CacheKey("spark-executor-h", "t", 1), 5)
    unplanned = _cached_at(K2, 5)
    spans = {("t", 0): (10, 20, True), ("t", 1): (10, 20, True)}
    assert consumer_cache.pre_position("spark-executor-g", spans) == 0
    assert other_group.next_offset == 5 and unplanned.next_offset == 5
    assert in_use.internal._consumer.seeks == []
    in_use.release()


def test_a_consumer_that_fails_to_pre_position_is_closed_and_dropped():
    broken = _cached_at(K1, 10)
    broken._consumer.fail = True  # type: ignore[union-attr]
    assert consumer_cache.pre_position("spark-executor-g", {("t", 1): (20, 30, True)}) == 0
    assert broken.closed and consumer_cache.cached_consumer(K1) is None


def test_a_consumer_without_a_client_yet_is_not_created_by_pre_positioning():
    fresh = acquire(K1, CONFIG, attempt_number=0)
    fresh.release()
    assert consumer_cache.pre_position("spark-executor-g", {("t", 1): (20, 30, True)}) == 0
    assert fresh.internal._consumer is None
    assert consumer_cache.stats()["creations"] == 0
