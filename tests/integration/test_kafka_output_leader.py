"""The exactly-once Kafka output on the three-broker cluster when a broker dies mid-transaction.

``kafka3`` has replication factor 3 (its internal topics too) and ``min.insync.replicas=2``.
A write task pauses after half its transaction is in the output partition's log; the test
SIGKILLs the broker playing one role in that transaction (the output partition's leader, the
input partition's leader, or the transaction coordinator), optionally starts it again, and
lets the task go on. Whatever the attempt's outcome, the read_committed output holds each
record once and the group's committed offset is the range's end or absent, never between;
a retry then leaves exactly the range, once.

Every test leaves all three brokers running (the cluster is shared by the session).
"""

from __future__ import annotations

import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from kafka import KafkaConsumer, TopicPartition

from dstream_kafka import KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka.operate.services.kafka import KafkaCluster
from dstream_kafka.write import KafkaOutput
from dstream_kafka.write.settings import transactional_id

from support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.slow]

RECORDS = 10
HALF = 5


@pytest.fixture
def cluster(kafka3: KafkaCluster) -> Iterator[KafkaCluster]:
    """The shared three-broker cluster, every node running again after the test."""
    try:
        yield kafka3
    finally:
        for node_id in kafka3.node_ids:  # one node down at most: the quorum elects without it
            kafka3.start_broker(node_id, timeout=180)


def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (signed 32 bits), for a UTF-16 code unit per character."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _coordinator_of(cluster: KafkaCluster, txn_id: str) -> int:
    """The node leading the ``__transaction_state`` partition of ``txn_id`` (Kafka's
    ``partitionFor``: ``abs(hashCode) % partitions``), -1 when not known."""
    leaders = cluster.leaders("__transaction_state")
    if not leaders:
        return -1
    h = _java_hash(txn_id)
    return leaders.get((0 if h == -(1 << 31) else abs(h)) % len(leaders), -1)


