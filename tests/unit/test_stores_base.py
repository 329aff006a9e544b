"""The OffsetStore template: arguments validated once, the commit rules, hooks and the mirror."""

from __future__ import annotations

import ast
import contextlib
import datetime as dt
import inspect
import logging
from collections.abc import Collection, Iterator, Mapping
from typing import Any

import pytest

import dstream_kafka.stores.base as base_module
from dstream_kafka.errors import ConfigurationError, InvalidOffsetRangeError, OffsetFencedError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.transactional import Transaction, TransactionalOffsetStore
from dstream_kafka.stores.mirror import KafkaGroupMirror, mirror_to
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, ResetAudit


def r(partition: int, start: int, end: int, topic: str = "t") -> OffsetRange:
    return OffsetRange(topic, partition, start, end)


class RecordingMirror:
    def __init__(self) -> None:
        self.commits: list[tuple[str, dict[TopicPartition, int]]] = []
        self.bound: list[Any] = []
        self.closed = False

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        self.commits.append((group_id, dict(offsets)))

    def bind_consumer(self, consumer: Any, lock: Any = None) -> None:
        self.bound.append(consumer)

    def close(self) -> None:
        self.closed = True


class MemoryStore(OffsetStore):
    """Offsets in a dict; records every hook call."""

    def __init__(self, mirror: RecordingMirror | None = None, written: bool = True) -> None:
        super().__init__(mirror=mirror)
        self.offsets: dict[TopicPartition, int] = {}
        self.calls: list[tuple[Any, ...]] = []
        self.written = written

    def _load(self, group_id: str, topics: Collection[str] | None) -> dict[TopicPartition, int]:
        self.calls.append(("load", group_id, topics))
        return dict(self.offsets)

    def _commit(self, group_id: str, batch_time_ms: int, merged: tuple[OffsetRange, ...]) -> bool:
        self.calls.append(("commit", group_id, batch_time_ms, merged))
        return self.written

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        self.calls.append(("history", group_id, limit))
        return []

    def _record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                          batch_time_ms: int | None) -> None:
        self.calls.append(("loss", group_id, tp, lost_from, lost_until, batch_time_ms))

    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        self.calls.append(("losses", group_id))
        return []


class MemoryTransactions(MemoryStore, TransactionalOffsetStore):
    @contextlib.contextmanager
    def _transaction(self, group_id: str, batch_time_ms: int, given: tuple[OffsetRange, ...],
                     merged: tuple[OffsetRange, ...], epoch: int) -> Iterator[Transaction]:
        self.calls.append(("transaction", group_id, batch_time_ms, given, merged))
        yield Transaction(None, group_id, batch_time_ms, given)

    def _committed_in(self, group_id: str, batch_time_ms: int) -> bool:
        self.calls.append(("committed_in", group_id, batch_time_ms))
        return True


@pytest.mark.parametrize("call", [
    lambda s: s.commit("", 1, [r(0, 0, 1)]),
    lambda s: s.commit(None, 1, [r(0, 0, 1)]),
    lambda s: s.commit("g", -1, [r(0, 0, 1)]),
    lambda s: s.commit("g", 1, [r(0, 0, 1), r(0, 2, 3)]),
    lambda s: s.commit("g", 1, [("t", 0, 0, 1)]),
    lambda s: s.plan("g", 1.5, [r(0, 0, 1)]),
    lambda s: s.load(""),
    lambda s: s.pending(""),
    lambda s: s.history(""),
    lambda s: s.data_losses(""),
    lambda s: s.committed_in("g", "5"),
    lambda s: s.record_data_loss("", TopicPartition("t", 0), 1, 2, None),
])
def test_bad_arguments_are_refused_before_any_hook_runs(call):
    store = MemoryStore()
    with pytest.raises(ConfigurationError):
        call(store)
    assert store.calls == []


def test_a_data_loss_is_checked_before_the_hook():
    store = MemoryStore()
    with pytest.raises(InvalidOffsetRangeError):
        store.record_data_loss("g", TopicPartition("t", 0), 9, 2, None)
    assert store.calls == []
    store.record_data_loss("g", TopicPartition("t", 0), 2, 9, 1_000)
    assert store.calls == [("loss", "g", TopicPartition("t", 0), 2, 9, 1_000)]


def test_commit_hands_the_hook_the_batch_time_in_ms_and_the_merged_ranges():
    store = MemoryStore()
    ms = 1_700_000_000_123
    store.commit("g", dt.datetime.fromtimestamp(ms / 1000.0), [r(1, 0, 2), r(0, 5, 9), r(0, 0, 5)])
    assert store.calls == [("commit", "g", ms, (r(0, 0, 9), r(1, 0, 2)))]


