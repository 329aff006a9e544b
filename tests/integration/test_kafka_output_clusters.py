"""The Kafka output through secured listeners, the one-cluster rule of exactly-once, and a
broker killed in the middle of a transaction."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka.errors import ConfigurationError, KafkaAuthenticationError
from dstream_kafka.write import KafkaOutput

pytestmark = pytest.mark.usefixtures("backend")


def _secured(kafka: Any, mechanism: str = "SCRAM-SHA-512", **options: Any) -> dict[str, Any]:
    return kafka.client_params("SASL_SSL", mechanism=mechanism, **options)


def _count_committed(kafka: Any, topic: str) -> int:
    params = {"bootstrap.servers": kafka.bootstrap_servers}
    consumer = KafkaConsumer(bootstrap_servers=params["bootstrap.servers"], group_id=None,
                             isolation_level="read_committed", enable_auto_commit=False,
                             consumer_timeout_ms=5000, auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(topic, 0)])
        return sum(1 for _ in consumer)
    finally:
        consumer.close(autocommit=False)


def test_an_exactly_once_write_through_sasl_ssl_commits_and_logs_no_secret(
        sc, secured_kafka, unique, caplog):
    source, target, group = unique("in"), unique("out"), unique("g")
    secured_kafka.create_topic(source)
    secured_kafka.create_topic(target)
    secured_kafka.produce(source, [(b"k", f"v{i}") for i in range(8)], partition=0)
    params = _secured(secured_kafka)
    password = secured_kafka.security.users["alice"]
    caplog.set_level(logging.DEBUG)
    rdd = KafkaUtils.createRDD(sc, {**params, "group.id": group},
                               [OffsetRange(source, 0, 0, 8)], LocationStrategies.PreferConsistent)
    output = KafkaOutput(params, topic=target, guarantee="exactly-once")
    assert output.write(rdd.map(lambda r: (r.key, r.value)), source=rdd, groupId=group) == 8
    assert _count_committed(secured_kafka, target) == 8
    assert password not in caplog.text and password not in repr(output)


def test_refused_sasl_credentials_fail_when_the_output_is_created(secured_kafka):
    with pytest.raises(KafkaAuthenticationError) as caught:
        KafkaOutput(_secured(secured_kafka, password="not-the-password"), topic="t")
    assert "not-the-password" not in str(caught.value)


def test_exactly_once_to_another_cluster_than_the_stream_reads_is_refused(
        kafka, own_kafka, make_ssc, unique):
    ssc = make_ssc(0.5)
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe(
            [unique("in")], {"bootstrap.servers": kafka.bootstrap_servers,
                             "group.id": unique("g"), "isolation.level": "read_committed"}))
    output = KafkaOutput({"bootstrap.servers": own_kafka.bootstrap_servers},
                         topic=unique("out"), guarantee="exactly-once")
    with pytest.raises(ConfigurationError, match="one cluster"):
        output.writeStream(stream)


def _wait_for_file(path: str, timeout: float = 120.0) -> None:
    import os
    import time

    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.05)


def test_a_broker_killed_mid_transaction_leaves_all_or_nothing_and_a_retry_writes_once(
        sc, own_kafka, unique, tmp_path):
    import threading

    source, target, group = unique("in"), unique("out"), unique("g")
    own_kafka.create_topic(source)
    own_kafka.create_topic(target)
    own_kafka.produce(source, [(b"k", f"v{i}") for i in range(10)], partition=0)
    params = {"bootstrap.servers": own_kafka.bootstrap_servers}
    started, go = str(tmp_path / "started"), str(tmp_path / "go")

    def pause_half_way(record: Any) -> Any:
        # Runs on an executor, which cannot import this module: everything it needs is here.
        import os
        import time

        if record.offset == 5:  # half the transaction is sent: let the test kill the broker
            open(started, "w").close()
            deadline = time.monotonic() + 120
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.05)
        return (record.key, record.value)

    rdd = KafkaUtils.createRDD(sc, {**params, "group.id": group}, [OffsetRange(source, 0, 0, 10)],
                               LocationStrategies.PreferConsistent)
    output = KafkaOutput({**params, "transaction.timeout.ms": 20000,
                          "delivery.timeout.ms": 20000, "request.timeout.ms": 5000},
                         topic=target, guarantee="exactly-once")
    outcome: dict[str, Any] = {}

    def first_attempt() -> None:
        try:
            outcome["written"] = output.write(rdd.map(pause_half_way), source=rdd, groupId=group)
        except Exception as exc:  # the broker's death may fail the attempt: that is allowed
            outcome["error"] = exc

    writer = threading.Thread(target=first_attempt)
    writer.start()
    _wait_for_file(started)
    own_kafka.stop_broker(own_kafka.node_ids[0], kill=True)
    own_kafka.start_broker(own_kafka.node_ids[0])
    open(go, "w").close()
    writer.join(timeout=300)
    assert not writer.is_alive()

    committed = "written" in outcome
    assert _count_committed(own_kafka, target) == (10 if committed else 0), outcome
    # A retry (a new attempt with the same transactional id) completes the range, once.
    output.write(rdd.map(lambda r: (r.key, r.value)), source=rdd, groupId=group)
    assert _count_committed(own_kafka, target) == 10
