"""plan/positions.py: a topic deleted under a running stream, against the real broker.

A topic deleted after the stream read it to its end is not data loss, even with failOnDataLoss:
the stream reads two topics with failOnDataLoss=true (the default); one of them, read to its last
record, is deleted. Nothing was lost, so the stream goes on with the other topic and records no
loss. A topic deleted with records not read yet fails the stream naming the topic, or, with
failOnDataLoss=False, is recorded as data loss and skipped (issue #18 item 7).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka import ConsumerStrategies
from dstream_kafka.errors import DataLossError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores import OffsetStores

from stream_runs import _params, _running
from support import wait_until

pytestmark = pytest.mark.integration


def test_a_topic_read_to_its_end_and_deleted_leaves_a_fail_on_data_loss_stream_running(
        kafka: Any, make_ssc: Callable[..., Any], unique: Callable[[str], str], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    from support import string_params, wait_until

    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

    kept, doomed, group = unique("kept"), unique("doomed"), unique("g")
    for topic in (kept, doomed):
        kafka.create_topic(topic, partitions=1)
        kafka.produce(topic, [(None, topic.encode())] * 2)
    ssc = make_ssc()
    params = string_params(kafka, group, **{"auto.offset.reset": "earliest"})
    strategy = ConsumerStrategies.Subscribe([kept, doomed], params)
    seen: list[str] = []
    with OffsetStores.sqlite(str(tmp_path / "offsets.db")) as store:
        KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent, strategy, offsetStore=store,
                                      failOnDataLoss=True).foreachRDD(
            lambda rdd: seen.extend(rdd.map(lambda r: r.value).collect()))
        with caplog.at_level(logging.WARNING, logger="dstream_kafka.plan.positions"):
            ssc.start()
            wait_until(lambda: len(seen) == 4, "the 4 records")
            kafka.delete_topic(doomed)
            wait_until(lambda: any(f"Topic '{doomed}' was deleted" in m for m in caplog.messages)
                       or ssc.getState() == "STOPPED", "the stream noticing the deletion")
            kafka.produce(kept, [(None, b"after")])
            wait_until(lambda: "after" in seen or ssc.getState() == "STOPPED", "the record sent after the deletion")
            ssc.awaitTerminationOrTimeout(0)  # raises the error that stopped the stream, if any
        assert "after" in seen
        assert any(f"{doomed}-0 (up to offset 2)" in m and "nothing is lost" in m for m in caplog.messages)
        assert store.data_losses(group) == []
        wait_until(lambda: store.load(group).get(TopicPartition(kept, 0)) == 3, "the commit of the new record")
        ssc.stop(stopSparkContext=False)  # before the store closes


@pytest.mark.parametrize("how", ["Subscribe", "Assign"])
def test_a_topic_deleted_with_unread_records_under_a_running_stream_fails_it_naming_the_topic(
        kafka, make_ssc, unique, spark_conf, how) -> None:
    from dstream_kafka.offsets import TopicPartition

    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [(None, b"v")] * 300)
    spark_conf("spark.streaming.kafka.lookupTimeout", "5s")
    params = _params(kafka.bootstrap_servers, group)
    strategy = (ConsumerStrategies.Subscribe([topic], params) if how == "Subscribe"
                else ConsumerStrategies.Assign([TopicPartition(topic, 0)], params))
    ssc, seen = _running(kafka, make_ssc, strategy, maxOffsetsPerTrigger=1)  # 1 record a batch
    wait_until(lambda: len(seen) >= 3, "3 records")
    kafka.delete_topic(topic)
    started = time.monotonic()
    with pytest.raises(DataLossError, match=f"{topic}-0 \\(at offset \\d+\\) no longer exist in Kafka: "
                                            f"topic '{topic}' was deleted.*failOnDataLoss=False"):
        ssc.awaitTermination(timeout=60)
    assert time.monotonic() - started < 45


def test_a_topic_deleted_under_a_stream_with_fail_on_data_loss_off_is_recorded_and_skipped(
        kafka, make_ssc, unique, spark_conf, tmp_path) -> None:
    from dstream_kafka.offsets import TopicPartition

    kept, doomed, group = unique("kept"), unique("doomed"), unique("g")
    for topic in (kept, doomed):
        kafka.create_topic(topic, partitions=1)
        kafka.produce(topic, [(None, topic.encode())] * 2)
    spark_conf("spark.streaming.kafka.lookupTimeout", "5s")
    db = str(tmp_path / "offsets.db")
    ssc, seen = _running(kafka, make_ssc, ConsumerStrategies.Subscribe(
        [kept, doomed], _params(kafka.bootstrap_servers, group)),
        offsetStore=OffsetStores.sqlite(db), failOnDataLoss=False)
    wait_until(lambda: len(seen) == 4, "the 4 records")
    kafka.delete_topic(doomed)
    time.sleep(2)
    kafka.produce(kept, [(None, b"after")])
    wait_until(lambda: "after" in seen or ssc.getState() == "STOPPED", "the record sent after the deletion")
    ssc.awaitTerminationOrTimeout(0)  # raises the error that stopped the stream, if any
    assert "after" in seen
    assert OffsetStores.sqlite(db).data_losses(group) == []  # read to its end: nothing was lost
    assert TopicPartition(kept, 0) in OffsetStores.sqlite(db).load(group)
