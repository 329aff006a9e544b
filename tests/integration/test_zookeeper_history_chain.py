"""ZooKeeper store: offset nodes must be where the newest history node left them, and that node
must continue the one before it; a hand edit is refused at load, not taken (records skipped)."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest

from dstream_kafka.errors import OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import OffsetStores


class _Group:
    """A group that committed 0-12 (batch 1000) and 12-20 (batch 2000), and a kazoo client."""

    def __init__(self, hosts: str, group: str, topic: str, zk: Any) -> None:
        self.hosts, self.group, self.topic, self.zk = hosts, group, topic, zk
        self.tp = TopicPartition(topic, 0)
        self.node = f"/consumers/{group}/offsets/{topic}/0"
        self.history = f"/consumers/{group}/dstream_kafka/commits"

    def r(self, a: int, b: int) -> OffsetRange:
        return OffsetRange(self.topic, 0, a, b)

    def store(self) -> Any:
        return OffsetStores.zookeeper(self.hosts, also_commit_to_kafka_group=False)


@pytest.fixture
def group(zookeeper: Any, unique: Callable[[str], str]) -> Iterator[_Group]:
    from kazoo.client import KazooClient

    zk = KazooClient(hosts=zookeeper.hosts)
    zk.start()
    g = _Group(zookeeper.hosts, unique("g"), unique("t"), zk)
    with g.store() as store:
        store.commit(g.group, 1000, [g.r(0, 12)])
        store.commit(g.group, 2000, [g.r(12, 20)])
    yield g
    zk.stop()
    zk.close()


def test_an_offset_node_moved_by_hand_past_the_newest_commit_is_refused_at_load(group: _Group) -> None:
    group.zk.set(group.node, b"28")
    with group.store() as store, pytest.raises(
            OffsetStoreError, match=rf"group '{group.group}'.*partition 0: the offset node holds 28, the newest "
                                    r"commit .* ended at 20.*offsets history"):
        store.load(group.group)


def test_a_newest_history_node_edited_to_skip_past_its_predecessor_is_refused_at_load(group: _Group) -> None:
    group.zk.set(group.node, b"28")
    doc = json.loads(group.zk.get(f"{group.history}/2000")[0])
    doc["ranges"] = [{"topic": group.topic, "partition": 0, "fromOffset": 20, "untilOffset": 28}]
    group.zk.set(f"{group.history}/2000", json.dumps(doc).encode())
    with group.store() as store, pytest.raises(
            OffsetStoreError, match=r"its range starts at 20, but the commit before it .*/1000\) ended at 12"):
        store.load(group.group)


def test_a_recorded_data_loss_and_a_reset_continue_the_zookeeper_history(group: _Group) -> None:
    from support import check_loss_and_reset_continue_history

    with group.store() as store:
        check_loss_and_reset_continue_history(store, group.group, group.tp, 1000)
