"""One contract, every offset store: the same tests run against each backend on real services.

Backends: checkpoint directory (local path and ``file://`` URI through Hadoop), Kafka consumer
group, SQLite, PostgreSQL, ZooKeeper and HBase (Thrift1). Each test gets its own group id (and directory/file),
and builds stores with ``backend.make()``; two stores from one backend are two drivers on the
same group and store.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import pytest

from dstream_kafka.errors import OffsetFencedError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import OffsetStore, OffsetStores

BACKENDS = ["checkpoint-local", "checkpoint-hadoop", "kafka-group", "sqlite", "postgres", "zookeeper", "hbase"]


class Backend:
    """Makes stores of one kind over one location, and the topics tests commit for."""

    def __init__(self, name: str, make: Callable[..., OffsetStore], group: str, topic: str) -> None:
        self.name, self._make, self.group, self.topic = name, make, group, topic
        self._stores: list[OffsetStore] = []

    def make(self, **kwargs: Any) -> OffsetStore:
        store = self._make(**kwargs)
        self._stores.append(store)
        return store

    def r(self, partition: int, start: int, end: int, topic: str | None = None) -> OffsetRange:
        return OffsetRange(topic or self.topic, partition, start, end)

    def tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    def close(self) -> None:
        for store in self._stores:
            store.close()


# The Kafka group store commits to the group itself, so mirroring does not apply to it.
MIRRORABLE = [b for b in BACKENDS if b != "kafka-group"]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path, unique) -> Any:
    name = request.param
    group = unique("g")
    topic = unique("t")
    if name == "kafka-group":
        kafka = request.getfixturevalue("kafka")
        # Commits need real topics; the second topic is for the "many topics" cases.
        kafka.create_topic(topic, partitions=3)
        kafka.create_topic(topic + "-b", partitions=1)
        params = {"bootstrap.servers": kafka.bootstrap_servers}
        make = lambda **kw: OffsetStores.kafka(params, data_loss_topic="_dstream_kafka_data_loss_tests", **kw)  # noqa: E731
    elif name == "checkpoint-local":
        make = lambda **kw: OffsetStores.checkpoint(tmp_path / "cp", **kw)  # noqa: E731
    elif name == "checkpoint-hadoop":
        sc = request.getfixturevalue("sc")
        uri = (tmp_path / "cp").as_uri()  # file:///... goes through the Hadoop FileSystem API
        make = lambda **kw: OffsetStores.checkpoint(uri, spark_context=sc, **kw)  # noqa: E731
    elif name == "sqlite":
        make = lambda **kw: OffsetStores.sqlite(tmp_path / "offsets.db", **kw)  # noqa: E731
    elif name == "postgres":
        pg = request.getfixturevalue("postgres")
        make = lambda **kw: OffsetStores.postgres(table_prefix="contract_", **pg.dsn_params(), **kw)  # noqa: E731
    elif name == "hbase":
        hb = request.getfixturevalue("hbase")
        make = lambda **kw: OffsetStores.hbase(hb.host, hb.thrift_port, **kw)  # noqa: E731
    else:
        zk = request.getfixturevalue("zookeeper")
        make = lambda **kw: OffsetStores.zookeeper(zk.hosts, **kw)  # noqa: E731
    b = Backend(name, make, group, topic)
    yield b
    b.close()


def test_first_load_is_empty(backend):
    store = backend.make()
    assert store.load(backend.group) == {}
    assert store.load(backend.group, [backend.topic]) == {}
    assert store.history(backend.group) == []
    assert store.data_losses(backend.group) == []
    assert store.pending(backend.group) is None


@pytest.mark.service_check
def test_commit_then_load_from_a_new_store_instance(backend):
    store = backend.make()
    other_topic = backend.topic + "-b"
    store.commit(backend.group, 1_000, [backend.r(0, 0, 10), backend.r(1, 0, 7), backend.r(0, 0, 3, other_topic)])
    expected = {backend.tp(0): 10, backend.tp(1): 7, TopicPartition(other_topic, 0): 3}
    assert store.load(backend.group) == expected
    restarted = backend.make()
    assert restarted.load(backend.group) == expected
    assert restarted.load(backend.group, [backend.topic]) == {backend.tp(0): 10, backend.tp(1): 7}
    assert restarted.load(backend.group, ["no-such-topic"]) == {}


def test_a_second_driver_with_stale_offsets_is_fenced_and_stores_nothing(backend):
    first, second = backend.make(), backend.make()
    assert second.load(backend.group) == {}
    first.commit(backend.group, 1_000, [backend.r(0, 0, 10), backend.r(1, 0, 4)])
    first.commit(backend.group, 2_000, [backend.r(0, 10, 15), backend.r(1, 4, 4)])
    # The second driver still believes partition 0 is at 10; partition 1 would be fine alone.
    with pytest.raises(OffsetFencedError) as caught:
        second.commit(backend.group, 3_000, [backend.r(0, 10, 20), backend.r(1, 4, 9), backend.r(2, 0, 5)])
    message = str(caught.value)
    for part in (backend.group, backend.topic, "partition 0", "stored offset 15", "expects 10"):
        assert part in message
    # Nothing of the refused batch was stored: not partition 1's valid range, not partition 2.
    fresh = backend.make()
    assert fresh.load(backend.group) == {backend.tp(0): 15, backend.tp(1): 4}
    assert fresh.history(backend.group)[0].batch_time_ms == 2_000
    # The winner goes on.
    first.commit(backend.group, 3_000, [backend.r(0, 15, 16), backend.r(1, 4, 5)])
    assert backend.make().load(backend.group) == {backend.tp(0): 16, backend.tp(1): 5}


def test_recommitting_the_same_batch_is_a_no_op_but_other_ranges_are_fenced(backend):
    store = backend.make()
    batch = [backend.r(0, 0, 10), backend.r(1, 0, 3)]
    store.commit(backend.group, 1_000, batch)
    store.commit(backend.group, 1_000, list(reversed(batch)))  # a re-run after a crash
    backend.make().commit(backend.group, 1_000, batch)         # also from a restarted driver
    assert backend.make().load(backend.group) == {backend.tp(0): 10, backend.tp(1): 3}
    assert [h.batch_time_ms for h in store.history(backend.group)] == [1_000]
    with pytest.raises(OffsetFencedError):
        store.commit(backend.group, 1_000, [backend.r(0, 0, 12), backend.r(1, 0, 3)])
    assert backend.make().load(backend.group) == {backend.tp(0): 10, backend.tp(1): 3}


def test_new_partitions_are_inserted_next_to_continued_ones(backend):
    store = backend.make()
    store.commit(backend.group, 1_000, [backend.r(0, 0, 10)])
    # Partition 1 appears later and starts wherever the stream says (here: 5).
    store.commit(backend.group, 2_000, [backend.r(0, 10, 12), backend.r(1, 5, 9)])
    assert backend.make().load(backend.group) == {backend.tp(0): 12, backend.tp(1): 9}


def test_history_is_newest_first(backend):
    store = backend.make()
    for i, t in enumerate((1_000, 2_000, 3_000)):
        store.commit(backend.group, t, [backend.r(0, i * 10, i * 10 + 10)])
    history = backend.make().history(backend.group, limit=2)
    assert history[0].batch_time_ms == 3_000
    assert history[0].ranges == (backend.r(0, 20, 30),)
    assert history[0].offsets() == {backend.tp(0): 30}
    assert history[0].committed_at.tzinfo is not None
    if backend.name == "kafka-group":
        assert len(history) == 1  # documented limit: Kafka keeps one offset per partition
    else:
        assert [h.batch_time_ms for h in history] == [3_000, 2_000]
        assert [h.batch_time_ms for h in store.history(backend.group, limit=10)] == [3_000, 2_000, 1_000]


def test_data_loss_records_are_durable_and_move_the_stored_offset(backend):
    store = backend.make()
    store.commit(backend.group, 1_000, [backend.r(0, 0, 10), backend.r(1, 0, 5)])
    # Offsets 10..40 of partition 0 were deleted by retention before the stream restarted.
    store.record_data_loss(backend.group, backend.tp(0), 10, 40, None)
    restarted = backend.make()
    losses = [loss for loss in restarted.data_losses(backend.group)]
    assert [(x.topic, x.partition, x.lost_from, x.lost_until, x.batch_time_ms) for x in losses] == [
        (backend.topic, 0, 10, 40, None)]
    assert losses[0].count == 30 and losses[0].recorded_at.tzinfo is not None
    assert restarted.load(backend.group) == {backend.tp(0): 40, backend.tp(1): 5}
    # The next batch starts after the lost range and is accepted.
    restarted.commit(backend.group, 2_000, [backend.r(0, 40, 45), backend.r(1, 5, 6)])
    restarted.record_data_loss(backend.group, backend.tp(1), 100, 200, 2_000)  # not where we are
    assert backend.make().load(backend.group) == {backend.tp(0): 45, backend.tp(1): 6}
    assert len(backend.make().data_losses(backend.group)) == 2


def test_empty_ranges_are_committed_and_recorded(backend):
    store = backend.make()
    store.commit(backend.group, 1_000, [backend.r(0, 0, 0), backend.r(1, 3, 3)])
    assert backend.make().load(backend.group) == {backend.tp(0): 0, backend.tp(1): 3}
    store.commit(backend.group, 2_000, [backend.r(0, 0, 0), backend.r(1, 3, 3)])
    assert store.history(backend.group)[0].batch_time_ms == 2_000
    assert store.history(backend.group)[0].ranges == (backend.r(0, 0, 0), backend.r(1, 3, 3))


def test_last_reset_is_the_newest_commit_while_that_commit_is_a_reset(backend):
    store = backend.make()
    store.commit(backend.group, 1_000, [backend.r(0, 0, 10)])
    assert store.last_reset(backend.group) is None
    t = store.reset(backend.group, {backend.tp(0): 4}, expected={backend.tp(0): 10}, user="ops", host="bastion")
    last = backend.make().last_reset(backend.group)
    assert last is not None and last.batch_time_ms == t and last.reset is not None
    assert (last.reset.user, last.reset.host, dict(last.reset.previous)) == ("ops", "bastion", {backend.tp(0): 10})
    store.commit(backend.group, t + 1, [backend.r(0, 4, 6)])
    assert backend.make().last_reset(backend.group) is None


def test_a_store_mirrors_to_the_kafka_group_by_default_unless_it_is_the_group(backend):
    if backend.name == "kafka-group":
        assert backend.make().mirrors_to_group is False  # its offsets are the group's own
    else:
        assert backend.make().mirrors_to_group is True
        assert backend.make(also_commit_to_kafka_group=False).mirrors_to_group is False


@pytest.mark.parametrize("backend", MIRRORABLE, indirect=True)
def test_also_commit_to_kafka_group_mirrors_committed_offsets(backend, request, unique):
    kafka = request.getfixturevalue("kafka")
    kafka.create_topic(backend.topic, partitions=2)
    mirror_group = unique("mirror")
    store = backend.make(also_commit_to_kafka_group={
        "bootstrap.servers": kafka.bootstrap_servers, "group.id": mirror_group})
    store.commit(backend.group, 1_000, [backend.r(0, 0, 0), backend.r(1, 0, 0)])
    store.commit(backend.group, 2_000, [backend.r(0, 0, 0), backend.r(1, 0, 0)])
    committed = kafka.admin().list_group_offsets({mirror_group: None})[mirror_group]
    assert {(tp.topic, tp.partition): o.offset for tp, o in committed.items()} == {
        (backend.topic, 0): 0, (backend.topic, 1): 0}


@pytest.mark.parametrize("backend", MIRRORABLE, indirect=True)
def test_a_failing_mirror_never_fails_the_commit_nor_logs_secrets(backend, caplog):
    calls = []

    def mirror(group: str, offsets: dict) -> None:
        calls.append((group, offsets))
        raise RuntimeError("broker unreachable")

    store = backend.make(also_commit_to_kafka_group=mirror)
    with caplog.at_level(logging.WARNING):
        store.commit(backend.group, 1_000, [backend.r(0, 0, 5)])
    assert calls == [(backend.group, {backend.tp(0): 5})]
    assert "broker unreachable" in caplog.text
    assert backend.make().load(backend.group) == {backend.tp(0): 5}


def test_garbage_in_a_zookeeper_offset_node_is_reported_not_reset(zookeeper, unique):
    from kazoo.client import KazooClient

    from dstream_kafka.errors import OffsetStoreError

    group, topic = unique("g"), unique("t")
    store = OffsetStores.zookeeper(zookeeper.hosts)
    try:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 10)])
        path = f"/consumers/{group}/offsets/{topic}/0"
        zk = KazooClient(hosts=zookeeper.hosts)
        zk.start()
        try:
            assert zk.get(path)[0] == b"10"  # the layout old Kafka tools read
            zk.set(path, b"-1001")
            with pytest.raises(OffsetStoreError, match=f"{path} holds b'-1001', not an offset"):
                store.load(group)
            with pytest.raises(OffsetStoreError, match="no offset was reset"):
                store.commit(group, 2_000, [OffsetRange(topic, 0, 10, 20)])
            assert zk.get(path)[0] == b"-1001"
        finally:
            zk.stop()
            zk.close()
    finally:
        store.close()
