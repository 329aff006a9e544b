"""Results and offsets in one database transaction, on SQLite and a real PostgreSQL server.

Also: a hand-edited offsets table gives a clear error and is never reset, and the PostgreSQL
password never reaches exception text, tracebacks, logs or repr.
"""

from __future__ import annotations

import logging
import pickle
import sqlite3
import threading
import traceback
from typing import Any

import pytest

from dstream_kafka.errors import ConfigurationError, OffsetFencedError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import OffsetStores, SqlOffsetStore


class Db:
    """One backend: makes stores, runs raw SQL on its own connection, knows the placeholder."""

    def __init__(self, name: str, make: Any, connect: Any, ph: str) -> None:
        self.name, self._make, self._connect, self.ph = name, make, connect, ph
        self.stores: list[SqlOffsetStore] = []

    def make(self, **kwargs: Any) -> SqlOffsetStore:
        store = self._make(**kwargs)
        self.stores.append(store)
        return store

    def sql(self, statement: str, params: tuple = ()) -> list[tuple]:
        conn = self._connect()
        try:
            cur = conn.cursor()
            cur.execute(statement.replace("?", self.ph), params)
            rows = cur.fetchall() if cur.description else []
            conn.commit()
            return rows
        finally:
            conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path, unique) -> Any:
    prefix = "tx_" + unique("x").rsplit("-", 1)[1] + "_"  # unique per test, a valid identifier
    if request.param == "sqlite":
        path = tmp_path / "offsets.db"
        d = Db("sqlite", lambda **kw: OffsetStores.sqlite(path, **{"table_prefix": prefix, **kw}),
               lambda: sqlite3.connect(path), "?")
    else:
        pg = request.getfixturevalue("postgres")
        d = Db("postgres", lambda **kw: OffsetStores.postgres(**pg.dsn_params(), **{"table_prefix": prefix, **kw}),
               pg.connect, "%s")
    d.prefix = prefix
    d.results = f'"{prefix}results"'
    d.sql(f'CREATE TABLE {d.results} ("word" TEXT, "n" INTEGER)')
    yield d
    for store in d.stores:
        store.close()


G = "group-1"


def r(partition: int, start: int, end: int) -> OffsetRange:
    return OffsetRange("events", partition, start, end)


def results(db: Db) -> list[tuple]:
    return sorted(db.sql(f'SELECT "word", "n" FROM {db.results}'))


def insert(db: Db) -> str:
    return f'INSERT INTO {db.results} VALUES ({db.ph}, {db.ph})'