def test_load_filters_the_topics_and_sorts_the_partitions():
    store = MemoryStore()
    store.offsets = {TopicPartition("u", 0): 1, TopicPartition("t", 1): 2, TopicPartition("t", 0): 3}
    assert list(store.load("g").items()) == [
        (TopicPartition("t", 0), 3), (TopicPartition("t", 1), 2), (TopicPartition("u", 0), 1)]
    assert store.load("g", ["t"]) == {TopicPartition("t", 0): 3, TopicPartition("t", 1): 2}
    assert store.calls[-1] == ("load", "g", {"t"})


def test_the_mirror_gets_what_the_store_wrote_and_nothing_else():
    mirror = RecordingMirror()
    store = MemoryStore(mirror)
    store.commit("g", 1, [r(0, 0, 5)])
    store.commit("g", 2, [])  # an empty batch moves no offset
    MemoryStore(mirror, written=False).commit("g", 3, [r(0, 5, 7)])  # a re-run wrote nothing
    assert mirror.commits == [("g", {TopicPartition("t", 0): 5})]
    store.bind_consumer("consumer")
    assert mirror.bound == ["consumer"]
    with store:
        pass
    assert mirror.closed


def test_a_store_mirrors_to_the_kafka_group_exactly_when_it_has_a_mirror():
    assert MemoryStore(RecordingMirror()).mirrors_to_group is True
    assert MemoryStore().mirrors_to_group is False


class HistoryStore(MemoryStore):
    def __init__(self, records: list[CommitRecord]) -> None:
        super().__init__()
        self.records = records

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        self.calls.append(("history", group_id, limit))
        return self.records[:limit]


def test_last_reset_is_the_newest_commit_only_while_that_commit_is_a_reset():
    at = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    reset = CommitRecord(2, (r(0, 4, 4),), at, ResetAudit("ops", "bastion", {TopicPartition("t", 0): 9}))
    batch = CommitRecord(3, (r(0, 4, 6),), at)
    store = HistoryStore([reset, batch])
    assert store.last_reset("g") is reset
    assert store.calls == [("history", "g", 1)]
    assert HistoryStore([batch, reset]).last_reset("g") is None
    assert HistoryStore([]).last_reset("g") is None
    with pytest.raises(ConfigurationError, match="group_id"):
        store.last_reset("")


def test_the_kafka_group_mirror_sends_only_offsets_that_moved_since_its_last_copy():
    sent: list[tuple[str, dict[TopicPartition, int]]] = []
    mirror = KafkaGroupMirror(lambda group, offsets: sent.append((group, offsets)))
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    mirror.commit("g", {a: 5, b: 0})
    mirror.commit("g", {a: 5, b: 0})  # an idle batch: nothing to copy
    mirror.commit("g", {a: 7, b: 0})
    mirror.commit("h", {a: 7})  # another group has its own copy
    assert sent == [("g", {a: 5, b: 0}), ("g", {a: 7}), ("h", {a: 7})]


def test_a_failed_mirror_copy_is_sent_again_at_the_next_commit():
    sent: list[dict[TopicPartition, int]] = []

    def flaky(group: str, offsets: dict[TopicPartition, int]) -> None:
        sent.append(offsets)
        if len(sent) == 1:
            raise RuntimeError("broker unreachable")

    mirror = KafkaGroupMirror(flaky)
    mirror.commit("g", {TopicPartition("t", 0): 5})
    mirror.commit("g", {TopicPartition("t", 0): 5})
    assert sent == [{TopicPartition("t", 0): 5}] * 2


def test_the_same_batch_again_is_admitted_as_done_without_reading_the_offsets():
    def unread() -> dict[TopicPartition, int]:
        raise AssertionError("a re-run must not read the stored offsets")

    merged = (r(0, 0, 5),)
    assert OffsetStore._admit_commit("g", 1, merged, [r(0, 0, 5)], unread, holder="h", place="p") is None


def test_another_batch_at_the_same_time_is_fenced_naming_where_it_is_held():
    with pytest.raises(OffsetFencedError) as caught:
        OffsetStore._admit_commit("g", 7, (r(0, 0, 5),), (r(0, 0, 4),), dict, holder="the table C", place="p")
    assert str(caught.value).startswith(
        "Commit of batch 7 for group 'g' refused: the table C already holds batch 7 with other ranges")


def test_a_new_batch_must_continue_the_stored_offsets():
    stored = {TopicPartition("t", 0): 5}
    assert OffsetStore._admit_commit("g", 2, (r(0, 5, 9), r(1, 0, 3)), None, lambda: stored,
                                     holder="h", place="p") == stored
    with pytest.raises(OffsetFencedError, match="in the place: .*stored offset 5, batch expects 4"):
        OffsetStore._admit_commit("g", 2, (r(0, 4, 9),), None, lambda: stored, holder="h", place="the place")


