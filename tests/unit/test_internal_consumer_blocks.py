"""Unit tests of the range readers' block hand-out over a scripted backend (no broker).

Records are checked a fetched block at a time and built one at a time as they are handed
out; these tests pin what that must not change: exact offsets, errors on gaps, the state a
stopped read leaves for the next one, and the record counts.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

import pytest

from dstream_kafka.read import internal_consumer
from dstream_kafka.read.counters import counters_snapshot, reset_counters
from dstream_kafka.errors import WrongOffsetError
from dstream_kafka.read.internal_consumer import CacheKey, InternalKafkaConsumer
from dstream_kafka.read.task import ReadSettings, partition_reader
from dstream_kafka.record import ConsumerRecord

KEY = CacheKey("spark-executor-g", "t", 0)


class ScriptedBackend:
    """Serves ``offsets`` (items are ``(offset, value)``) in fetches of ``batch`` items."""

    offset_of = staticmethod(itemgetter(0))

    def __init__(self, offsets: list[int], batch: int = 4) -> None:
        self.offsets = offsets
        self.batch = batch
        self.pos = 0  # index into offsets of the next item to fetch
        self.fetch_limits: list[int | None] = []
        self.closed = False

    def to_record(self, item: tuple[int, str]) -> ConsumerRecord:
        return ConsumerRecord("t", 0, item[0], 0, 0, None, item[1])

    def seek(self, offset: int) -> None:
        self.pos = next((i for i, o in enumerate(self.offsets) if o >= offset), len(self.offsets))

    def fetch(self, timeout_ms: int, max_records: int | None = None) -> list[Any]:
        self.fetch_limits.append(max_records)
        n = self.batch if max_records is None else min(self.batch, max_records)
        items = [(o, f"v{o}") for o in self.offsets[self.pos : self.pos + n]]
        self.pos += len(items)
        return items

    def position(self) -> int:
        return self.offsets[self.pos] if self.pos < len(self.offsets) else self.offsets[-1] + 1

    def watermarks(self, timeout_ms: int) -> tuple[int | None, int | None]:
        return self.offsets[0], self.offsets[-1] + 1

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def scripted(monkeypatch):
    """Make every new consumer use the backend this returns (set ``offsets`` first)."""
    made: list[ScriptedBackend] = []

    def use(offsets: list[int], batch: int = 4) -> list[ScriptedBackend]:
        def create(name, topic, partition, config):
            made.append(ScriptedBackend(offsets, batch))
            return made[-1]

        monkeypatch.setattr(internal_consumer, "create_backend", create)
        return made

    reset_counters()
    return use


def test_a_range_spanning_fetches_comes_back_exactly_and_fetches_only_what_it_needs(scripted):
    made = scripted(list(range(20)))
    consumer = InternalKafkaConsumer(KEY, {})
    records = list(consumer.iter_range(3, 13, 1000))
    assert [r.offset for r in records] == list(range(3, 13))
    assert [r.value for r in records] == [f"v{o}" for o in range(3, 13)]
    assert all(type(r) is ConsumerRecord for r in records)
    # Each fetch asks for at most what the range still needs.
    assert made[0].fetch_limits == [10, 6, 2]
    assert consumer.next_offset == 13
    assert counters_snapshot()["records"] == 10


def test_a_read_stopped_inside_a_block_is_continued_without_a_seek(scripted):
    scripted(list(range(20)), batch=8)
    consumer = InternalKafkaConsumer(KEY, {})
    reader = consumer.iter_range(0, 20, 1000)
    assert [next(reader).offset for _ in range(3)] == [0, 1, 2]
    reader.close()
    assert consumer.next_offset == 3
    seeks = counters_snapshot()["seeks"]
    assert [r.offset for r in consumer.iter_range(3, 20, 1000)] == list(range(3, 20))
    counters = counters_snapshot()
    assert counters["seeks"] == seeks == 1
    assert counters["records"] == 20


def test_a_gap_in_the_middle_of_a_block_fails_after_the_records_before_it(scripted):
    scripted([0, 1, 2, 3, 5, 6, 7, 8], batch=8)
    consumer = InternalKafkaConsumer(KEY, {})
    seen = []
    with pytest.raises(WrongOffsetError, match="wrong record .* even after seeking to offset 4"):
        for record in consumer.iter_range(0, 8, 1000):
            seen.append(record.offset)
    assert seen == [0, 1, 2, 3]
    assert consumer.marked_for_close


def test_gaps_are_skipped_when_offsets_may_be_non_consecutive(scripted):
    scripted([0, 2, 3, 7, 9, 12], batch=3)
    consumer = InternalKafkaConsumer(KEY, {})
    assert [r.offset for r in consumer.iter_range(1, 10, 1000, strict=False)] == [2, 3, 7, 9]
    assert consumer.next_offset == 10


def test_a_partition_reader_chains_its_ranges_and_close_releases_the_consumer(scripted):
    made = scripted(list(range(10)))
    settings = ReadSettings(groupId=KEY.groupId, pollTimeoutMs=1000, useCache=False)
    read = partition_reader({}, settings, [(0, "t", 0, 0, 5), (1, "t", 0, 5, 5)])
    records = read(0, iter([(0, "t", 0)]))
    assert [next(records).offset for _ in range(2)] == [0, 1]
    records.close()
    assert made[0].closed  # an uncached consumer is closed on release
    whole = read(0, iter([(0, "t", 0), (1, "t", 0)]))
    assert [r.offset for r in whole] == [0, 1, 2, 3, 4]


def test_a_partition_reader_refuses_a_source_element_of_another_partition(scripted):
    scripted(list(range(10)))
    settings = ReadSettings(groupId=KEY.groupId, pollTimeoutMs=1000, useCache=False)
    read = partition_reader({}, settings, [(0, "t", 0, 0, 5)])
    with pytest.raises(RuntimeError, match="partition 0 is t-1, its range is t-0"):
        read(0, iter([(0, "t", 1)]))