def test_results_and_offsets_commit_in_one_transaction(db):
    store = db.make()
    assert store.transactional
    with store.transaction(G, 1_000, [r(0, 0, 10), r(1, 0, 5)]) as tx:
        assert not tx.already_committed
        tx.executemany(insert(db), [("a", 1), ("b", 2)])
        tx.execute(insert(db), ("c", 3))
        tx.cursor.execute(insert(db), ("d", 4))
    assert results(db) == [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    fresh = db.make()
    assert fresh.load(G) == {TopicPartition("events", 0): 10, TopicPartition("events", 1): 5}
    assert fresh.committed_in(G, 1_000) and not fresh.committed_in(G, 2_000)
    assert fresh.history(G)[0].ranges == (r(0, 0, 10), r(1, 0, 5))


def test_the_store_that_committed_a_batch_answers_committed_in_without_the_database(db, monkeypatch):
    store = db.make()
    with store.transaction(G, 1_000, [r(0, 0, 10)]) as tx:
        tx.execute(insert(db), ("a", 1))
    store.commit(G, 1_500, [r(0, 10, 12)])

    def unreachable() -> Any:
        raise OSError("database unreachable")

    monkeypatch.setattr(store, "_connection", unreachable)
    assert store.committed_in(G, 1_000)  # known from its own transaction: no round trip
    assert store.committed_in(G, 1_500)  # and from its own commit()
    with pytest.raises(OSError):
        store.committed_in(G, 2_000)  # not known: asks the database


def test_pyspark_batch_time_datetime_and_an_rdd_like_value_are_accepted(db):
    import datetime as dt

    class FakeRdd:
        def offsetRanges(self) -> list[OffsetRange]:
            return [r(0, 0, 3)]

    when = dt.datetime.fromtimestamp(1_700_000_000_000 / 1000.0)  # how PySpark builds batch times
    store = db.make()
    with store.transaction(G, when, FakeRdd()) as tx:
        tx.execute(insert(db), ("x", 1))
    assert store.committed_in(G, 1_700_000_000_000)


def test_a_user_exception_rolls_back_results_and_offsets(db):
    store = db.make()
    store.commit(G, 1_000, [r(0, 0, 10)])
    with pytest.raises(ZeroDivisionError):
        with store.transaction(G, 2_000, [r(0, 10, 20)]) as tx:
            tx.execute(insert(db), ("lost", 1))
            1 / 0
    assert results(db) == []
    assert db.make().load(G) == {TopicPartition("events", 0): 10}
    assert not store.committed_in(G, 2_000)
    # The store is usable afterwards and the batch can be re-run.
    with store.transaction(G, 2_000, [r(0, 10, 20)]) as tx:
        tx.execute(insert(db), ("kept", 1))
    assert results(db) == [("kept", 1)]


def test_a_stale_second_driver_is_fenced_before_its_block_runs(db):
    first, second = db.make(), db.make()
    first.commit(G, 1_000, [r(0, 0, 10)])
    ran = []
    with pytest.raises(OffsetFencedError, match="stored offset 10, batch expects 0"):
        with second.transaction(G, 2_000, [r(0, 0, 7)]) as tx:
            ran.append(tx)
    assert ran == [] and results(db) == []
    assert db.make().load(G) == {TopicPartition("events", 0): 10}


def test_a_fence_at_commit_time_rolls_back_the_users_rows_too(db):
    store = db.make()
    store.commit(G, 1_000, [r(0, 0, 10)])
    with pytest.raises(OffsetFencedError, match="no longer holds the expected offset 10"):
        with store.transaction(G, 2_000, [r(0, 10, 20)]) as tx:
            tx.execute(insert(db), ("doomed", 1))
            # Something inside the same transaction moves the stored offset under our feet.
            tx.execute(f'UPDATE "{db.prefix}offsets" SET "until_offset" = 11')
    assert results(db) == []
    assert db.make().load(G) == {TopicPartition("events", 0): 10}


# SQLite's BEGIN IMMEDIATE keeps other writers out for the whole block: PostgreSQL only.
@pytest.mark.parametrize("db", ["postgres"], indirect=True)
@pytest.mark.parametrize("rival_partition", [3, 4], ids=["same-partition", "other-partition"])
def test_a_first_commit_waits_for_the_groups_open_first_transaction_so_both_never_think_they_are_first(
        db, rival_partition):
    store, rival = db.make(), db.make()
    outcome: list[BaseException | None] = []

    def commit_rival() -> None:
        try:
            rival.commit(G, 1_001, [r(rival_partition, 0, 4)])
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=commit_rival)
    with store.transaction(G, 1_000, [r(3, 0, 5)]) as tx:
        tx.execute(insert(db), ("kept", 1))
        thread.start()
        thread.join(1.0)
        # The group has no rows to lock with FOR UPDATE yet; the group lock holds the rival.
        assert thread.is_alive() and outcome == []
    thread.join(60)
    assert results(db) == [("kept", 1)]
    if rival_partition == 3:  # it then reads the first commit and no longer continues it
        assert isinstance(outcome[0], OffsetFencedError) and "stored offset 5" in str(outcome[0])
        assert db.make().load(G) == {TopicPartition("events", 3): 5}
    else:  # it then continues the first commit: its history row holds both partitions
        assert outcome == [None]
        assert db.make().load(G) == {TopicPartition("events", 3): 5, TopicPartition("events", 4): 4}


def test_a_transaction_open_when_its_store_is_closed_rolls_back_and_the_store_reopens_afterwards(db):
    store = db.make()
    store.commit(G, 1_000, [r(0, 0, 10)])
    with pytest.raises(OffsetFencedError, match="closed since the write began"):
        with store.transaction(G, 2_000, [r(0, 10, 20)]) as tx:
            tx.execute(insert(db), ("abandoned", 1))
            closer = threading.Thread(target=store.close)  # as a stream's stop does
            closer.start()
            closer.join(30)
            assert not closer.is_alive()  # close() never waits for the block to end
    assert results(db) == []
    assert db.make().load(G) == {TopicPartition("events", 0): 10}
    with store.transaction(G, 2_000, [r(0, 10, 20)]) as tx:  # a new run on the same store object
        tx.execute(insert(db), ("again", 1))
    assert results(db) == [("again", 1)]


