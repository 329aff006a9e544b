"""Hardening (issue #18, items 3, 4, 7, 10, 11): a direct stream's life with the broker.

A stream leaves its group when it fails or stops; a stream the group gives no partitions (a
held group, a topic that does not exist) fails after ``spark.streaming.kafka.assignmentTimeout``
instead of running empty; a broker restart is ridden out within ``maxRetries`` tries of
``lookupTimeout``; a topic deleted under a running stream is data loss naming the topic.
Every test runs against the real broker (a dedicated cluster for the restart tests).
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import pytest
from support import STRING_DESERIALIZER, poll_as_member, wait_until

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka.errors import BrokerTimeoutError, DataLossError, UnknownTopicPartitionError
from dstream_kafka.stores import OffsetStores


def _params(servers: str, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": servers, "group.id": group, "auto.offset.reset": "earliest",
            "value.deserializer": STRING_DESERIALIZER, **extra}


def _members(kafka: Any, group: str) -> int:
    info = kafka.admin().describe_groups([group])[group]
    return len(info.get("members") or [])


def _values(stream: Any) -> list[str]:
    seen: list[str] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: r.value).collect()))
    return seen


def _failing_start(kafka: Any, make_ssc: Any, unique: Any, tmp_path: Any) -> tuple[str, str]:
    """Start a stream whose stored offset is past the log end; return (topic, group)."""
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [(None, f"v{i}".encode()) for i in range(10)])
    store = OffsetStores.sqlite(str(tmp_path / "offsets.db"))
    store.commit(group, 1, [OffsetRange(topic, 0, 0, 100)])  # the log ends at 10
    ssc = make_ssc()
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], _params(
                                               kafka.bootstrap_servers, group)),
                                           offsetStore=store)
    stream.foreachRDD(lambda rdd: None)
    with pytest.raises(DataLossError):
        ssc.start()
    return topic, group


# -- item 3: a failed or stopped stream leaves its group -------------------------------------
def test_a_stream_that_fails_at_start_leaves_its_consumer_group(kafka, make_ssc, unique, tmp_path) -> None:
    _topic, group = _failing_start(kafka, make_ssc, unique, tmp_path)
    assert _members(kafka, group) == 0


def test_a_new_stream_of_the_group_reads_right_after_a_failed_start(
        kafka, make_ssc, unique, tmp_path, spark_conf) -> None:
    topic, group = _failing_start(kafka, make_ssc, unique, tmp_path)
    spark_conf("spark.streaming.kafka.assignmentTimeout", "20s")
    ssc = make_ssc()
    seen = _values(KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, group))))
    started = time.monotonic()
    ssc.start()
    assert time.monotonic() - started < 15
    wait_until(lambda: len(seen) >= 10, "the 10 records")
    assert sorted(seen) == sorted(f"v{i}" for i in range(10))


def test_a_stopped_stream_leaves_its_consumer_group(kafka, make_ssc, unique) -> None:
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    ssc = make_ssc()
    KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, group))
    ).foreachRDD(lambda rdd: None)
    ssc.start()
    assert _members(kafka, group) == 1
    ssc.stop(stopSparkContext=False)
    assert _members(kafka, group) == 0


def _holder(kafka: Any, topic: str, group: str) -> Any:
    """A plain consumer of ``group`` holding every partition of ``topic``."""
    from kafka import KafkaConsumer

    holder = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                           enable_auto_commit=False)
    wait_until(lambda: poll_as_member(holder) is not None and holder.assignment(),
               "the holder's assignment")
    return holder


def test_a_stream_whose_group_assigns_it_nothing_fails_naming_the_group_and_the_key(
        kafka, make_ssc, unique, spark_conf) -> None:
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    holder = _holder(kafka, topic, group)
    try:
        spark_conf("spark.streaming.kafka.assignmentTimeout", "3s")
        ssc = make_ssc()
        KafkaUtils.createDirectStream(
            ssc, LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, group))
        ).foreachRDD(lambda rdd: None)
        started = time.monotonic()
        with pytest.raises(BrokerTimeoutError,
                           match=f"No partitions assigned after 3 s.*another member of group {group}"
                                 ".*spark.streaming.kafka.assignmentTimeout"):
            ssc.start()
        assert time.monotonic() - started < 20
        # the holder answers the rebalance the stream caused, and stays a member while it leaves
        wait_until(lambda: poll_as_member(holder) is not None and _members(kafka, group) == 1,
                   "the stream to leave the group", timeout=20)
    finally:
        holder.close()


# -- item 11: a topic that does not exist ------------------------------------------------------
def _missing_topic_stream(kafka: Any, make_ssc: Any, unique: Any, strategy: Callable[..., Any]) -> Any:
    ssc = make_ssc()
    KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        strategy(_params(kafka.bootstrap_servers, unique("g")))).foreachRDD(lambda rdd: None)
    return ssc


def test_subscribing_to_a_missing_topic_fails_after_the_assignment_timeout_naming_it(
        kafka, make_ssc, unique, spark_conf) -> None:
    topic = unique("missing")
    spark_conf("spark.streaming.kafka.assignmentTimeout", "3s")
    ssc = _missing_topic_stream(kafka, make_ssc, unique,
                                lambda p: ConsumerStrategies.Subscribe([topic], p))
    started = time.monotonic()
    with pytest.raises(UnknownTopicPartitionError,
                       match=f"Subscribe\\({topic}\\): no topic it reads exists in the Kafka cluster "
                             f"at {kafka.bootstrap_servers} after waiting 3 s"):
        ssc.start()
    assert time.monotonic() - started < 20


def test_the_wait_for_a_missing_topic_is_logged_with_its_bound_and_key(
        kafka, make_ssc, unique, spark_conf, caplog) -> None:
    topic = unique("missing")
    spark_conf("spark.streaming.kafka.assignmentTimeout", "2s")
    ssc = _missing_topic_stream(kafka, make_ssc, unique,
                                lambda p: ConsumerStrategies.Subscribe([topic], p))
    with caplog.at_level(logging.INFO, "dstream_kafka.plan.consumer_strategy"):
        with pytest.raises(UnknownTopicPartitionError):
            ssc.start()
    assert any(f"Subscribe({topic}): no topic it reads exists yet" in m
               and "waiting up to 2 s (spark.streaming.kafka.assignmentTimeout)" in m
               for m in caplog.messages)


def test_a_pattern_matching_no_topic_fails_after_the_assignment_timeout(
        kafka, make_ssc, unique, spark_conf) -> None:
    prefix = unique("nomatch")
    spark_conf("spark.streaming.kafka.assignmentTimeout", "3s")
    ssc = _missing_topic_stream(kafka, make_ssc, unique,
                                lambda p: ConsumerStrategies.SubscribePattern(f"{prefix}.*", p))
    with pytest.raises(UnknownTopicPartitionError, match=f"SubscribePattern\\({prefix}.*\\): no topic"):
        ssc.start()


def test_a_topic_created_during_the_assignment_wait_is_read(
        kafka, make_ssc, unique, spark_conf) -> None:
    import threading

    topic = unique("late")
    spark_conf("spark.streaming.kafka.assignmentTimeout", "60s")
    ssc = make_ssc()
    seen = _values(KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, unique("g"),
                                                      **{"metadata.max.age.ms": 1000}))))

    def create() -> None:
        time.sleep(3)
        kafka.create_topic(topic, partitions=1)
        kafka.produce(topic, [(None, b"late")])

    creator = threading.Thread(target=create)
    creator.start()
    ssc.start()
    creator.join()
    wait_until(lambda: seen == ["late"], "the record of the late topic")


def test_an_assignment_timeout_that_is_not_a_time_is_refused_naming_the_key(
        kafka, make_ssc, unique, spark_conf) -> None:
    from dstream_kafka.errors import ConfigurationError

    spark_conf("spark.streaming.kafka.assignmentTimeout", "soon")
    with pytest.raises(ConfigurationError, match="'soon' for spark.streaming.kafka.assignmentTimeout"):
        KafkaUtils.createDirectStream(
            make_ssc(), LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([unique("t")], _params(kafka.bootstrap_servers, unique("g"))))


# -- item 10: failOnDataLoss=False and a topic recreated smaller -------------------------------
def test_a_stored_offset_past_the_log_end_with_fail_on_data_loss_off_does_not_hint_to_turn_it_off(
        kafka, make_ssc, unique, tmp_path) -> None:
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [(None, b"v")] * 5)
    store = OffsetStores.sqlite(str(tmp_path / "offsets.db"))
    store.commit(group, 1, [OffsetRange(topic, 0, 0, 20)])  # the recreated log ends at 5
    ssc = make_ssc()
    KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, group)),
        offsetStore=store, failOnDataLoss=False).foreachRDD(lambda rdd: None)
    with pytest.raises(DataLossError) as caught:
        ssc.start()
    message = str(caught.value)
    assert "set failOnDataLoss=False" not in message
    assert f"stored offset 20 of {topic}-0" in message
    assert "failOnDataLoss=False does not skip this case" in message
    assert "new group.id" in message


def test_a_stored_offset_past_the_log_end_is_kept_in_the_store(kafka, make_ssc, unique, tmp_path) -> None:
    from dstream_kafka.offsets import TopicPartition

    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [(None, b"v")] * 5)
    db = str(tmp_path / "offsets.db")
    OffsetStores.sqlite(db).commit(group, 1, [OffsetRange(topic, 0, 0, 20)])
    ssc = make_ssc()
    KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka.bootstrap_servers, group)),
        offsetStore=OffsetStores.sqlite(db), failOnDataLoss=False).foreachRDD(lambda rdd: None)
    with pytest.raises(DataLossError):
        ssc.start()
    assert OffsetStores.sqlite(db).load(group) == {TopicPartition(topic, 0): 20}


# -- item 7: a topic deleted under a running stream --------------------------------------------
def _running(kafka: Any, make_ssc: Any, strategy: Any, **kwargs: Any) -> tuple[Any, list[str]]:
    ssc = make_ssc()
    seen = _values(KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                                 strategy, **kwargs))
    ssc.start()
    return ssc, seen


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


# -- item 4: a broker restarted under a running stream -----------------------------------------
def _restart(kafka: Any, down_s: float) -> None:
    """SIGKILL the broker, keep it down ``down_s`` seconds, start it again."""
    (node,) = kafka.node_ids
    kafka.stop_broker(node, kill=True)
    time.sleep(down_s)
    kafka.start_broker(node)


def _stored_stream(kafka: Any, make_ssc: Any, topic: str, group: str, db: str,
                   **extra: Any) -> tuple[Any, list[str]]:
    return _running(kafka, make_ssc, ConsumerStrategies.Subscribe(
        [topic], _params(kafka.bootstrap_servers, group, **extra)), offsetStore=OffsetStores.sqlite(db))


@pytest.mark.slow  # its own broker, killed for 15 s: about 45 s
def test_a_stream_rides_out_a_broker_restart_within_its_retry_bounds(
        own_kafka, make_ssc, unique, spark_conf, tmp_path) -> None:
    topic, group = unique("t"), unique("g")
    own_kafka.create_topic(topic, partitions=1)
    own_kafka.produce(topic, [(None, f"a{i}".encode()) for i in range(10)])
    # 13 tries of up to 5 s, 1 s apart: a 70 s bound for a 15 s outage plus the broker's start.
    spark_conf("spark.streaming.kafka.lookupTimeout", "5s")
    spark_conf("spark.streaming.kafka.maxRetries", "12")
    spark_conf("spark.streaming.kafka.retryBackoff", "1s")
    # Executors wait for the restarted broker's partition leader under their own bound.
    spark_conf("spark.streaming.kafka.consumer.poll.ms", "60000")
    ssc, seen = _stored_stream(own_kafka, make_ssc, topic, group, str(tmp_path / "o.db"))
    wait_until(lambda: len(seen) == 10, "the first 10 records")
    _restart(own_kafka, down_s=15)
    own_kafka.produce(topic, [(None, f"b{i}".encode()) for i in range(50)])
    wait_until(lambda: len(seen) >= 60 or ssc.getState() == "STOPPED", "the 50 records sent after the restart",
               timeout=120)
    ssc.awaitTerminationOrTimeout(0)  # raises the error that stopped the stream, if any
    assert sorted(seen) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(50)])


def test_a_broker_down_longer_than_the_bounds_fails_the_stream_naming_the_broker(
        own_kafka, make_ssc, unique, spark_conf, tmp_path) -> None:
    topic, group = unique("t"), unique("g")
    own_kafka.create_topic(topic, partitions=1)
    spark_conf("spark.streaming.kafka.lookupTimeout", "2s")
    spark_conf("spark.streaming.kafka.maxRetries", "1")
    ssc, _seen = _stored_stream(own_kafka, make_ssc, topic, group, str(tmp_path / "o.db"))
    time.sleep(1)
    (node,) = own_kafka.node_ids
    own_kafka.stop_broker(node, kill=True)
    with pytest.raises(BrokerTimeoutError, match=f"Kafka at {own_kafka.bootstrap_servers} did not "
                                                 f"return the latest offsets of {topic}-0 in 2 tries"):
        ssc.awaitTermination(timeout=60)


@pytest.mark.slow  # its own broker, killed and restarted, and a group session: about 35 s
def test_a_stream_restarted_in_the_same_process_after_a_broker_restart_reads_the_pending_records(
        own_kafka, make_ssc, unique, spark_conf, tmp_path) -> None:
    topic, group = unique("t"), unique("g")
    own_kafka.create_topic(topic, partitions=1)
    own_kafka.produce(topic, [(None, f"a{i}".encode()) for i in range(10)])
    db = str(tmp_path / "o.db")
    spark_conf("spark.streaming.kafka.lookupTimeout", "2s")
    spark_conf("spark.streaming.kafka.maxRetries", "0")
    # The first stream's member cannot leave the group while the broker is down, so the second
    # stream's join waits out its session: the broker's minimum of 6 s, not the 45 s default.
    session = {"session.timeout.ms": 6000}
    # The executors' first fetch may meet the restarted broker still loading its partition.
    spark_conf("spark.streaming.kafka.consumer.poll.ms", "60000")
    first, seen = _stored_stream(own_kafka, make_ssc, topic, group, db, **session)
    wait_until(lambda: len(seen) == 10, "the first 10 records")
    (node,) = own_kafka.node_ids
    own_kafka.stop_broker(node, kill=True)
    with pytest.raises(BrokerTimeoutError):
        first.awaitTermination(timeout=60)
    own_kafka.start_broker(node)
    own_kafka.produce(topic, [(None, f"b{i}".encode()) for i in range(50)])
    second, again = _stored_stream(own_kafka, make_ssc, topic, group, db, **session)
    wait_until(lambda: len(again) >= 50 or second.getState() == "STOPPED", "the 50 pending records")
    second.awaitTerminationOrTimeout(0)
    assert sorted(again) == sorted(f"b{i}" for i in range(50))
