"""``KafkaRDD.toDF`` and a direct stream's ``foreachBatch(func(df, batch_id))`` on a classic session."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange, OffsetStores
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.sql import offsetRanges
from dstream_kafka.streaming import datetime_to_ms

from support import TIMEOUT, wait_until

pytestmark = pytest.mark.integration


def _params(kafka: Any, group: str) -> dict[str, Any]:
    return {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
            "auto.offset.reset": "earliest"}


def _stream(make_ssc: Any, kafka: Any, topic: str, group: str, store: Any) -> tuple[Any, Any]:
    kafka.create_topic(topic)
    kafka.produce(topic, [("k", f"v{i}") for i in range(6)])
    context = make_ssc(0.3)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka, group)), offsetStore=store)
    return context, stream


def test_to_df_of_a_kafka_rdd_reads_its_ranges_in_the_kafka_schema(sc, kafka, unique):
    topic = unique("t")
    kafka.create_topic(topic)
    kafka.produce(topic, [("k", f"v{i}") for i in range(5)])
    rdd = KafkaUtils.createRDD(sc, _params(kafka, unique("g")), [OffsetRange(topic, 0, 1, 4)])
    df = rdd.toDF(includeHeaders=True)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp",
                          "timestampType", "headers"]
    assert [(r.offset, bytes(r.value)) for r in df.collect()] == [(1, b"v1"), (2, b"v2"), (3, b"v3")]
    assert offsetRanges(df) == rdd.offsetRanges()


def test_foreach_batch_commits_a_batch_only_after_func_returned(make_ssc, kafka, unique, tmp_path):
    topic, group = unique("t"), unique("g")
    store = OffsetStores.sqlite(str(tmp_path / "o.db"))
    context, stream = _stream(make_ssc, kafka, topic, group, store)
    seen: list[tuple[int, list[str], Any, list[OffsetRange]]] = []
    done = threading.Event()

    def func(df: Any, batch_id: int) -> None:
        ranges = offsetRanges(df)
        if not any(r.count() for r in ranges):
            return
        values = [bytes(r.value).decode() for r in df.collect()]
        # this batch's offsets are not in the store while func runs
        seen.append((batch_id, values, store.load(group, [topic]), ranges))
        done.set()

    stream.foreachBatch(func)
    context.start()
    assert done.wait(TIMEOUT), "no batch with records"
    wait_until(lambda: store.load(group, [topic]) == {TopicPartition(topic, 0): 6},
               "the batch's commit after func returned")
    batch_id, values, stored_during, ranges = seen[0]
    assert values == [f"v{i}" for i in range(6)]
    assert stored_during in ({}, {TopicPartition(topic, 0): 0})
    assert ranges == [OffsetRange(topic, 0, 0, 6)]
    assert batch_id > 1_600_000_000_000  # the batch time in epoch milliseconds


def test_a_failing_foreach_batch_func_commits_nothing_and_stops_the_stream(
        make_ssc, kafka, unique, tmp_path):
    topic, group = unique("t"), unique("g")
    store = OffsetStores.sqlite(str(tmp_path / "o.db"))
    context, stream = _stream(make_ssc, kafka, topic, group, store)
    calls: list[int] = []

    def func(df: Any, batch_id: int) -> None:
        if any(r.count() for r in offsetRanges(df)):
            calls.append(df.count())
            raise RuntimeError("the sink is down")

    stream.foreachBatch(func)
    context.start()
    with pytest.raises(Exception, match="the sink is down"):
        context.awaitTermination(TIMEOUT)
    assert calls == [6]
    assert store.load(group, [topic]) in ({}, {TopicPartition(topic, 0): 0})


def test_a_batch_whose_func_failed_is_run_again_after_a_restart_with_the_same_batch_id(
        make_ssc, kafka, unique, tmp_path):
    topic, group = unique("t"), unique("g")
    folder = tmp_path / "offsets"  # the checkpoint store keeps each planned batch (write-ahead)
    context, stream = _stream(make_ssc, kafka, topic, group, OffsetStores.checkpoint(folder))
    failed: list[tuple[int, list[OffsetRange]]] = []

    def fail(df: Any, batch_id: int) -> None:
        if any(r.count() for r in offsetRanges(df)):
            failed.append((batch_id, offsetRanges(df)))
            raise RuntimeError("the sink is down")

    stream.foreachBatch(fail)
    context.start()
    with pytest.raises(Exception, match="the sink is down"):
        context.awaitTermination(TIMEOUT)
    context.stop(stopSparkContext=False)
    seen: list[tuple[int, int, list[OffsetRange]]] = []

    context = make_ssc(0.3)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka, group)),
        offsetStore=OffsetStores.checkpoint(folder))

    engine_times: list[int] = []

    def record(df: Any, batch_id: int) -> None:
        if any(r.count() for r in offsetRanges(df)):
            seen.append((batch_id, df.count(), offsetRanges(df)))

    stream.foreachRDD(lambda time, rdd: engine_times.extend(
        [datetime_to_ms(time)] if any(r.count() for r in rdd.offsetRanges()) else []))
    stream.foreachBatch(record)
    context.start()
    wait_until(lambda: seen, "the failed batch run again")
    assert failed == [(seen[0][0], [OffsetRange(topic, 0, 0, 6)])]
    assert seen[0][1:] == (6, [OffsetRange(topic, 0, 0, 6)])
    assert engine_times[0] > seen[0][0]  # the new run's engine time is not the batch's id
