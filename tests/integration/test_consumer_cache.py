"""Spark's KafkaDataConsumerSuite scenarios, and ours, against the real broker."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from dstream_kafka.read import consumer_cache
from dstream_kafka.read.consumer_cache import CacheKey, CacheSettings, acquire
from dstream_kafka.errors import DataLossError, KafkaReadError
from dstream_kafka.client.kafka_params import fix_kafka_params

TIMEOUT_MS = 10000
SER = "org.apache.kafka.common.serialization."


@pytest.fixture(params=["kafka-python", "confluent-kafka"])
def backend(request) -> str:
    """Run the test once per executor consumer backend."""
    return request.param


@pytest.fixture(autouse=True)
def close_cached_consumers():
    """Tests share this process's cache; close what each test left in it."""
    yield
    consumer_cache.clear()


@pytest.fixture
def filled(kafka, unique):
    """A one-partition topic holding values "0" .. "299" at offsets 0 .. 299."""
    name = unique("cache")
    kafka.create_topic(name)
    kafka.produce(name, [str(i) for i in range(300)])
    return name


def _setup(
    kafka: Any, topic: str, group: str, partition: int = 0
) -> tuple[CacheKey, dict[str, Any]]:
    config = fix_kafka_params(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": group,
            "value.deserializer": SER + "StringDeserializer",
        }
    )
    return CacheKey(config["group_id"], topic, partition), config


def _delta(before: dict[str, int], after: dict[str, int], *names: str) -> dict[str, int]:
    return {n: after[n] - before[n] for n in names}


def test_same_group_and_partition_reuse_the_cached_consumer(kafka, backend, filled, unique):
    key, config = _setup(kafka, filled, unique("g"))
    first = acquire(key, config, backend=backend, attempt_number=0)
    assert first.internal.get(0, TIMEOUT_MS).value == "0"
    first.release()
    second = acquire(key, config, backend=backend, attempt_number=0)
    assert second.internal is first.internal is consumer_cache.cached_consumer(key)
    assert second.internal.get(1, TIMEOUT_MS).value == "1"
    second.release()


def test_task_retry_gets_a_new_consumer_and_evicts_the_cached_one(kafka, backend, filled, unique):
    key, config = _setup(kafka, filled, unique("g"))
    first = acquire(key, config, backend=backend, attempt_number=0)
    first.internal.get(0, TIMEOUT_MS)
    first.release()
    retry = acquire(key, config, backend=backend, attempt_number=1)
    assert consumer_cache.cached_consumer(key) is None
    assert retry.internal is not first.internal and first.internal.closed
    assert retry.internal.get(5, TIMEOUT_MS).value == "5"
    retry.release()
    assert retry.internal.closed


