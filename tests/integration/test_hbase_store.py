"""The HBase offset store against a real standalone HBase 2.6 (Thrift1): layout, bad input, failures.

The shared contract (first start, partitions added, fencing by stale offsets, data loss,
history) runs in ``test_stores_contract.py``; this module covers what is HBase's own: the
guide's layout read from a table made by hand, tables and rows of another layout, the TTL
family, the check-and-put fence, a crash between the commit point and the derived rows, and
the gateway unreachable at start and at commit.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from typing import Any, Iterator

import pytest

from dstream_kafka.errors import CorruptCheckpointError, OffsetFencedError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import HBaseOffsetStore, OffsetStores
from dstream_kafka.stores.hbase_keys import group_row_key, offsets_row_key

pytestmark = pytest.mark.integration

T0 = 1_700_000_000_000  # a real epoch time in ms: 13 digits, as the guide's code writes it


@pytest.fixture
def table_name(unique) -> str:
    return unique("offsets").replace("-", "_")


@pytest.fixture
def conn(hbase) -> Iterator[Any]:
    c = hbase.connection()
    yield c
    c.close()


@pytest.fixture
def stores(hbase, table_name) -> Iterator[Any]:
    made: list[HBaseOffsetStore] = []

    def make(**kw: Any) -> HBaseOffsetStore:
        kw.setdefault("table", table_name)
        store = OffsetStores.hbase(hbase.host, hbase.thrift_port, **kw)
        made.append(store)
        return store

    yield make
    for s in made:
        s.close()


def _guide_table(conn: Any, name: str) -> Any:
    """Create the documented layout by hand, as an HBase shell user would."""
    conn.create_table(name, {"offsets": dict(max_versions=1, time_to_live=30 * 86400, block_cache_enabled=True),
                             "meta": dict(max_versions=1, block_cache_enabled=True)})
    return conn.table(name)


def test_the_store_creates_the_table_with_a_ttl_offsets_family(stores, conn, table_name, unique):
    store = stores(ttl_days=30)
    assert store.load(unique("g")) == {}
    families = conn.table(table_name).families()
    assert families[b"offsets"]["time_to_live"] == 30 * 86400
    assert families[b"offsets"]["max_versions"] == 1
    assert families[b"meta"]["time_to_live"] == 2 ** 31 - 1  # HBase's FOREVER: the group cell never expires


def test_a_table_made_by_hand_in_the_guide_layout_is_read_and_continued(stores, conn, table_name, unique):
    group, topic, other = unique("g"), unique("t"), unique("u")
    table = _guide_table(conn, table_name)
    # Rows as the guide's Scala code writes them: one per batch and topic, one column per partition.
    table.put(f"{topic}:{group}:{T0}".encode(), {b"offsets:0": b"10", b"offsets:1": b"20"})
    table.put(f"{topic}:{group}:{T0 + 5000}".encode(), {b"offsets:0": b"15", b"offsets:1": b"22"})
    table.put(f"{other}:{group}:{T0 + 1000}".encode(), {b"offsets:0": b"7"})
    table.put(f"{topic}:{group}x:{T0 + 9000}".encode(), {b"offsets:0": b"999"})    # another group
    table.put(f"{topic}:{group}:{T0 - 1}".encode(), {b"offsets:0": b"1"})          # an older batch
    store = stores()
    expected = {TopicPartition(topic, 0): 15, TopicPartition(topic, 1): 22, TopicPartition(other, 0): 7}
    assert store.load(group, [topic, other]) == expected
    assert store.load(group) == expected  # topics found by a filtered scan when none are given
    # The next batch continues those offsets and the guide's reversed scan then sees it.
    store.commit(group, T0 + 10_000, [OffsetRange(topic, 0, 15, 18), OffsetRange(topic, 1, 22, 22)])
    prefix = f"{topic}:{group}:".encode()
    newest = list(table.scan(row_start=prefix + b"\xff", row_stop=prefix, reverse=True, limit=1))
    assert newest == [(f"{topic}:{group}:{T0 + 10_000}".encode(), {b"offsets:0": b"18", b"offsets:1": b"22"})]
    assert stores().load(group) == {**expected, TopicPartition(topic, 0): 18}
    with pytest.raises(OffsetFencedError, match="stored offset 18"):
        store.commit(group, T0 + 20_000, [OffsetRange(topic, 0, 15, 30)])


def test_a_table_without_the_families_gives_a_clear_error(stores, conn, table_name, unique):
    conn.create_table(table_name, {"cf": dict(max_versions=1)})
    with pytest.raises(CorruptCheckpointError) as caught:
        stores().load(unique("g"))
    message = str(caught.value)
    for part in (table_name, "offsets, meta", "alter", "cf"):
        assert part in message


@pytest.mark.parametrize("key_suffix, columns, part", [
    ("99999", {b"offsets:0": b"5"}, "not 13 digits"),  # unpadded millis, sorting as the newest row
    ("2023-11-14T22:13:20", {b"offsets:0": b"5"}, "<topic>:<group>:<13-digit"),  # a date, not millis
    (str(T0 + 1), {b"offsets:p0": b"5"}, "is not offsets:<partition number>"),
    (str(T0 + 1), {b"offsets:0": b"-5"}, "not an offset"),
])
def test_rows_of_another_layout_are_reported_never_reset(stores, conn, table_name, unique,
                                                         key_suffix, columns, part):
    group, topic = unique("g"), unique("t")
    table = _guide_table(conn, table_name)
    table.put(f"{topic}:{group}:{T0}".encode(), {b"offsets:0": b"3"})
    bad = f"{topic}:{group}:{key_suffix}".encode()
    table.put(bad, columns)
    store = stores()
    with pytest.raises(CorruptCheckpointError, match=part) as caught:
        store.load(group, [topic])
    assert repr(bad) in str(caught.value) and "no offset was reset" in str(caught.value)
    with pytest.raises(CorruptCheckpointError):
        store.commit(group, T0 + 10_000, [OffsetRange(topic, 0, 3, 4)])
    assert table.row(bad) == columns and table.row(group_row_key(group)) == {}


def test_a_hand_edited_group_cell_is_reported_never_reset(stores, conn, table_name, unique):
    group, topic = unique("g"), unique("t")
    store = stores()
    store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 10)])
    table = conn.table(table_name)
    table.put(group_row_key(group), {b"meta:commit": b'{"offsets": "oops"'})
    for call in (lambda: stores().load(group), lambda: store.commit(group, 2_000, [OffsetRange(topic, 0, 10, 12)]),
                 lambda: store.history(group), lambda: store.data_losses(group)):
        with pytest.raises(CorruptCheckpointError, match="meta:commit is not a dstream_kafka commit document"):
            call()
    assert table.row(group_row_key(group))[b"meta:commit"] == b'{"offsets": "oops"'


def test_a_driver_losing_the_check_and_put_race_is_fenced(stores, unique):
    group, topic = unique("g"), unique("t")
    first, second = stores(), stores()
    first.commit(group, 1_000, [OffsetRange(topic, 0, 0, 10)])
    original = second._compare_and_set

    def race(row: bytes, old: bytes | None, new: bytes) -> bool:
        # The other driver commits between this driver's read and its check-and-put.
        first.commit(group, 2_000, [OffsetRange(topic, 0, 10, 11)])
        return original(row, old, new)

    second._compare_and_set = race
    with pytest.raises(OffsetFencedError, match="checkAndPut"):
        second.commit(group, 2_000, [OffsetRange(topic, 0, 10, 20)])
    fresh = stores()
    assert fresh.load(group) == {TopicPartition(topic, 0): 11}
    assert [(h.batch_time_ms, h.ranges) for h in fresh.history(group)] == [
        (2_000, (OffsetRange(topic, 0, 10, 11),)), (1_000, (OffsetRange(topic, 0, 0, 10),))]


def test_a_crash_after_the_commit_point_keeps_the_batch_and_the_next_commit_repairs_the_rows(
        stores, conn, table_name, unique, caplog):
    group, topic = unique("g"), unique("t")
    crashed = stores()
    crashed.commit(group, 1_000, [OffsetRange(topic, 0, 0, 10)])

    def die(*args: Any) -> None:
        raise OSError("driver lost its connection")

    crashed._write_derived = die
    with caplog.at_level(logging.WARNING):
        crashed.commit(group, 2_000, [OffsetRange(topic, 0, 10, 15)])  # committed: no exception
    assert "is committed but its offsets rows were not written" in caplog.text
    table = conn.table(table_name)
    assert table.row(offsets_row_key(topic, group, 2_000)) == {}
    restarted = stores()
    assert restarted.load(group) == {TopicPartition(topic, 0): 15}
    assert [h.batch_time_ms for h in restarted.history(group)] == [2_000, 1_000]
    restarted.commit(group, 2_000, [OffsetRange(topic, 0, 10, 15)])  # the replay is a no-op ...
    assert table.row(offsets_row_key(topic, group, 2_000)) == {b"offsets:0": b"15"}  # ... that repairs
    restarted.commit(group, 3_000, [OffsetRange(topic, 0, 15, 16)])
    assert [h.batch_time_ms for h in stores().history(group)] == [3_000, 2_000, 1_000]


class _Proxy:
    """A TCP forwarder on 127.0.0.1 in front of the Thrift gateway, to cut it off and bring it back."""

    def __init__(self, port: int) -> None:
        self.target = port
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []

    def up(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(8)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(self) -> None:
        if self._server is not None:
            try:  # wakes the thread blocked in accept(); close() alone leaves the port listening
                self._server.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._server.close()
            self._server = None
        for c in self._conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        self._conns.clear()


def test_hbase_down_at_start_is_a_clear_error_within_seconds(table_name, unique):
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # nothing listens there
    store = OffsetStores.hbase("127.0.0.1", port, table=table_name, timeout=3.0)
    began = time.monotonic()
    with pytest.raises(OffsetStoreError, match=f"127.0.0.1:{port}.*connecting failed.*Nothing was reset"):
        store.load(unique("g"))
    assert time.monotonic() - began < 5.0
    store.close()


def test_hbase_down_at_commit_leaves_the_batch_uncommitted_and_a_restart_replays_it(
        hbase, table_name, unique):
    group, topic = unique("g"), unique("t")
    proxy = _Proxy(hbase.thrift_port)
    proxy.up()
    store = OffsetStores.hbase("127.0.0.1", proxy.port, table=table_name, timeout=3.0)
    try:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 10)])
        proxy.down()
        began = time.monotonic()
        with pytest.raises(OffsetStoreError, match=f"127.0.0.1:{proxy.port}.*committing offsets failed"):
            store.commit(group, 2_000, [OffsetRange(topic, 0, 10, 20)])
        assert time.monotonic() - began < 8.0
        with pytest.raises(OffsetStoreError, match="connecting failed"):
            store.load(group)
        proxy.up()  # the gateway is back: the same store reconnects and the batch is replayed
        assert store.load(group) == {TopicPartition(topic, 0): 10}
        store.commit(group, 2_000, [OffsetRange(topic, 0, 10, 20)])
        assert store.load(group) == {TopicPartition(topic, 0): 20}
    finally:
        store.close()
        proxy.down()


def test_the_group_cell_holds_everything_a_commit_changes(stores, conn, table_name, unique):
    group, topic = unique("g"), unique("t")
    store = stores()
    store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 10), OffsetRange(topic + "-b", 0, 0, 3)])
    store.record_data_loss(group, TopicPartition(topic, 0), 10, 40, None)
    doc = json.loads(conn.table(table_name).row(group_row_key(group))[b"meta:commit"])
    assert doc["seq"] == 2 and doc["batch_ms"] == 1_000
    assert doc["offsets"] == {topic: {"0": 40}, topic + "-b": {"0": 3}}
    assert [(x["lost_from"], x["lost_until"]) for x in doc["losses"]] == [(10, 40)]


@pytest.mark.parametrize("when, value", [(2_000, b"99"), (1_000, b"3")])
def test_offsets_rows_written_by_hand_after_a_commit_are_refused_not_ignored(stores, conn, table_name, unique,
                                                                             when, value):
    group, topic = unique("g"), unique("t")
    store = stores()
    store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 10)])
    # Someone "resets" the offsets as the guide would: a newer row, or the last row edited.
    conn.table(table_name).put(offsets_row_key(topic, group, when), {b"offsets:0": value})
    with pytest.raises(CorruptCheckpointError, match="the last batch \\(1000\\) committed in") as caught:
        stores().load(group)
    assert repr(offsets_row_key(topic, group, when)) in str(caught.value)
