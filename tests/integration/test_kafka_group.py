"""stores/kafka_group.py, the Kafka consumer group store, against the real broker: user params
that the store also sets, a member stranded mid-rebalance, and calls bounded by its timeouts."""

from __future__ import annotations

import threading
import time

import pytest

from dstream_kafka.errors import OffsetStoreError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores import OffsetStores

from support import bounded, r


@pytest.mark.parametrize("extra", [{"request.timeout.ms": "5000"}, {"client.id": "my-app"}],
                         ids=["request.timeout.ms", "client.id"])
def test_a_kafka_group_store_loads_with_a_user_setting_the_store_also_sets(kafka, unique, extra):
    store = OffsetStores.kafka({"bootstrap.servers": kafka.bootstrap_servers, **extra}, timeout_ms=20_000)
    try:
        assert store.load(unique("g")) == {}
    finally:
        store.close()


@pytest.mark.parametrize("extra", [{"request.timeout.ms": "15000"}, {"client.id": "my-app"}],
                         ids=["request.timeout.ms", "client.id"])
def test_a_kafka_group_store_records_data_loss_with_a_user_setting_the_store_also_sets(kafka, unique, extra):
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic)
    store = OffsetStores.kafka({"bootstrap.servers": kafka.bootstrap_servers, **extra},
                               data_loss_topic=unique("loss"), timeout_ms=20_000)
    try:
        store.commit(group, 1000, [r(0, 4, topic=topic)])
        store.record_data_loss(group, TopicPartition(topic, 0), 4, 9, batch_time_ms=2000)
        assert store.load(group) == {TopicPartition(topic, 0): 9}
        assert [(x.lost_from, x.lost_until) for x in store.data_losses(group)] == [(4, 9)]
    finally:
        store.close()


def test_a_kafka_group_store_commits_with_a_user_client_id(kafka, unique):
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic)
    store = OffsetStores.kafka({"bootstrap.servers": kafka.bootstrap_servers, "client.id": "my-app",
                                "request.timeout.ms": "15000"}, timeout_ms=20_000)
    try:
        store.commit(group, 1000, [r(0, 3, topic=topic)])
        assert store.load(group) == {TopicPartition(topic, 0): 3}
    finally:
        store.close()


def test_a_kafka_group_store_commits_through_a_member_left_stranded_mid_rebalance(kafka, unique):
    """kafka-python 3.0.12 can leave a subscribed consumer REBALANCING with no rejoin wanted
    (a metadata-asked rejoin whose assignment was computed before the join finished); its
    commits then fail with RebalanceInProgressError. The store finishes the rejoin and commits."""
    from kafka import KafkaConsumer
    from kafka.coordinator.base import MemberState
    from support import poll_as_member

    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    store = OffsetStores.kafka({"bootstrap.servers": kafka.bootstrap_servers}, timeout_ms=20_000)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            poll_as_member(consumer)  # the join itself can strand (see above)
        assert consumer.assignment()
        store.bind_consumer(consumer, threading.Lock())
        consumer._coordinator.state = MemberState.REBALANCING  # the state the bug leaves
        store.commit(group, 1000, [r(0, 3, topic=topic)])
        assert store.load(group) == {TopicPartition(topic, 0): 3}
    finally:
        store.close()
        consumer.close()


KAFKA_TIMEOUT_MS = 3000


@pytest.mark.parametrize("call", ["load", "commit", "record_data_loss", "data_losses"])
def test_a_kafka_group_store_call_without_a_broker_fails_within_its_timeout(unique, call):
    from dstream_kafka.operate.services.environment import free_port

    store = OffsetStores.kafka({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, timeout_ms=KAFKA_TIMEOUT_MS)
    group = unique("g")
    calls = {
        "load": lambda: store.load(group),
        "commit": lambda: store.commit(group, 1000, [r(0, 5)]),
        "record_data_loss": lambda: store.record_data_loss(group, TopicPartition("events", 0), 0, 5, 1000),
        "data_losses": lambda: store.data_losses(group),
    }
    try:
        took, error, _ = bounded(calls[call], 20 * KAFKA_TIMEOUT_MS / 1000)
        assert isinstance(error, OffsetStoreError), repr(error)
        assert took < 2 * KAFKA_TIMEOUT_MS / 1000 + 3
    finally:
        bounded(store.close, 10)


SASL_SECRET = "S3cr3t-PW-37"


@pytest.mark.parametrize("call", ["load", "data_losses"])
def test_a_kafka_group_store_speaking_sasl_to_a_plaintext_listener_fails_as_create_rdd_within_bootstrap_timeout(
        kafka, unique, call):
    # timeout_ms stays at its 30 s default: the params' bootstrap.timeout.ms bounds the bootstrap.
    store = OffsetStores.kafka({
        "bootstrap.servers": kafka.bootstrap_servers, "bootstrap.timeout.ms": "2000",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                            f'username="u" password="{SASL_SECRET}";'})
    group = unique("g")
    try:
        took, error, _ = bounded(lambda: getattr(store, call)(group), 30)
        assert isinstance(error, OffsetStoreError), repr(error)
        text = str(error)
        # createRDD's words (client/param_checks.bootstrap_failure): the servers, the protocol
        # in use and the fix, whether the broker refused the handshake or the bound ran out.
        assert f"Could not reach any Kafka broker at bootstrap.servers={kafka.bootstrap_servers}" in text
        assert "security.protocol=SASL_PLAINTEXT" in text
        assert "set security.protocol to the listener's protocol" in text
        assert SASL_SECRET not in text
        assert took < 2.0 + 2.5, took  # one bootstrap.timeout.ms, not timeout_ms (was 32 s)
    finally:
        bounded(store.close, 10)
