"""plan/consumer_strategy.py's wait for an assignment, against the real broker (issue #18 item 11):
a stream the group gives no partitions (a held group, a topic that does not exist, a pattern
matching none) fails after ``spark.streaming.kafka.assignmentTimeout`` naming what it waited
for, instead of running empty; a topic created during the wait is read."""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
from dstream_kafka.errors import BrokerTimeoutError, UnknownTopicPartitionError

from stream_runs import _members, _params, _values
from support import poll_as_member, wait_until


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