def test_stores_without_a_write_ahead_log_or_transactions_answer_the_defaults():
    store = MemoryStore()
    store.plan("g", 1, [r(0, 0, 1)])
    assert store.pending("g") is None
    assert store.committed_in("g", 1) is False
    assert store.transactional is False
    assert store.calls == []


def test_a_transaction_gets_the_ranges_as_given_and_merged():
    store = MemoryTransactions()
    with store.transaction("g", dt.datetime.fromtimestamp(2.0), [r(0, 3, 5), r(0, 0, 3)]) as tx:
        assert tx.batch_time_ms == 2_000
    assert store.calls == [("transaction", "g", 2_000, (r(0, 3, 5), r(0, 0, 3)), (r(0, 0, 5),))]
    assert store.committed_in("g", 2_000) and store.transactional
    with pytest.raises(ConfigurationError):
        store.transaction("", 1, [])


def test_the_abstract_base_imports_no_store_and_no_client_library():
    tree = ast.parse(inspect.getsource(base_module))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    ours = {name for name in imported if name and name.startswith("dstream_kafka")}
    assert ours == {"dstream_kafka.errors", "dstream_kafka.offsets", "dstream_kafka.stores.records"}


def test_a_failing_mirror_warns_at_most_once_a_minute(caplog):
    calls = []

    def target(group: str, offsets: dict[TopicPartition, int]) -> None:
        calls.append((group, offsets))
        raise RuntimeError("unreachable")

    assert mirror_to(False) is None  # None is the default mirror through the stream's consumer
    mirror = mirror_to(target)
    assert isinstance(mirror, KafkaGroupMirror)
    with caplog.at_level(logging.DEBUG, logger="dstream_kafka.stores.mirror"):
        mirror.commit("g", {TopicPartition("t", 0): 5})
        mirror.commit("g", {TopicPartition("t", 0): 6})
    assert calls == [("g", {TopicPartition("t", 0): 5}), ("g", {TopicPartition("t", 0): 6})]
    assert [rec.levelno for rec in caplog.records] == [logging.WARNING, logging.DEBUG]
    assert "RuntimeError: unreachable" in caplog.records[0].getMessage()
    mirror.close()


def test_a_write_begun_before_the_stores_close_is_refused_and_a_new_one_reopens_it():
    store = MemoryStore()
    run = store.epoch
    store.close()  # a stream's stop
    for write in (lambda: store.commit("g", 1, [r(0, 0, 1)], epoch=run),
                  lambda: store.plan("g", 1, [r(0, 0, 1)], epoch=run),
                  lambda: store.record_data_loss("g", TopicPartition("t", 0), 0, 1, 1, epoch=run)):
        with pytest.raises(OffsetFencedError, match="closed since the write began"):
            write()
    assert store.calls == []  # no hook ran
    store.commit("g", 1, [r(0, 0, 1)], epoch=store.epoch)  # the next run's writes go through
    assert store.calls == [("commit", "g", 1, (r(0, 0, 1),))]


def test_close_waits_for_a_write_in_progress_and_a_write_never_waits_for_another() -> None:
    import threading

    entered, release = threading.Event(), threading.Event()

    class SlowStore(MemoryStore):
        def _commit(self, group_id: str, batch_time_ms: int, merged: tuple[OffsetRange, ...]) -> bool:
            if batch_time_ms == 1:
                entered.set()
                release.wait(30)
            return super()._commit(group_id, batch_time_ms, merged)

    store = SlowStore()
    writer = threading.Thread(target=store.commit, args=("g", 1, [r(0, 0, 1)]))
    writer.start()
    assert entered.wait(30)
    store.commit("g", 2, [r(1, 0, 1)])  # a second write goes through beside the first
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # the write began before the close: close waits for it
    release.set()
    closer.join(30)
    writer.join(30)
    assert not closer.is_alive() and [c[2] for c in store.calls] == [2, 1]


def test_after_a_failed_copy_the_mirror_does_not_hold_the_consumer_while_no_broker_accepts_a_connection(
        monkeypatch):
    import socket

    import dstream_kafka.stores.mirror as mirror_module

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    from kafka.future import Future

    class DownConsumer:
        config = {"group_id": "g", "bootstrap_servers": f"127.0.0.1:{port}"}
        commits = 0

        def commit_async(self, offsets: Any) -> Future:
            DownConsumer.commits += 1
            # kafka-python fails the copy's future once no coordinator can be found
            return Future().failure(RuntimeError("broker down"))

    monkeypatch.setattr(mirror_module, "_listed", lambda consumer, tp: True)
    mirror = KafkaGroupMirror(None)
    mirror.bind_consumer(DownConsumer())
    mirror.commit("g", {TopicPartition("t", 0): 5})
    mirror.commit("g", {TopicPartition("t", 0): 6})
    assert DownConsumer.commits == 1  # the second copy is skipped without asking the consumer