def test_a_write_given_the_epoch_of_a_run_before_the_stores_close_is_refused(db):
    store = db.make()
    epoch = store.epoch
    store.close()
    with pytest.raises(OffsetFencedError, match="closed since"):
        store.commit(G, 1_000, [r(0, 0, 10)], epoch=epoch)
    with pytest.raises(OffsetFencedError, match="closed since"):
        with store.transaction(G, 1_000, [r(0, 0, 10)], epoch=epoch) as tx:
            tx.execute(insert(db), ("never", 1))
    assert results(db) == [] and db.make().load(G) == {}


def test_re_running_a_committed_batch_writes_nothing_twice(db):
    store = db.make()
    with store.transaction(G, 1_000, [r(0, 0, 10)]) as tx:
        tx.execute(insert(db), ("once", 1))
    with store.transaction(G, 1_000, [r(0, 0, 10)]) as tx:  # re-run after a crash
        assert tx.already_committed
        tx.execute(insert(db), ("once", 1))
    assert results(db) == [("once", 1)]
    store.commit(G, 1_000, [r(0, 0, 10)])  # the stream's own commit is a no-op too
    assert [h.batch_time_ms for h in store.history(G)] == [1_000]


@pytest.mark.parametrize("edit, expected", [
    ('UPDATE "{p}offsets" SET "until_offset" = 5', "the table holds 5, the last commit stored 10"),
    ('UPDATE "{p}offsets" SET "until_offset" = 50', "the table holds 50, the last commit stored 10"),
    ('DELETE FROM "{p}offsets" WHERE "partition" = 1', "partition 1: the row is missing"),
    ('INSERT INTO "{p}offsets" VALUES (\'group-1\', \'events\', 7, 3, 0, \'2020-01-01T00:00:00Z\')',
     "partition 7: the table holds 3, which no commit wrote"),
    ('UPDATE "{p}offsets" SET "until_offset" = -1001', "until_offset=-1001 (not an offset"),
])
def test_a_hand_edited_offsets_table_gives_a_clear_error_and_is_never_reset(db, edit, expected):
    store = db.make()
    store.commit(G, 1_000, [r(0, 0, 10), r(1, 0, 10)])
    db.sql(edit.format(p=db.prefix))
    before = db.sql(f'SELECT "topic", "partition", "until_offset" FROM "{db.prefix}offsets" ORDER BY 2')
    with pytest.raises(OffsetStoreError, match="no offset was reset") as caught:
        store.commit(G, 2_000, [r(0, 10, 20), r(1, 10, 20)])
    assert expected in str(caught.value)
    assert not isinstance(caught.value, OffsetFencedError)
    with pytest.raises(OffsetStoreError, match="no offset was reset"):
        db.make().load(G)  # a restart stops too, instead of starting somewhere else
    with pytest.raises(OffsetStoreError):
        with store.transaction(G, 2_000, [r(0, 10, 20), r(1, 10, 20)]):
            pytest.fail("the block must not run")
    after = db.sql(f'SELECT "topic", "partition", "until_offset" FROM "{db.prefix}offsets" ORDER BY 2')
    assert after == before  # nothing was reset or "repaired"
    assert not store.committed_in(G, 2_000)


# PostgreSQL's BIGINT column refuses text, so only SQLite can hold garbage offsets.
@pytest.mark.parametrize("db", ["sqlite"], indirect=True)
def test_garbage_in_sqlite_offsets_is_reported(db):
    store = db.make()
    store.commit(G, 1_000, [r(0, 0, 10)])
    db.sql(f'UPDATE "{db.prefix}offsets" SET "until_offset" = \'ten\'')
    with pytest.raises(OffsetStoreError, match="until_offset='ten'"):
        store.load(G)


def test_a_deliberate_edit_is_accepted_once_the_groups_history_is_deleted(db):
    store = db.make()
    store.commit(G, 1_000, [r(0, 0, 10)])
    db.sql(f'UPDATE "{db.prefix}offsets" SET "until_offset" = 4')
    with pytest.raises(OffsetStoreError):
        store.load(G)
    db.sql(f'DELETE FROM "{db.prefix}commits" WHERE "group_id" = ?', (G,))
    assert store.load(G) == {TopicPartition("events", 0): 4}
    store.commit(G, 2_000, [r(0, 4, 6)])
    assert store.load(G) == {TopicPartition("events", 0): 6}


