"""A SQL store's newest commit must continue its predecessor: a hand edit is refused, not taken.

A consistent hand edit of the offsets table and the newest commit row (20 -> 28 in both) would
skip records 20..27 with no data loss recorded; the store refuses it at the next load or commit,
naming the group, the partition and both offsets. Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from dstream_kafka.errors import OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import OffsetStores

G = "group-1"
TP = TopicPartition("events", 0)


def r(start: int, end: int) -> OffsetRange:
    return OffsetRange("events", 0, start, end)


class _Db:
    """A store factory and a plain connection to its tables, for edits by hand."""

    def __init__(self, make: Callable[[], Any], connect: Callable[[], Any], prefix: str, mark: str) -> None:
        self.make, self.connect, self.prefix, self.mark = make, connect, prefix, mark

    def edit(self, statement: str, *params: Any) -> None:
        conn = self.connect()
        try:
            conn.cursor().execute(statement.format(p=self.prefix).replace("?", self.mark), params)
            conn.commit()
        finally:
            conn.close()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path, unique: Callable[[str], str]) -> Iterator[_Db]:
    prefix = "chain_" + unique("p")[-8:] + "_"
    if request.param == "sqlite":
        path = str(tmp_path / "offsets.db")
        yield _Db(lambda: OffsetStores.sqlite(path, table_prefix=prefix, also_commit_to_kafka_group=False),
                  lambda: sqlite3.connect(path), prefix, "?")
    else:
        pg = request.getfixturevalue("postgres")
        yield _Db(lambda: OffsetStores.postgres(table_prefix=prefix, also_commit_to_kafka_group=False,
                                                **pg.dsn_params()), pg.connect, prefix, "%s")


@pytest.fixture
def two_commits(db: _Db) -> _Db:
    """The group committed 0-12 (batch 1000) and 12-20 (batch 2000)."""
    with contextlib.closing(db.make()) as store:
        store.commit(G, 1000, [r(0, 12)])
        store.commit(G, 2000, [r(12, 20)])
    return db


def test_a_consistent_hand_edit_of_the_offsets_and_the_newest_commit_is_refused_at_load(two_commits: _Db) -> None:
    two_commits.edit('UPDATE "{p}offsets" SET "until_offset" = 28')
    two_commits.edit('UPDATE "{p}commits" SET "offsets" = ? WHERE "batch_time_ms" = 2000', '{"events":{"0":28}}')
    with contextlib.closing(two_commits.make()) as store, \
            pytest.raises(OffsetStoreError, match=r"group 'group-1'.*partition 0: the commit stores offset 28, "
                                                  r"but its own range ends at 20.*offsets history"):
        store.load(G)


def test_a_newest_commit_whose_range_skips_past_the_previous_commit_is_refused_at_commit(two_commits: _Db) -> None:
    two_commits.edit('UPDATE "{p}offsets" SET "until_offset" = 28')
    two_commits.edit('UPDATE "{p}commits" SET "offsets" = ?, "ranges" = ? WHERE "batch_time_ms" = 2000',
                     '{"events":{"0":28}}',
                     '[{"topic":"events","partition":0,"fromOffset":20,"untilOffset":28}]')
    with contextlib.closing(two_commits.make()) as store:
        with pytest.raises(OffsetStoreError, match=r"its range starts at 20, but the commit before it .* ended at 12"):
            store.commit(G, 3000, [r(28, 30)])
        assert store.history(G, 1)[0].batch_time_ms == 2000  # nothing was committed


def test_a_recorded_data_loss_between_two_commits_continues_the_chain(db: _Db) -> None:
    with contextlib.closing(db.make()) as store:
        store.commit(G, 1000, [r(0, 12)])
        store.record_data_loss(G, TP, 12, 15, None)
        store.commit(G, 2000, [r(15, 20)])
        store.commit(G, 3000, [r(20, 22)])
        assert store.load(G) == {TP: 22}


def test_a_reset_between_two_commits_continues_the_chain(db: _Db) -> None:
    with contextlib.closing(db.make()) as store:
        store.commit(G, 1000, [r(0, 12)])
        store.reset(G, {TP: 4}, expected={TP: 12}, user="u", host="h", batch_time_ms=2000)
        store.commit(G, 3000, [r(4, 9)])
        store.commit(G, 4000, [r(9, 10)])
        assert store.load(G) == {TP: 10}
