"""client/latest_offsets.py's retried look-ups under a running stream whose broker restarts
(issue #18 item 4): an outage is ridden out within ``maxRetries`` tries of ``lookupTimeout``,
a longer one fails the stream naming the broker. Each test kills its own broker (``own_kafka``)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies
from dstream_kafka.errors import BrokerTimeoutError
from dstream_kafka.stores import OffsetStores

from stream_runs import _params, _running
from support import outage_after_first_commit, wait_until


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
    outage_after_first_commit(own_kafka, first, seen, db, group, topic)
    own_kafka.produce(topic, [(None, f"b{i}".encode()) for i in range(50)])
    second, again = _stored_stream(own_kafka, make_ssc, topic, group, db, **session)
    wait_until(lambda: len(again) >= 50 or second.getState() == "STOPPED", "the 50 pending records")
    second.awaitTerminationOrTimeout(0)
    assert sorted(again) == sorted(f"b{i}" for i in range(50))
