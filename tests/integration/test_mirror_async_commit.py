"""Issue #30 part 1, store commit cost: the Kafka lag mirror (on by default for every store but
the Kafka group's) copies a commit to the stream's group without waiting for the broker's
answer, so a batch's commit no longer pays a Kafka round trip; closing the store still waits
for the last copy, so a stopped stream's group shows its last batch."""

from __future__ import annotations

import threading
import time
from typing import Any

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.structs import OffsetAndMetadata

from dstream_kafka import OffsetStores
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores.mirror import _listed

from support import wait_until


def _member(cluster: Any, group: str, topic: str) -> KafkaConsumer:
    """A driver consumer of ``group`` as a stream binds it to its store: it knows its group's
    coordinator (a stream's consumer joined the group before its first batch)."""
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    tp = KafkaTopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.commit({tp: OffsetAndMetadata(0, "", -1)})
    # and its metadata lists the topic (a stream's consumer has polled): the mirror copies only
    # partitions its consumer's metadata lists
    wait_until(lambda: bool(consumer.partitions_for_topic(topic)) and _listed(consumer, TopicPartition(topic, 0)),
               "the member's metadata to list the topic")
    return consumer


def _group_offsets(cluster: Any, group: str) -> dict[TopicPartition, int]:
    committed = cluster.admin().list_group_offsets({group: None})[group]
    return {TopicPartition(tp.topic, tp.partition): o.offset for tp, o in committed.items()}


def test_closing_a_store_leaves_its_last_mirrored_commit_in_the_group(kafka, unique, tmp_path):
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [f"v{i}" for i in range(5)])
    consumer = _member(kafka, group, topic)
    store = OffsetStores.sqlite(str(tmp_path / "o.db"))
    try:
        store.bind_consumer(consumer, threading.Lock())
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 3)])
        store.commit(group, 2_000, [OffsetRange(topic, 0, 3, 5)])
        store.close()  # at once: the close waits for the copy
        assert _group_offsets(kafka, group) == {TopicPartition(topic, 0): 5}
    finally:
        consumer.close()


def test_a_store_commit_does_not_wait_for_the_mirrors_broker(own_kafka, unique, tmp_path):
    topic, group = unique("t"), unique("g")
    own_kafka.create_topic(topic, partitions=1)
    own_kafka.produce(topic, [f"v{i}" for i in range(5)])
    consumer = _member(own_kafka, group, topic)
    db = str(tmp_path / "o.db")
    store = OffsetStores.sqlite(db)
    try:
        store.bind_consumer(consumer, threading.Lock())
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 3)])
        wait_until(lambda: _group_offsets(own_kafka, group) == {TopicPartition(topic, 0): 3},
                   "the first copy in the group")
        (node,) = own_kafka.node_ids
        own_kafka.stop_broker(node, kill=True)
        started = time.monotonic()
        store.commit(group, 2_000, [OffsetRange(topic, 0, 3, 5)])
        # a synchronous copy waited for the dead broker up to its 10 s timeout
        assert time.monotonic() - started < 2.0
        assert OffsetStores.sqlite(db).load(group) == {TopicPartition(topic, 0): 5}
    finally:
        store.close()  # no broker accepts a connection: the close does not wait
        consumer.close()