def _read_committed(cluster: KafkaCluster, topic: str, timeout: float = 90.0) -> list[bytes]:
    """Every value of ``topic``-0 a read_committed consumer sees, up to the last stable offset."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None,
                             isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=30000)
    tp = TopicPartition(topic, 0)
    values: list[bytes] = []
    try:
        consumer.assign([tp])
        deadline = time.monotonic() + timeout
        while True:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
            end = consumer.end_offsets([tp]).get(tp)  # the LSO under read_committed
            if end is not None and consumer.position(tp) >= end:
                return values
            if time.monotonic() > deadline:
                raise AssertionError(f"read_committed never reached the end of {topic} ({end})")
    finally:
        consumer.close(autocommit=False)


def _group_offset(cluster: KafkaCluster, group: str, topic: str) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, isolation_level="read_committed",
                             request_timeout_ms=30000)
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close(autocommit=False)


def _victim(cluster: KafkaCluster, role: str, source: str, target: str, txn_id: str) -> int:
    def find() -> int:
        if role == "output-leader":
            return cluster.leaders(target).get(0, -1)
        if role == "input-leader":
            return cluster.leaders(source).get(0, -1)
        return _coordinator_of(cluster, txn_id)

    found: list[int] = []
    wait_until(lambda: found.append(find()) or found[-1] in cluster.node_ids,
               f"the node of the {role}", timeout=60, interval=0.5)
    return found[-1]


# Each kill once, the backends shared out (a case takes a minute or two on three brokers): the
# two that hung kafka-python's transaction steps before they were bounded run on kafka-python.
@pytest.mark.parametrize("role, restart, backend", [
    ("output-leader", False, "kafka-python"), ("coordinator", False, "kafka-python"),
    ("output-leader", True, "confluent-kafka"), ("input-leader", False, "confluent-kafka")])
def test_a_broker_killed_mid_transaction_on_three_brokers_leaves_all_or_nothing_and_a_retry_writes_once(  # noqa: E501
        sc: Any, cluster: KafkaCluster, unique: Callable[[str], str], tmp_path: Path,
        spark_conf: Callable[[str, str], None], role: str, restart: bool, backend: str) -> None:
    """The broker of ``role`` is SIGKILLed while the task has sent half its transaction
    (and started again when ``restart``): the attempt either commits on the new leader (the
    range once, the group at its end) or fails with nothing visible and the group's offset
    untouched; a retry then leaves the range exactly once and the group at its end."""
    spark_conf("spark.streaming.kafka.consumer.backend", backend)  # the output's backend too
    source, target, group = unique("in"), unique("out"), unique("g")
    cluster.create_topic(source, replication_factor=3)
    cluster.create_topic(target, replication_factor=3)
    cluster.produce(source, [(b"k", f"v{i}") for i in range(RECORDS)], partition=0)
    params = {"bootstrap.servers": cluster.bootstrap_servers}
    started, go = str(tmp_path / "started"), str(tmp_path / "go")

    def pause_half_way(record: Any) -> Any:
        # Runs on an executor, which cannot import this module: everything it needs is here.
        import os
        import time

        if record.offset == HALF:  # records 0..4 are sent: let the test kill a broker
            open(started, "w").close()
            deadline = time.monotonic() + 180
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.05)
        return (record.key, record.value)

    rdd = KafkaUtils.createRDD(sc, {**params, "group.id": group},
                               [OffsetRange(source, 0, 0, RECORDS)],
                               LocationStrategies.PreferConsistent)
    # kafka-python's attempt does not reach a new transaction coordinator: it fails when the
    # commit's bound, transaction.timeout.ms, runs out, so that case gets 20 s, not 60 s. The
    # others keep 60 s: their attempts may commit after an election or a restart.
    coordinator_lost = role == "coordinator" and backend == "kafka-python"
    txn_timeout_ms = 20000 if coordinator_lost else 60000
    output = KafkaOutput({**params, "transaction.timeout.ms": txn_timeout_ms,
                          "delivery.timeout.ms": 60000, "request.timeout.ms": 10000},
                         topic=target, guarantee="exactly-once")
    # The first attempt runs in a thread; the broker's death may fail it: that is allowed.
    pool = ThreadPoolExecutor(max_workers=1)
    attempt = pool.submit(output.write, rdd.map(pause_half_way), source=rdd, groupId=group)
    try:
        wait_until(lambda: os.path.exists(started), "the task to pause half way", timeout=180,
                   interval=0.05)
        # Half the transaction is in the output partition's log (replicated, not committed).
        wait_until(lambda: cluster.end_offsets(target).get(0, 0) >= HALF,
                   "the first half of the transaction in the output log", timeout=60,
                   interval=0.2)
        victim = _victim(cluster, role, source, target,
                         transactional_id(group, source, 0))
        cluster.stop_broker(victim, kill=True)
        if restart:
            cluster.start_broker(victim, timeout=180)
    finally:
        open(go, "w").close()
        pool.shutdown(wait=False)
    error = attempt.exception(timeout=400)  # raises TimeoutError when the attempt hangs

    first = Counter(_read_committed(cluster, target))
    offset = _group_offset(cluster, group, source)
    if error is None:  # committed through the new leader or coordinator
        assert attempt.result() == RECORDS
        assert first == {f"v{i}".encode(): 1 for i in range(RECORDS)}, (victim, first)
        assert offset == RECORDS
    else:  # failed cleanly: nothing visible, the group not moved
        assert not first, (victim, error, first)
        assert offset is None, (victim, error, offset)
    # A retry (a new attempt with the same transactional id) leaves the range once.
    output.write(rdd.map(lambda r: (r.key, r.value)), source=rdd, groupId=group)
    after = Counter(_read_committed(cluster, target))
    assert after == {f"v{i}".encode(): 1 for i in range(RECORDS)}, (victim, error, after)
    assert _group_offset(cluster, group, source) == RECORDS
