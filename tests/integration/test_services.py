"""The real local services every other test stands on: Kafka, PostgreSQL, ZooKeeper, Spark."""

from __future__ import annotations

import uuid

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata


def test_broker_serves_10000_records_of_a_4_partition_topic_by_explicit_ranges(kafka, unique):
    topic = unique("services")
    kafka.create_topic(topic, partitions=4)
    sent = kafka.produce(topic, [(f"k{i}", f"v{i}") for i in range(10_000)])
    assert len(sent) == 10_000
    ends = kafka.end_offsets(topic)
    assert sorted(ends) == [0, 1, 2, 3]
    assert sum(ends.values()) == 10_000

    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, enable_auto_commit=False)
    try:
        got: dict[int, list[int]] = {}
        for partition, end in ends.items():
            # An explicit range in the middle of each partition: [10, end - 10).
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            consumer.seek(tp, 10)
            offsets: list[int] = []
            while len(offsets) < end - 20:
                for rec in consumer.poll(timeout_ms=5000).get(tp, []):
                    if rec.offset < end - 10:
                        offsets.append(rec.offset)
            got[partition] = offsets
        for partition, end in ends.items():
            assert got[partition] == list(range(10, end - 10))
    finally:
        consumer.close()


def test_committed_group_offsets_are_read_back_by_a_new_consumer(kafka, unique):
    topic, group = unique("commit"), unique("group")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(100)])
    tp = TopicPartition(topic, 1)
    first = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                          enable_auto_commit=False)
    first.assign([tp])
    first.commit({tp: OffsetAndMetadata(42, "", -1)})
    first.close()
    second = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                           enable_auto_commit=False)
    try:
        assert second.committed(tp) == 42
        assert second.committed(TopicPartition(topic, 0)) is None
    finally:
        second.close()


def test_deleting_records_moves_the_log_start_offset(kafka, unique):
    topic = unique("delete")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [f"v{i}" for i in range(20)])
    kafka.delete_records(topic, {0: 7})
    assert kafka.beginning_offsets(topic) == {0: 7}
    assert kafka.end_offsets(topic) == {0: 20}


def test_postgres_round_trips_a_value_and_rejects_a_wrong_password(postgres):
    import psycopg2

    conn = postgres.connect()
    try:
        with conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE IF NOT EXISTS roundtrip (k text PRIMARY KEY, v bigint)")
            key = uuid.uuid4().hex
            cur.execute("INSERT INTO roundtrip VALUES (%s, %s)", (key, 12345))
            cur.execute("SELECT v FROM roundtrip WHERE k = %s", (key,))
            assert cur.fetchone() == (12345,)
    finally:
        conn.close()
    with pytest.raises(psycopg2.OperationalError):
        postgres.connect(password="wrong")
    assert "password" not in postgres.dsn


def test_zookeeper_round_trips_a_value(zookeeper, unique):
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zookeeper.hosts)
    client.start(timeout=15)
    try:
        path = "/" + unique("zk")
        client.create(path, b"12345", makepath=True)
        assert client.get(path)[0] == b"12345"
        client.delete(path)
    finally:
        client.stop()


def test_pyspark_tasks_import_kafka_python_from_the_project_interpreter(sc):
    import sys

    def probe(_):
        import sys as worker_sys

        import kafka

        yield worker_sys.executable, kafka.__version__

    import kafka

    results = sc.parallelize(range(2), 2).mapPartitions(probe).collect()
    assert results == [(sys.executable, kafka.__version__)] * 2