def test_tables_are_created_with_the_prefix_and_bad_prefixes_are_refused(db):
    store = db.make()
    store.load(G)
    for name in ("offsets", "commits", "data_loss"):
        assert db.sql(f'SELECT COUNT(*) FROM "{db.prefix}{name}"') == [(0,)]
    for bad in ('x"; DROP TABLE y; --', "1abc", "a-b", "x" * 60):
        with pytest.raises(ConfigurationError, match="table_prefix"):
            db.make(table_prefix=bad)


def test_the_postgres_password_never_reaches_errors_logs_or_repr(postgres, caplog):
    params = postgres.dsn_params()
    password = params["password"]
    assert password
    stores = [
        OffsetStores.postgres(**{**params, "password": password + "-wrong"}),
        OffsetStores.postgres(f"host=127.0.0.1 port={params['port']} user=postgres dbname=nope "
                              f"password={password}"),
        OffsetStores.postgres(f"postgresql://postgres:{password}@127.0.0.1:1/dstream", connect_timeout=2),
    ]
    with caplog.at_level(logging.DEBUG):
        for store in stores:
            with pytest.raises(OffsetStoreError) as caught:
                store.load("g")
            exc = caught.value
            text = "".join(traceback.format_exception(exc))
            assert password not in text and password not in repr(store), text
            assert exc.__cause__ is None and exc.__suppress_context__
            with pytest.raises(TypeError, match="not picklable"):
                pickle.dumps(store)
            store.close()
        for bad_dsn in (f"host=127.0.0.1 password {password}", f"host=x password={password} bogus=1 junk"):
            with pytest.raises(ConfigurationError) as bad:
                OffsetStores.postgres(bad_dsn)
            assert password not in "".join(traceback.format_exception(bad.value))
        good = OffsetStores.postgres(**params, table_prefix="pwcheck_")
        good.commit("g", 1, [r(0, 0, 1)])
        assert password not in repr(good)
        good.close()
    assert password not in caplog.text


@pytest.mark.parametrize("blocked", ["before-its-transaction", "inside-its-transaction"])
def test_a_batch_blocked_in_its_output_past_the_stops_give_up_never_commits_and_the_next_stream_reads_it(
        db, blocked, kafka, make_ssc, unique, monkeypatch):
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from dstream_kafka.streaming import scheduler
    from support import string_params, wait_until

    monkeypatch.setattr(scheduler, "STOP_WAIT_SECONDS", 1.0)  # the stop gives up after 1 s + graceful
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic)
    kafka.produce(topic, [f"v{i}" for i in range(30)])
    store = db.make()  # one store object for both runs, as a program restarting its stream
    entered, release = threading.Event(), threading.Event()
    outcomes: list[BaseException | None] = []

    def start(block: bool) -> Any:
        ssc = make_ssc(0.5)
        ssc.graceful_stop_timeout = 0.5
        params = string_params(kafka, group, **{"auto.offset.reset": "earliest"})
        stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                               ConsumerStrategies.Subscribe([topic], params), offsetStore=store)

        def save(time: Any, rdd: Any) -> None:
            rows = rdd.map(lambda record: (record.value, record.offset)).collect()
            if not rows:
                return
            try:
                if block and blocked == "before-its-transaction":
                    entered.set()
                    release.wait(120)
                with stream.transaction(time) as tx:
                    tx.executemany(insert(db), rows)
                    if block and blocked == "inside-its-transaction":
                        entered.set()
                        release.wait(120)
                outcomes.append(None)
            except BaseException as error:
                outcomes.append(error)
                raise

        stream.foreachRDD(save)
        ssc.start()
        return ssc

    first = start(block=True)
    wait_until(entered.is_set, "the first batch's output")
    first.stop(stopSparkContext=False, stopGraceFully=True)  # gives up on the blocked batch
    release.set()
    wait_until(lambda: len(outcomes) == 1, "the abandoned batch's end")
    assert isinstance(outcomes[0], OffsetFencedError), outcomes[0]
    assert results(db) == [] and db.make().load(G) == {} and db.make().load(group) == {}

    second = start(block=False)
    wait_until(lambda: len(results(db)) >= 30, "the next stream's commit of the 30 records")
    second.stop(stopSparkContext=False, stopGraceFully=True)
    assert results(db) == sorted((f"v{i}", i) for i in range(30))
    assert all(outcome is None for outcome in outcomes[1:]), outcomes
    assert db.make().load(group) == {TopicPartition(topic, 0): 30}
