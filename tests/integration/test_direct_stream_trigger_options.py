"""Issue #30 part 2: Structured Streaming's trigger options on a direct stream, real broker:
minOffsetsPerTrigger holds new offsets back until enough arrived or maxTriggerDelay passed
(no batch without an interval, an empty one with an interval), and minPartitions splits a
stream's batches while every record is read once and offsets commit per Kafka partition."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetStores
from dstream_kafka.errors import ConfigurationError

from stream_runs import params, values
from support import wait_until


class Batches:
    """Each batch's values, Spark partition count and batch time (s), thread-safe."""

    def __init__(self, stream: Any) -> None:
        self.lock = threading.Lock()
        self.seen: list[tuple[list[str], int, float]] = []
        stream.foreachRDD(self._add)

    def _add(self, batch_time: Any, rdd: Any) -> None:
        batch = sorted(rdd.map(lambda r: r.value).collect())
        with self.lock:
            self.seen.append((batch, rdd.getNumPartitions(), batch_time.timestamp()))

    def with_records(self) -> list[tuple[list[str], int, float]]:
        with self.lock:
            return [b for b in self.seen if b[0]]

    def read(self) -> list[str]:
        return sorted(v for batch, _, _ in self.with_records() for v in batch)

    def wait_for(self, count: int) -> list[str]:
        wait_until(lambda: len(self.read()) >= count, f"{count} records")
        return self.read()


def _start(make_ssc: Any, kafka: Any, topic: str, group: str, batch: float,
           options: dict[str, str], **stream_args: Any) -> tuple[Any, Batches]:
    context = make_ssc(batch)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], params(kafka, group)), options=options,
        **stream_args)
    batches = Batches(stream)
    context.start()
    return context, batches


@pytest.fixture
def topic(kafka: Any, unique: Any) -> str:
    name = unique("trigger")
    kafka.create_topic(name, partitions=2)
    return name


def test_min_offsets_per_trigger_runs_no_zero_interval_batch_until_enough_offsets_arrived(
        kafka, make_ssc, unique, topic):
    context, batches = _start(make_ssc, kafka, topic, unique("g"), 0,
                              {"minOffsetsPerTrigger": "10"})
    kafka.produce(topic, ["first"])
    assert batches.wait_for(1) == ["first"]  # the first batch with records is not held back
    kafka.produce(topic, values("a", 6))
    scheduler = context._scheduler
    polls = scheduler.empty_polls
    wait_until(lambda: scheduler.empty_polls >= polls + 20, "20 checks that hold 6 offsets back")
    assert len(batches.seen) == 1
    kafka.produce(topic, values("b", 4))  # 10 new offsets now
    assert batches.wait_for(11) == sorted(["first"] + values("a", 6) + values("b", 4))
    assert len(batches.seen) == 2  # the ten in one batch


def test_max_trigger_delay_lets_fewer_offsets_through_once_it_passed_since_the_last_batch(
        kafka, make_ssc, unique, topic):
    _context, batches = _start(make_ssc, kafka, topic, unique("g"), 0,
                               {"minOffsetsPerTrigger": "1000", "maxTriggerDelay": "1500ms"})
    kafka.produce(topic, ["first"])
    batches.wait_for(1)
    kafka.produce(topic, values("a", 3))
    assert batches.wait_for(4) == sorted(["first"] + values("a", 3))
    first, second = batches.with_records()[:2]
    # without an interval a batch time is the wall clock when the batch was planned: the
    # second one no sooner than the delay after the first one
    assert second[2] - first[2] >= 1.5


def test_with_a_fixed_interval_a_held_back_batch_runs_and_reads_nothing(
        kafka, make_ssc, unique, topic):
    _context, batches = _start(make_ssc, kafka, topic, unique("g"), 0.2,
                               {"minOffsetsPerTrigger": "10"})
    kafka.produce(topic, ["first"])
    batches.wait_for(1)
    kafka.produce(topic, values("a", 6))
    held = len(batches.seen)
    wait_until(lambda: len(batches.seen) >= held + 3, "three more batches")
    assert batches.read() == ["first"]  # those batches read nothing
    kafka.produce(topic, values("b", 4))
    assert batches.wait_for(11) == sorted(["first"] + values("a", 6) + values("b", 4))
    assert [len(b) for b, _, _ in batches.with_records()] == [1, 10]


def test_min_partitions_splits_stream_batches_and_reads_every_record_once(
        kafka, make_ssc, unique, topic, tmp_path):
    group = unique("g")
    store = OffsetStores.sqlite(str(tmp_path / "offsets.db"))
    context, batches = _start(make_ssc, kafka, topic, group, 0,
                              {"minPartitions": "5", "startingOffsets": "earliest"},
                              offsetStore=store)
    expected: list[str] = []
    for round_ in range(3):  # several split batches: cached consumers are reused between them
        chunk = [(None, v) for v in values(f"r{round_}-", 40)]
        kafka.produce(topic, [v for _, v in chunk[:20]], partition=0)
        kafka.produce(topic, [v for _, v in chunk[20:]], partition=1)
        expected += values(f"r{round_}-", 40)
        assert batches.wait_for(len(expected)) == sorted(expected)  # each exactly once
    assert max(parts for _, parts, _ in batches.with_records()) >= 5
    wait_until(lambda: sum(store.load(group).values()) == 120, "every offset committed")
    for record in store.history(group, limit=100):  # one range per Kafka partition
        tps = [r.topicPartition() for r in record.ranges]
        assert len(tps) == len(set(tps))
    context.stop(stopSparkContext=False, stopGraceFully=True)


def test_a_bad_trigger_option_fails_when_the_stream_is_created(kafka, make_ssc, unique, topic):
    with pytest.raises(ConfigurationError, match=r"option minPartitions must be .*'8'"):
        KafkaUtils.createDirectStream(
            make_ssc(0.2), LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([topic], params(kafka, unique("g"))),
            options={"minPartitions": "0"})


def test_min_offsets_above_the_max_offsets_keyword_fails_when_the_stream_is_created(
        kafka, make_ssc, unique, topic):
    with pytest.raises(ConfigurationError, match="higher than the maxOffsetsPerTrigger"):
        KafkaUtils.createDirectStream(
            make_ssc(0.2), LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([topic], params(kafka, unique("g"))),
            maxOffsetsPerTrigger=5, options={"minOffsetsPerTrigger": "6"})
