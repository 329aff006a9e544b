"""Issue #13 item 4: failOnDataLoss on executors, against the real broker.

Each test deletes records (Kafka's delete-records) after a batch was planned and before its
executors read it: inside ``foreachRDD``, before the job that reads the RDD.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetStores
from dstream_kafka.offsets import OffsetRange, TopicPartition

from stream_runs import params, values
from support import wait_until


def delete_then_read(kafka: Any, topic: str, before: int, out: list[str]) -> Any:
    """An output that deletes ``topic``-0 below ``before`` once, then collects the batch."""
    deleted = threading.Event()

    def output(rdd: Any) -> None:
        if not deleted.is_set() and any(r.count() for r in rdd.offsetRanges()):
            kafka.delete_records(topic, {0: before})
            deleted.set()
        out.extend(rdd.map(lambda r: r.value).collect())

    return output


def start(make_ssc: Any, kafka: Any, topic: str, group: str, store: Any,
          **options: str) -> tuple[Any, list[str]]:
    """Start a stream of ``topic`` (20 records) whose first batch loses offsets 0-7."""
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, values("v", 20))
    context = make_ssc(0.2)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], params(kafka, group)), offsetStore=store,
        options={"startingOffsets": "earliest", **options})
    out: list[str] = []
    stream.foreachRDD(delete_then_read(kafka, topic, 8, out))
    context.start()
    return context, out


def test_with_fail_on_data_loss_false_deleted_records_are_skipped_and_the_loss_is_stored(
        kafka, make_ssc, unique, tmp_path):
    db, topic, group = str(tmp_path / "o.db"), unique("loss"), unique("g")
    start(make_ssc, kafka, topic, group, OffsetStores.sqlite(db), failOnDataLoss="false")
    store = OffsetStores.sqlite(db)
    wait_until(lambda: store.data_losses(group), "the loss record")
    assert [(x.topic, x.partition, x.lost_from, x.lost_until) for x in store.data_losses(group)] == [
        (topic, 0, 0, 8)]
    assert store.load(group, [topic]) == {TopicPartition(topic, 0): 20}


def test_with_fail_on_data_loss_false_the_records_still_in_kafka_are_read(kafka, make_ssc, unique):
    _context, out = start(make_ssc, kafka, unique("loss"), unique("g"), None,
                          failOnDataLoss="false")
    wait_until(lambda: len(out) >= 12, "the 12 records left")
    assert sorted(out) == values("v", 20)[8:]


def test_with_fail_on_data_loss_true_the_task_error_names_the_partition_and_the_lost_offsets(
        kafka, make_ssc, unique):
    topic = unique("loss")
    context, _out = start(make_ssc, kafka, topic, unique("g"), None)
    with pytest.raises(Exception) as failure:
        context.awaitTermination(90)
    assert f"Offset 0 of {topic}-0 is no longer in Kafka" in str(failure.value)
    assert "records [0, 8) were removed" in str(failure.value)
    assert "set failOnDataLoss=false to skip them" in str(failure.value)


def test_create_rdd_from_options_reports_ranges_deleted_while_reading(kafka, sc, unique):
    topic = unique("loss")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, values("v", 10))
    rdd = KafkaUtils.createRDDFromOptions(sc, params(kafka, unique("g")),
                                          {"assign": f'{{"{topic}":[0]}}', "failOnDataLoss": "false"})
    kafka.delete_records(topic, {0: 4})
    assert sorted(rdd.map(lambda r: r.value).collect()) == values("v", 10)[4:]
    assert rdd.lostOffsetRanges() == [OffsetRange(topic, 0, 0, 4)]


@pytest.mark.parametrize("kind", ["Subscribe", "Assign"])
def test_a_stored_partition_of_a_deleted_topic_does_not_hold_the_start(
        kafka, make_ssc, unique, tmp_path, kind):
    kept, gone, group, db = unique("kept"), unique("gone"), unique("g"), str(tmp_path / "o.db")
    for topic in (kept, gone):
        kafka.create_topic(topic, partitions=1)
        kafka.produce(topic, values("v", 3))
    strategy = (ConsumerStrategies.Subscribe([kept, gone], params(kafka, group)) if kind == "Subscribe"
                else ConsumerStrategies.Assign([(kept, 0), (gone, 0)], params(kafka, group)))
    options = {"startingOffsets": "earliest", "failOnDataLoss": "false"}
    first = make_ssc(0.2)
    out: list[str] = []
    KafkaUtils.createDirectStream(first, LocationStrategies.PreferConsistent, strategy,
                                  offsetStore=OffsetStores.sqlite(db), options=options
                                  ).foreachRDD(lambda rdd: out.extend(rdd.map(lambda r: r.value).collect()))
    first.start()
    wait_until(lambda: len(out) >= 6, "both topics read")
    first.stop(stopSparkContext=False, stopGraceFully=True)
    kafka.delete_topic(gone)
    second = make_ssc(0.2)
    stream = KafkaUtils.createDirectStream(second, LocationStrategies.PreferConsistent, strategy,
                                           offsetStore=OffsetStores.sqlite(db), options=options)
    stream.foreachRDD(lambda rdd: None)
    started = time.monotonic()
    second.start()
    assert time.monotonic() - started < 15
    wait_until(lambda: stream.lastProgress is not None, "a batch without the deleted topic")
    assert (gone, 0, 3, 3) in [(x.topic, x.partition, x.lost_from, x.lost_until)
                              for x in OffsetStores.sqlite(db).data_losses(group)]
