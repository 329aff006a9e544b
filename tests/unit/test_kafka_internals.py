"""The installed kafka-python still has every internal dstream_kafka reads.

Each test builds a real ``KafkaConsumer`` that never connects (a closed port and a given
``api_version``) and fails naming the internal that moved, so an upgrade breaks here rather
than in a running stream.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kafka
import pytest
from kafka import KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord as KafkaRecord

from dstream_kafka import _kafka_internals
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.record import ConsumerRecord

VERSION = kafka.__version__


@pytest.fixture
def consumer() -> Iterator[Any]:
    client = KafkaConsumer(bootstrap_servers="127.0.0.1:1", api_version=(2, 8), group_id="g")
    try:
        yield client
    finally:
        client.close(autocommit=False)


def _require(owner: Any, name: str, where: str) -> Any:
    assert hasattr(owner, name), f"kafka-python {VERSION} moved {where}.{name}"
    return getattr(owner, name)


def test_the_rejoin_check_reads_the_coordinators_need_rejoin(consumer) -> None:
    coordinator = _require(consumer, "_coordinator", "KafkaConsumer")
    assert callable(_require(coordinator, "need_rejoin", "KafkaConsumer._coordinator"))
    assert callable(_require(coordinator, "request_rejoin", "KafkaConsumer._coordinator"))
    assert _kafka_internals.needs_rejoin(consumer) is False  # not subscribed: nothing to join
    _kafka_internals.request_rejoin(consumer)
    assert _kafka_internals.needs_rejoin(consumer) is False  # still: nothing subscribed


def test_the_leader_lookup_reads_the_clients_cluster_metadata(consumer) -> None:
    client = _require(consumer, "_client", "KafkaConsumer")
    cluster = _require(client, "cluster", "KafkaConsumer._client")
    for name in ("leader_for_partition", "broker_metadata"):
        assert callable(_require(cluster, name, "KafkaConsumer._client.cluster"))
    assert _kafka_internals.cluster_metadata(consumer) is cluster
    assert _kafka_internals.leader_host(consumer, TopicPartition("t", 0)) is None  # no metadata


def test_records_are_built_from_kafka_pythons_record_fields_by_name() -> None:
    missing = [f for f in _kafka_internals.RECORD_FIELDS if f not in KafkaRecord._fields]
    assert not missing, f"kafka-python {VERSION} ConsumerRecord lacks fields {missing}"
    fetched = KafkaRecord(*[None] * len(KafkaRecord._fields))._replace(
        topic="t", partition=2, offset=7, timestamp=1000, timestamp_type=0, key=b"k",
        value=b"v", headers=[("h", b"1")])
    record = _kafka_internals.to_record(fetched)
    assert record == ConsumerRecord("t", 2, 7, 1000, 0, b"k", b"v", (("h", b"1"),))
    assert type(record) is ConsumerRecord
    assert _kafka_internals.record_offset(fetched) == 7


def test_a_moved_internal_fails_naming_it() -> None:
    with pytest.raises(AttributeError, match=r"has no KafkaConsumer\._coordinator"):
        _kafka_internals.needs_rejoin(object())
    with pytest.raises(AttributeError, match=r"has no KafkaConsumer\._client"):
        _kafka_internals.leader_host(object(), TopicPartition("t", 0))


def test_the_metadata_refresh_awaits_the_clusters_update_through_the_consumers_loop(consumer) -> None:
    from kafka.errors import KafkaTimeoutError

    manager = _require(consumer, "_manager", "KafkaConsumer")
    assert callable(_require(manager, "wait_for", "KafkaConsumer._manager"))
    assert callable(_require(_require(consumer, "_net", "KafkaConsumer"), "run", "KafkaConsumer._net"))
    with pytest.raises(KafkaTimeoutError):  # no broker at 127.0.0.1:1: bounded, not forever
        _kafka_internals.refresh_metadata(consumer, 200)


def test_a_consumer_stranded_mid_rebalance_is_asked_to_rejoin(consumer) -> None:
    from kafka.coordinator.base import MemberState

    coordinator = _require(consumer, "_coordinator", "KafkaConsumer")
    assert callable(_require(coordinator, "rebalance_in_progress", "KafkaConsumer._coordinator"))
    assert callable(_require(coordinator, "ensure_active_group", "KafkaConsumer._coordinator"))
    coordinator.rejoin_needed = False  # as after a completed join
    _kafka_internals.keep_rejoin_wanted(consumer)
    assert coordinator.rejoin_needed is False  # not rebalancing, nothing wanted: left alone
    coordinator.state = MemberState.REBALANCING  # what kafka-python 3.0.12 can leave behind
    _kafka_internals.keep_rejoin_wanted(consumer)
    assert coordinator.rejoin_needed is True


def test_the_bounded_transaction_steps_read_the_producers_transaction_manager() -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(2, 8),
                             transactional_id="t", max_block_ms=100)
    try:
        manager = _require(producer, "_transaction_manager", "KafkaProducer")
        for step in ("send_offsets_to_transaction", "begin_commit", "begin_abort"):
            assert callable(_require(manager, step, "KafkaProducer._transaction_manager"))
        sender = _require(producer, "_sender", "KafkaProducer")
        assert callable(_require(sender, "wakeup", "KafkaProducer._sender"))
        # No transaction was begun: the step fails at once with kafka-python's own error.
        with pytest.raises(kafka.errors.KafkaError):
            _kafka_internals.transaction_step(producer, "begin_commit", timeout_ms=100)
    finally:
        producer.close(timeout=1)
