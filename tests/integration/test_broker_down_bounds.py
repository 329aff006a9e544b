"""Bounds that hold while the broker is down: a graceful stop, the start, a batch's read.

Every test runs its own one-broker cluster (``own_kafka``), stops it and starts it again; the
session's shared broker is never touched.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import pytest
from support import outage_after_first_commit, wait_until

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetStores
from dstream_kafka.offsets import TopicPartition

from stream_runs import params


def _planning_in(function: str) -> bool:
    """Whether the streaming scheduler thread is inside ``function`` now."""
    frames = sys._current_frames()
    for thread in threading.enumerate():
        if thread.name == "dstream-scheduler" and thread.ident in frames:
            frame: Any = frames[thread.ident]
            while frame is not None:
                if frame.f_code.co_name == function:
                    return True
                frame = frame.f_back
    return False


def _stored_run(kafka: Any, make_ssc: Any, topic: str, group: str, db: str, batch: float = 0.5,
                **extra: Any) -> tuple[Any, list[str]]:
    ssc = make_ssc(batch)
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], params(kafka, group, **{"auto.offset.reset": "earliest", **extra})),
        offsetStore=OffsetStores.sqlite(db))
    seen: list[str] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: r.value).collect()))
    ssc.start()
    return ssc, seen


@pytest.mark.slow  # its own broker
def test_a_graceful_stop_with_the_broker_down_returns_within_the_graceful_stop_timeout(
        own_kafka, make_ssc, unique, tmp_path) -> None:
    topic, group, db = unique("t"), unique("g"), str(tmp_path / "o.db")
    own_kafka.create_topic(topic, partitions=1)
    own_kafka.produce(topic, [(None, f"a{i}".encode()) for i in range(10)])
    # The defaults: 2 tries of up to 30 s each for a batch's latest offsets.
    ssc, seen = _stored_run(own_kafka, make_ssc, topic, group, db)
    wait_until(lambda: len(seen) == 10, "the first 10 records")
    wait_until(lambda: OffsetStores.sqlite(db).load(group) == {TopicPartition(topic, 0): 10},
               "the commit of the first 10 records")
    (node,) = own_kafka.node_ids
    own_kafka.stop_broker(node, kill=True)
    wait_until(lambda: _planning_in("latest_offsets"), "a batch's look-up of the latest offsets")
    time.sleep(1.5)  # the look-up is now waiting for the dead broker (not a synchronisation)
    started = time.monotonic()
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
    took = time.monotonic() - started
    # README: spark.streaming.gracefulStopTimeout is the longest graceful stop (10 batches, 5 s
    # here); generous headroom for a loaded machine, far below the 60 s of the look-up's bound.
    assert took < ssc.graceful_stop_timeout + 15, f"the graceful stop took {took:.1f} s"
    ssc.awaitTerminationOrTimeout(0)  # the abandoned look-up fails nothing the user asked for
    assert OffsetStores.sqlite(db).load(group) == {TopicPartition(topic, 0): 10}


@pytest.mark.slow  # its own broker
def test_a_start_with_starting_timestamp_and_the_broker_down_fails_with_broker_timeout_naming_the_servers(
        own_kafka, make_ssc, unique) -> None:
    from dstream_kafka.errors import BrokerTimeoutError

    topic, group = unique("t"), unique("g")
    own_kafka.create_topic(topic, partitions=1)
    servers = own_kafka.bootstrap_servers
    (node,) = own_kafka.node_ids
    own_kafka.stop_broker(node, kill=True)
    ssc = make_ssc(0.5)
    kafka_params = {**params(own_kafka, group), "bootstrap.timeout.ms": 3000}
    KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe([topic], kafka_params),
        options={"startingTimestamp": int(time.time() * 1000) - 60_000}).foreachRDD(lambda rdd: None)
    with pytest.raises(BrokerTimeoutError, match=f"Could not reach any Kafka broker at bootstrap.servers={servers} "
                                                 "within bootstrap.timeout.ms=3000 ms"):
        ssc.start()


@pytest.mark.slow  # its own broker, killed and restarted, and a group session of 10 s
def test_a_start_waiting_for_a_member_that_could_not_leave_during_an_outage_says_so(
        own_kafka, make_ssc, unique, spark_conf, tmp_path, caplog) -> None:
    topic, group, db = unique("t"), unique("g"), str(tmp_path / "o.db")
    own_kafka.create_topic(topic, partitions=1)
    own_kafka.produce(topic, [(None, f"a{i}".encode()) for i in range(10)])
    spark_conf("spark.streaming.kafka.lookupTimeout", "2s")
    spark_conf("spark.streaming.kafka.maxRetries", "0")
    spark_conf("spark.streaming.kafka.consumer.poll.ms", "60000")
    session = {"session.timeout.ms": 10000}
    # Two identities: a restart with the same one takes the stranded member's place at once
    # (static membership, failures.rst); a new one waits for its session to end.
    first, seen = _stored_run(own_kafka, make_ssc, topic, group, db, **session,
                              **{"group.instance.id": unique("first")})
    outage_after_first_commit(own_kafka, first, seen, db, group, topic)
    own_kafka.produce(topic, [(None, f"b{i}".encode()) for i in range(5)])
    with caplog.at_level("WARNING", logger="dstream_kafka.plan.consumer_strategy"):
        second, again = _stored_run(own_kafka, make_ssc, topic, group, db, **session,
                                    **{"group.instance.id": unique("second")})
    assert any("could not leave the group" in r.getMessage() and "session.timeout.ms" in r.getMessage()
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    wait_until(lambda: len(again) >= 5 or second.getState() == "STOPPED", "the 5 pending records")
    second.awaitTerminationOrTimeout(0)
    assert sorted(again) == sorted(f"b{i}" for i in range(5))


@pytest.mark.slow  # its own broker, down for longer than the poll timeout during a batch's read
def test_a_batch_read_rides_out_a_broker_outage_longer_than_the_poll_timeout_within_the_planning_bound(
        own_kafka, make_ssc, unique, spark_conf, tmp_path) -> None:
    topic, group, db = unique("t"), unique("g"), str(tmp_path / "o.db")
    own_kafka.create_topic(topic, partitions=1)
    own_kafka.produce(topic, [(None, f"a{i}".encode()) for i in range(10)])
    spark_conf("spark.streaming.kafka.consumer.poll.ms", "2000")  # far below the outage
    spark_conf("spark.streaming.kafka.lookupTimeout", "20s")  # the bound: 3 tries of 20 s
    spark_conf("spark.streaming.kafka.maxRetries", "2")
    ssc = make_ssc(0.5)
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], params(own_kafka, group, **{"auto.offset.reset": "earliest"})),
        offsetStore=OffsetStores.sqlite(db))
    planned, go = threading.Event(), threading.Event()
    seen: list[str] = []

    def read(rdd: Any) -> None:
        if seen and sum(r.count() for r in rdd.offsetRanges()) and not go.is_set():
            planned.set()
            go.wait(120)  # the broker goes down between the planning and the read
        seen.extend(rdd.map(lambda r: r.value).collect())

    stream.foreachRDD(read)
    ssc.start()
    wait_until(lambda: len(seen) == 10, "the first 10 records (the executor's consumer is connected)")
    own_kafka.produce(topic, [(None, f"b{i}".encode()) for i in range(10)])
    wait_until(planned.is_set, "the batch of the next 10 records")
    (node,) = own_kafka.node_ids
    own_kafka.stop_broker(node, kill=True)
    go.set()
    time.sleep(6)  # the outage: three poll timeouts of the read (not a synchronisation)
    own_kafka.start_broker(node)
    wait_until(lambda: len(seen) >= 20 or ssc.getState() == "STOPPED", "the next 10 records", timeout=120)
    ssc.awaitTerminationOrTimeout(0)  # raises the error that stopped the stream, if any
    assert sorted(seen) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