def test_many_threads_using_consumers_concurrently_read_every_value(kafka, backend, filled, unique):
    key, config = _setup(kafka, filled, unique("g"))
    errors: list[str] = []

    def use(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(12):
            handle = acquire(
                key,
                config,
                backend=backend,
                use_cache=rng.random() < 0.7,
                attempt_number=0 if rng.random() < 0.9 else 1,
            )
            try:
                if rng.random() < 0.5:
                    values = [handle.internal.get(o, TIMEOUT_MS).value for o in range(300)]
                else:
                    values = [r.value for r in handle.internal.iter_range(0, 300, TIMEOUT_MS)]
                if values != [str(i) for i in range(300)]:
                    errors.append(f"thread {seed} read wrong values")
            except Exception as exc:  # collected and asserted below
                errors.append(f"thread {seed}: {exc!r}")
            finally:
                handle.release()

    threads = [threading.Thread(target=use, args=(i,)) for i in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    cached = consumer_cache.cached_consumer(key)
    assert cached is None or not cached.in_use


def test_sequential_ranges_reuse_buffered_records_and_a_jump_seeks(kafka, backend, filled, unique):
    key, config = _setup(kafka, filled, unique("g"))
    before = consumer_cache.stats()
    for start, until in ((0, 100), (100, 200), (200, 300)):
        with acquire(key, config, backend=backend, attempt_number=0) as handle:
            assert [r.offset for r in handle.internal.iter_range(start, until, TIMEOUT_MS)] == list(
                range(start, until)
            )
    sequential = consumer_cache.stats()
    with acquire(key, config, backend=backend, attempt_number=0) as handle:
        assert [r.value for r in handle.internal.iter_range(50, 53, TIMEOUT_MS)] == [
            "50",
            "51",
            "52",
        ]
    assert _delta(before, sequential, "creations", "seeks", "records") == {
        "creations": 1,
        "seeks": 1,
        "records": 300,
    }
    assert _delta(sequential, consumer_cache.stats(), "creations", "seeks") == {
        "creations": 0,
        "seeks": 1,
    }


def test_a_read_stopped_early_is_continued_without_seeking(kafka, backend, filled, unique):
    key, config = _setup(kafka, filled, unique("g"))
    with acquire(key, config, backend=backend, attempt_number=0) as handle:
        reader = handle.internal.iter_range(0, 300, TIMEOUT_MS)
        assert [next(reader).offset for _ in range(10)] == list(range(10))
        reader.close()
    seeks = consumer_cache.stats()["seeks"]
    with acquire(key, config, backend=backend, attempt_number=0) as handle:
        assert [r.offset for r in handle.internal.iter_range(10, 20, TIMEOUT_MS)] == list(
            range(10, 20)
        )
    assert consumer_cache.stats()["seeks"] == seeks


def test_evicted_consumers_are_closed(kafka, backend, unique):
    name = unique("evict")
    kafka.create_topic(name, partitions=2)
    kafka.produce(name, ["a"], partition=0)
    kafka.produce(name, ["b"], partition=1)
    group = unique("g")
    settings = CacheSettings(maxCapacity=1)
    consumer_cache.clear()
    handles = []
    for p in (0, 1):
        key, config = _setup(kafka, name, group, p)
        with acquire(key, config, backend=backend, settings=settings, attempt_number=0) as handle:
            assert [r.value for r in handle.internal.iter_range(0, 1, TIMEOUT_MS)] == ["ab"[p]]
        handles.append(handle)
    assert handles[0].internal.closed and not handles[1].internal.closed
    assert consumer_cache.cached_consumer(handles[0].internal.key) is None
    consumer_cache.clear()


def test_reading_offsets_deleted_from_the_log_is_data_loss(kafka, backend, filled, unique):
    kafka.delete_records(filled, {0: 100})
    key, config = _setup(kafka, filled, unique("g"))
    with acquire(key, config, backend=backend, attempt_number=0) as handle:
        with pytest.raises(
            DataLossError,
            match=r"Offset 10 of .* the earliest available offset is 100, so records \[10, 100\)",
        ):
            list(handle.internal.iter_range(10, 200, TIMEOUT_MS))
    assert consumer_cache.cached_consumer(key) is None  # a failed consumer is not kept


def test_reading_beyond_the_log_end_names_the_log_bounds(kafka, backend, filled, unique):
    key, config = _setup(kafka, filled, unique("g"))
    with acquire(key, config, backend=backend, attempt_number=0) as handle:
        with pytest.raises(KafkaReadError, match=r"Offset 500 .* the log holds \[0, 300\)"):
            list(handle.internal.iter_range(500, 510, TIMEOUT_MS))


def test_second_job_over_successor_ranges_creates_no_consumer_and_seeks_nowhere(
    kafka, backend, unique
):
    """One Python worker (local[1]) serves every task, as one executor JVM does in Spark.

    With local[2] the two reused workers take tasks in FIFO order, so a partition does not
    return to the worker that read its previous range; each worker keeps consumers for every
    partition it served, but they are positioned where that worker stopped. One worker makes
    the cache's effect measurable exactly.
    """
    name = unique("succ")
    kafka.create_topic(name, partitions=3)
    for p in range(3):
        kafka.produce(name, [f"{p}-{i}" for i in range(400)], partition=p)
    probe = Path(__file__).with_name("cache_reuse_probe.py")
    result = subprocess.run(
        [sys.executable, str(probe), kafka.bootstrap_servers, name, "3", "150", "400", backend],
        capture_output=True,
        text=True,
        timeout=180,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["first"] == list(range(150)) * 3 and out["second"] == list(range(150, 400)) * 3
    first = _delta(out["before"], out["after_first"], "creations", "seeks", "misses")
    second = _delta(
        out["after_first"], out["after_second"], "creations", "seeks", "hits", "records"
    )
    jump = _delta(out["after_second"], out["after_jump"], "creations", "seeks")
    assert first == {"creations": 3, "seeks": 3, "misses": 3}
    assert second == {"creations": 0, "seeks": 0, "hits": 3, "records": 750}
    assert jump == {"creations": 0, "seeks": 3}
    assert (
        len({out[k]["pid"] for k in ("before", "after_first", "after_second", "after_jump")}) == 1
    )


def _two_partition_topic(kafka: Any, unique: Any) -> str:
    """Partitions 0 and 1, values "<partition>-<offset>" at offsets 0 .. 299 of each."""
    name = unique("prepos")
    kafka.create_topic(name, partitions=2)
    for p in (0, 1):
        kafka.produce(name, [f"{p}-{i}" for i in range(300)], partition=p)
    return name


def test_a_worker_moves_its_consumer_of_a_range_read_elsewhere_so_the_next_batch_needs_no_seek(
        kafka, unique):
    from dstream_kafka.client.configs import params_fingerprint
    from dstream_kafka.read.task import ReadSettings, partition_reader

    topic = _two_partition_topic(kafka, unique)
    key, config = _setup(kafka, topic, unique("g"))
    settings = ReadSettings(groupId=key.groupId, pollTimeoutMs=TIMEOUT_MS,
                            fingerprint=params_fingerprint(config), backend="confluent-kafka",
                            prePosition=True)

    def task(ranges: list[tuple[int, int]], index: int) -> list[str]:
        """Run RDD partition ``index`` of a batch of ``ranges`` (per partition) in this worker."""
        descriptors = [(i, topic, p, start, until) for i, (p, (start, until))
                       in enumerate(zip((0, 1), ranges))]
        read = partition_reader(config, settings, descriptors)
        return [r.value for r in read(index, [(index, topic, (0, 1)[index])])]

    # batch 1: this worker reads both partitions; batch 2: partition 0's range runs in another
    # worker (index 0, started first), this worker reads partition 1 (index 1)
    assert task([(0, 100), (0, 100)], 0) == [f"0-{i}" for i in range(100)]
    assert task([(0, 100), (0, 100)], 1) == [f"1-{i}" for i in range(100)]
    before = consumer_cache.stats()
    assert task([(100, 200), (100, 200)], 1) == [f"1-{i}" for i in range(100, 200)]
    moved = _delta(before, consumer_cache.stats(), "prepositions", "seeks")
    assert moved == {"prepositions": 1, "seeks": 0}
    assert consumer_cache.cached_consumer(CacheKey(key.groupId, topic, 0)).next_offset == 200
    # batch 3 lands partition 0 here: its consumer is in place, and reads exactly its range
    before = consumer_cache.stats()
    assert task([(200, 300), (200, 300)], 0) == [f"0-{i}" for i in range(200, 300)]
    assert _delta(before, consumer_cache.stats(), "seeks", "creations") == {"seeks": 0,
                                                                            "creations": 0}


def test_streams_pre_position_only_confluent_consumers(sc, kafka, unique):
    from dstream_kafka.read.kafka_rdd import read_settings

    _, config = _setup(kafka, unique("t"), unique("g"))
    backend_key = "spark.streaming.kafka.consumer.backend"
    try:
        sc._conf.set(backend_key, "confluent-kafka")
        assert read_settings(sc, config, stream=True).prePosition
        assert not read_settings(sc, config).prePosition  # createRDD: no next batch
        sc._conf.set("spark.streaming.kafka.consumer.cache.prePosition", "false")
        assert not read_settings(sc, config, stream=True).prePosition
        sc._conf.set("spark.streaming.kafka.consumer.cache.prePosition", "true")
        sc._conf.set(backend_key, "kafka-python")
        assert not read_settings(sc, config, stream=True).prePosition
    finally:
        sc._conf.set(backend_key, "kafka-python")
        sc._conf.set("spark.streaming.kafka.consumer.cache.prePosition", "true")


def test_a_worker_s_later_kafka_python_consumers_reuse_the_broker_version_its_first_learned(
        kafka, filled):
    from dstream_kafka.read.backends import kafka_python

    config = fix_kafka_params({"bootstrap.servers": kafka.bootstrap_servers, "group.id": "g"})
    kafka_python._broker_versions.pop(str(config["bootstrap_servers"]), None)
    first = kafka_python.KafkaPythonBackend(filled, 0, config)
    learned = kafka_python._broker_versions[str(config["bootstrap_servers"])]
    assert learned[0] >= 4  # KRaft broker of Kafka 4
    second = kafka_python.KafkaPythonBackend(filled, 0, config)
    assert second._consumer.config["api_version"] == learned
    second.seek(10)
    assert [second.offset_of(r) for r in second.fetch(TIMEOUT_MS, 3)] == [10, 11, 12]
    first.close()
    second.close()
