"""Hardening of the offset stores and checkpoint folders (issue #18, items 1, 2, 5 and 9).

Every test runs against the real service: a Kafka broker, a ZooKeeper server (a private one
where the test stops it), PostgreSQL, or a checkpoint folder on a real (read-only bind-mounted)
file system.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from dstream_kafka.errors import CorruptCheckpointError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import OffsetStores

G = "group-1"


def r(start: int, end: int, partition: int = 0, topic: str = "events") -> OffsetRange:
    return OffsetRange(topic, partition, start, end)


def bounded(call: Callable[[], Any], seconds: float) -> tuple[float, BaseException | None, Any]:
    """Run ``call`` in a thread; return (seconds taken, exception, result). Fails the test when
    the call is still running after ``seconds`` (the hang the bound must prevent)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    took = time.monotonic() - started
    assert not thread.is_alive(), f"the call was still running after {seconds} s"
    return took, box.get("error"), box.get("result")


# -- item 5: user Kafka params pass through the one params builder without collisions ------------

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
