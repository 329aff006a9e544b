"""The Kafka output's producers kept per Python worker across batches, against the real
broker: reuse, exactly-once across batches, a kept producer fenced by another one."""

from __future__ import annotations

import os
from typing import Any

import pytest
from kafka import KafkaProducer

from dstream_kafka import OffsetRange
from dstream_kafka.write import KafkaOutput, producer_cache
from dstream_kafka.write.settings import transactional_id
from dstream_kafka.write.task import write_exactly_once

from support import wait_until
from test_kafka_output import _committed, _direct, _read, _values

# Every test runs once per client backend: the output follows the consumers' backend.
pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture(autouse=True)
def _close_kept_producers() -> Any:
    """Close the producers the tests' direct task calls kept in this process, while the
    broker still runs."""
    yield
    producer_cache.clear()


def _pairs(start: int, end: int) -> list[tuple[str, str]]:
    return [(f"k{i}", f"v{i}") for i in range(start, end)]


def _exactly_once(kafka: Any, target: str, app: str) -> Any:
    return KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target,
                       guarantee="exactly-once", applicationId=app).settings


def _one_partition(kafka: Any, unique: Any) -> tuple[str, str, str, Any]:
    """One-partition input and output topics, a group, and exactly-once output settings whose
    applicationId is the group."""
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source)
    kafka.create_topic(target)
    return source, target, group, _exactly_once(kafka, target, group)


def _write(settings: Any, group: str, source: str, start: int, end: int) -> int:
    records = iter(_pairs(start, end))  # an iterator, as a task gets: it can be read once
    return sum(write_exactly_once(settings, group, 0, OffsetRange(source, 0, start, end),
                                  records))


def test_an_exactly_once_partition_keeps_one_producer_across_batches_and_writes_once(
        kafka, unique):
    source, target, group, settings = _one_partition(kafka, unique)
    key = producer_cache.key_of(settings, transactional_id(group, source, 0))
    for start in (0, 4, 8):
        assert _write(settings, group, source, start, start + 4) == 4
    assert producer_cache.creations(key) == 1
    assert sorted(_read(kafka, target)) == sorted(
        (k.encode(), v.encode()) for k, v in _pairs(0, 12))
    assert _committed(kafka, group, source) == {0: 12}


def test_a_kept_transactional_producer_fenced_by_another_is_replaced_and_commits_once(
        kafka, unique):
    source, target, group, settings = _one_partition(kafka, unique)
    txn_id = transactional_id(group, source, 0)
    key = producer_cache.key_of(settings, txn_id)
    assert _write(settings, group, source, 0, 3) == 3
    # Another worker's producer of the same partition: its init fences the kept one.
    other = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, transactional_id=txn_id)
    try:
        other.init_transactions()
    finally:
        other.close(timeout=5)
    replaced = producer_cache.stats()["fenced_replacements"]
    assert _write(settings, group, source, 3, 6) == 3
    assert producer_cache.stats()["fenced_replacements"] == replaced + 1
    assert producer_cache.creations(key) == 2
    assert _write(settings, group, source, 6, 9) == 3
    assert producer_cache.creations(key) == 2
    assert sorted(_read(kafka, target)) == sorted(
        (k.encode(), v.encode()) for k, v in _pairs(0, 9))
    assert _committed(kafka, group, source) == {0: 9}


def test_with_the_producer_cache_disabled_every_task_opens_and_closes_its_producer(
        kafka, unique, spark_conf):
    spark_conf("spark.streaming.kafka.producer.cache.enabled", "false")
    source, target, group, settings = _one_partition(kafka, unique)
    assert settings.cache is False
    key = producer_cache.key_of(settings, transactional_id(group, source, 0))
    assert _write(settings, group, source, 0, 2) == 2
    assert _write(settings, group, source, 2, 4) == 2
    assert producer_cache.creations(key) == 2
    assert len(_read(kafka, target)) == 4


def _creations_per_worker(sc: Any, key: Any) -> dict[int, int]:
    """``pid -> producers of key created`` of the Python workers a 16-task job reaches."""
    def probe(_: Any) -> Any:
        from dstream_kafka.write import producer_cache as cache

        yield os.getpid(), cache.creations(key)

    return dict(sc.parallelize(range(16), 16).mapPartitions(probe).collect())


def test_an_at_least_once_stream_keeps_one_producer_per_python_worker_across_batches(
        kafka, make_ssc, sc, unique):
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source, partitions=2)
    kafka.create_topic(target, partitions=2)
    # A client.id of this test's own: its producers have a key no other test shares.
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers,
                          "client.id": unique("c")}, topic=target)
    written: list[int] = []
    ssc = make_ssc(0.3)
    _direct(ssc, kafka, source, group).map(lambda r: (r.key, r.value)).foreachRDD(
        lambda _t, rdd: written.append(output.write(rdd)))
    ssc.start()
    try:
        for round_ in range(4):
            kafka.produce(source, _values(10, f"r{round_}-"))
            wait_until(lambda: len(_read(kafka, target)) >= 10 * (round_ + 1),
                       f"round {round_} written", timeout=120, interval=0.3)
    finally:
        ssc.stop(stopSparkContext=False)
    assert sum(1 for n in written if n) >= 4  # a write task per partition in every round
    per_worker = _creations_per_worker(sc, producer_cache.key_of(output.settings, None))
    assert max(per_worker.values()) == 1, per_worker
    assert len(_read(kafka, target)) == 40


def test_an_exactly_once_stream_over_many_batches_writes_each_record_once(
        kafka, make_ssc, unique):
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source, partitions=2)
    kafka.create_topic(target, partitions=1)
    ssc = make_ssc(0.3)
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers}, topic=target,
                         guarantee="exactly-once")
    output.writeStream(_direct(ssc, kafka, source, group).map(lambda r: (r.key, r.value)))
    ssc.start()
    try:
        for round_ in range(4):
            kafka.produce(source, _values(6, f"r{round_}-"))
            ends = kafka.end_offsets(source)
            wait_until(lambda: _committed(kafka, group, source) == ends,
                       f"round {round_}'s offsets committed", timeout=120, interval=0.3)
    finally:
        ssc.stop(stopSparkContext=False)
    expected = [(k.encode(), v.encode()) for r in range(4) for k, v in _values(6, f"r{r}-")]
    assert sorted(_read(kafka, target)) == sorted(expected)
