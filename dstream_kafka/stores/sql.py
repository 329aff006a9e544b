"""Transactional offset stores on SQL databases: SQLite (embedded default) and PostgreSQL.

A batch's results and its offsets are written in one database transaction
(:meth:`SqlOffsetStore.transaction`), the "your own data store" pattern of Spark's kafka010
guide: begin; write results; update offsets where the stored offsets equal this batch's from
offsets; check the update; commit. Tables are created on first use; every identifier is quoted.

Schema (``P`` is the table prefix, ``dstream_kafka_`` by default; ``TS`` is ``TIMESTAMPTZ`` on
PostgreSQL and ISO-8601 UTC ``TEXT`` on SQLite; ``ID`` is ``BIGSERIAL`` / ``INTEGER
AUTOINCREMENT``)::

    "Poffsets"   ("group_id" TEXT, "topic" TEXT, "partition" INTEGER,
                  "until_offset" BIGINT   -- next offset to read
                  "batch_time_ms" BIGINT  -- batch that wrote it
                  "updated_at" TS,
                  PRIMARY KEY ("group_id", "topic", "partition"))
    "Pcommits"   ("id" ID PRIMARY KEY, "group_id" TEXT, "batch_time_ms" BIGINT,
                  "ranges" TEXT   -- JSON list of {"topic","partition","fromOffset","untilOffset"}
                  "offsets" TEXT  -- JSON {"topic":{"partition":offset}}: every offset of the
                                  --   group after this commit
                  "committed_at" TS,
                  "reset" TEXT NULL -- JSON ResetAudit of a reset's commit (added to older tables)
                  UNIQUE ("group_id", "batch_time_ms"))
    "Pdata_loss" ("id" ID PRIMARY KEY, "group_id" TEXT, "topic" TEXT, "partition" INTEGER,
                  "lost_from" BIGINT, "lost_until" BIGINT, "batch_time_ms" BIGINT NULL,
                  "after_commit_id" BIGINT NULL  -- newest "Pcommits".id when recorded
                  "recorded_at" TS)
    "Playout"    ("layout_version" INTEGER)  -- see sql_layout.py; a newer one is refused

``Poffsets`` is the source of truth for where the group resumes. Before every commit (and on
:meth:`~SqlOffsetStore.load`) it is compared with the newest ``Pcommits`` row (plus data losses
recorded since), and that row with its own ranges and with the row before it (its ranges must
start where that row's offsets, moved over the data losses recorded after it, left each
partition; a reset's may start anywhere); a row changed, added or deleted by hand raises
:class:`~dstream_kafka.errors.OffsetStoreError` naming the partition, and nothing is committed
or reset. To move offsets on purpose, edit ``Poffsets`` and delete the group's ``Pcommits``
rows: without history the table is taken as it is (this is also how offsets can be seeded), or
better use :meth:`~dstream_kafka.stores.base.OffsetStore.reset` (``dstream-kafka offsets reset``).
``Pcommits`` keeps the newest ``keep_history`` rows per group.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import threading
from collections.abc import Collection, Iterator, Mapping
from typing import Any

from dstream_kafka.errors import ConfigurationError, OffsetFencedError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.offsets_json import (
    offset_ranges_from_json,
    offset_ranges_to_json,
    partition_offsets_from_json,
    partition_offsets_to_json,
)
from dstream_kafka.stores.transactional import Transaction, TransactionalOffsetStore
from dstream_kafka.stores.mirror import MirrorTarget, mirror_to
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, advance_offsets
from dstream_kafka.stores.sql_history import CommitRow, check_chain
from dstream_kafka.stores.sql_layout import check_layout, reset_audit
from dstream_kafka.stores.sql_dialects import (
    Dialect,
    PostgresDialect,
    SqliteDialect,
    quote_identifier,
    validate_prefix,
)

__all__ = ["PostgresOffsetStore", "SqlOffsetStore", "SqliteOffsetStore"]

log = logging.getLogger(__name__)

#: How long close() waits for a store call in progress before it cancels the call's connection.
CLOSE_WAIT_S = 1.0

#: Batch commits a store remembers in process (committed_in asks only about the newest batches).
REMEMBERED_COMMITS = 256


class SqlOffsetStore(TransactionalOffsetStore):
    """Offsets in three SQL tables, committed atomically and fenced (see the module docstring).

    Parameters
    ----------
    dialect : Dialect
        The database (:class:`SqliteDialect` or :class:`PostgresDialect`).
    table_prefix : str
        Prefix of the three table names (letters, digits, ``_``).
    schema : str, optional
        PostgreSQL schema of the tables (it must exist).
    keep_history : int
        Rows of commit history kept per group.
    also_commit_to_kafka_group : dict or callable or bool, optional
        Mirror every commit to a Kafka group for lag tools (:func:`~dstream_kafka.stores.mirror.mirror_to`):
        by default through the stream's consumer to its group.id; False turns it off.
    create : bool
        Create the tables on first use (default). False: without its offsets table (or SQLite
        file) the first call raises ConfigurationError ("No such offset store"); nothing is created.

    Notes
    -----
    One connection per store, opened on first use and reopened after a connection error.
    Every method is thread-safe; :meth:`transaction` holds the store for the whole block.
    """

    def __init__(self, dialect: Dialect, *, table_prefix: str = "dstream_kafka_", schema: str | None = None,
                 keep_history: int = 1000, also_commit_to_kafka_group: MirrorTarget | None | bool = None,
                 create: bool = True) -> None:
        super().__init__(mirror=mirror_to(also_commit_to_kafka_group))
        self._dialect = dialect
        self._create = create
        self.table_prefix = validate_prefix(table_prefix)
        if schema is not None:
            validate_prefix(schema, "schema")
        self.keep_history = self._check_keep("keep_history", keep_history)
        qualify = (quote_identifier(schema) + ".") if schema else ""
        self.tables = {name: qualify + quote_identifier(table_prefix + name)
                       for name in ("offsets", "commits", "data_loss", "layout")}
        self._conn: Any = None
        self._tables_ready = False
        # Batches whose offsets this store committed (or found committed) in this process:
        # committed_in answers those without a round trip to the database.
        self._committed_here: collections.OrderedDict[tuple[str, int], None] = collections.OrderedDict()
        self._returning_id = ' RETURNING "id"' if dialect.name == "postgres" else ""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._dialect.describe()}, table_prefix={self.table_prefix!r})"

    # -- plumbing -----------------------------------------------------------------------------
    def _q(self, statement: str) -> str:
        return self._dialect.sql(statement.format(
            O=self.tables["offsets"], C=self.tables["commits"], L=self.tables["data_loss"], V=self.tables["layout"],
            now=self._dialect.now, for_update=self._dialect.for_update))

    def _connection(self) -> Any:
        if self._conn is None or getattr(self._conn, "closed", False):
            self._conn = self._dialect.connect()
        if not self._tables_ready:
            if not self._create:
                self._require_tables(self._conn)
            self._create_tables(self._conn)
        return self._conn

    def _require_tables(self, conn: Any) -> None:
        """Refuse a database without the offsets table (``create=False``): nothing is created."""
        try:
            self._dialect.begin(conn, write=False)
            conn.cursor().execute(self._q('SELECT 1 FROM {O} WHERE 1 = 0'))
            conn.commit()
        except self._dialect.errors as exc:
            _rollback(conn)
            # SQLite says "no such table", PostgreSQL gives SQLSTATE 42P01 (undefined_table).
            if "no such table" not in str(exc) and getattr(exc, "pgcode", None) != "42P01":
                raise self._dialect.wrap("reading the offsets table", exc) from None
            raise ConfigurationError(
                f"No such offset store: {self._dialect.describe()} has no table {self.tables['offsets']}. "
                "Check the database the store URI names (a stream creates its tables when it first starts); "
                "nothing was created.") from None

    def _create_tables(self, conn: Any) -> None:
        d, p = self._dialect, self.table_prefix
        statements = [
            f'CREATE TABLE IF NOT EXISTS {{O}} ("group_id" {d.text} NOT NULL, "topic" {d.text} NOT NULL, '
            f'"partition" INTEGER NOT NULL, "until_offset" {d.bigint} NOT NULL, '
            f'"batch_time_ms" {d.bigint} NOT NULL, "updated_at" {d.timestamp} NOT NULL, '
            'PRIMARY KEY ("group_id", "topic", "partition"))',
            f'CREATE TABLE IF NOT EXISTS {{C}} ("id" {d.id_column}, "group_id" {d.text} NOT NULL, '
            f'"batch_time_ms" {d.bigint} NOT NULL, "ranges" {d.text} NOT NULL, "offsets" {d.text} NOT NULL, '
            f'"committed_at" {d.timestamp} NOT NULL, "reset" {d.text}, UNIQUE ("group_id", "batch_time_ms"))',
            f'CREATE INDEX IF NOT EXISTS {quote_identifier(p + "commits_group")} ON {{C}} ("group_id", "id")',
            f'CREATE TABLE IF NOT EXISTS {{L}} ("id" {d.id_column}, "group_id" {d.text} NOT NULL, '
            f'"topic" {d.text} NOT NULL, "partition" INTEGER NOT NULL, "lost_from" {d.bigint} NOT NULL, '
            f'"lost_until" {d.bigint} NOT NULL, "batch_time_ms" {d.bigint}, "after_commit_id" {d.bigint}, '
            f'"recorded_at" {d.timestamp} NOT NULL)',
            f'CREATE INDEX IF NOT EXISTS {quote_identifier(p + "data_loss_group")} ON {{L}} ("group_id", "id")',
            'CREATE TABLE IF NOT EXISTS {V} ("layout_version" INTEGER NOT NULL)',
        ]
        for attempt in range(2):
            try:
                d.begin(conn, write=True)
                cur = conn.cursor()
                for statement in statements:
                    cur.execute(self._q(statement))
                conn.commit()
                check_layout(conn, self._dialect, self._q, self.tables["layout"])
                self._tables_ready = True
                return
            except d.errors as exc:
                _rollback(conn)
                if attempt == 0 and isinstance(exc, d.integrity_errors):
                    continue  # two stores created the tables at once (PostgreSQL): try again
                raise d.wrap("creating the offset tables", exc) from None

    @contextlib.contextmanager
    def _wrapped(self, what: str) -> Iterator[None]:
        try:
            yield
        except self._dialect.errors as exc:
            if isinstance(exc, self._dialect.connection_errors):
                self._drop_connection()
            raise self._dialect.wrap(what, exc) from None

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    @contextlib.contextmanager
    def _txn(self, what: str, write: bool) -> Iterator[Any]:
        """Run a block in one transaction: commit on success, roll back on any exception."""
        with self._lock:
            with self._wrapped(what):
                conn = self._connection()
                self._dialect.begin(conn, write)
                cur = conn.cursor()
            try:
                yield cur
                with self._wrapped(what):
                    conn.commit()
            except BaseException:
                _rollback(conn)
                raise

    # -- state and checks ---------------------------------------------------------------------
    def _state(self, cur: Any, group_id: str, lock: bool) -> tuple[dict[TopicPartition, int], int | None]:
        """Return the stored offsets (validated against the history) and the newest commit id.

        ``lock``: lock the group for this transaction first. ``FOR UPDATE`` locks only rows that
        exist, so on PostgreSQL a transaction-scoped advisory lock on the group comes first: two
        first commits of a group (no rows yet) cannot both read an empty table. SQLite's write
        transaction (``BEGIN IMMEDIATE``) locks the whole database already."""
        if lock and self._dialect.name == "postgres":
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"{self.tables['offsets']}/{group_id}",))
        cur.execute(self._q('SELECT "topic", "partition", "until_offset" FROM {O} WHERE "group_id" = ? '
                            'ORDER BY "topic", "partition"' + ("{for_update}" if lock else "")), (group_id,))
        stored: dict[TopicPartition, int] = {}
        for topic, partition, until in cur.fetchall():
            if not (isinstance(partition, int) and partition >= 0 and isinstance(until, int) and until >= 0
                    and isinstance(topic, str) and topic):
                raise OffsetStoreError(
                    f"The offsets table {self.tables['offsets']} holds an invalid row for group {group_id!r}: "
                    f"topic={topic!r}, partition={partition!r}, until_offset={until!r} (not an offset; the "
                    "row was edited by hand). Nothing was committed and no offset was reset; fix the row.")
            stored[TopicPartition(topic, partition)] = until
        # The two newest commits and the data losses recorded after each, in one round trip.
        cur.execute(self._q('SELECT c."id", c."batch_time_ms", c."offsets", c."ranges", c."reset", l."topic", '
                            'l."partition", l."lost_from", l."lost_until" FROM (SELECT "id", "batch_time_ms", '
                            '"offsets", "ranges", "reset" FROM {C} WHERE "group_id" = ? ORDER BY "id" DESC '
                            'LIMIT 2) c LEFT JOIN {L} l ON l."group_id" = ? AND l."after_commit_id" = c."id" '
                            'ORDER BY c."id" DESC, l."id"'),
                    (group_id, group_id))
        rows = cur.fetchall()
        if not rows:
            return stored, None  # no history: the table is taken as it is (seeded offsets)
        commits = [CommitRow(self.tables["commits"], group_id, [row for row in rows if row[0] == commit_id])
                   for commit_id in sorted({row[0] for row in rows}, reverse=True)]
        newest = commits[0]
        commit_id, batch_time = newest.id, newest.batch_time_ms
        check_chain(repr(self), self.tables, group_id, commits[1] if len(commits) > 1 else None, newest)
        expected = newest.after_losses()
        problems = []
        for tp in sorted(set(stored) | set(expected)):
            have, want = stored.get(tp), expected.get(tp)
            if have == want:
                continue
            if have is None:
                problems.append(f"topic {tp.topic} partition {tp.partition}: the row is missing (deleted?), "
                                f"the last commit stored {want}")
            elif want is None:
                problems.append(f"topic {tp.topic} partition {tp.partition}: the table holds {have}, which "
                                "no commit wrote (inserted by hand?)")
            else:
                problems.append(f"topic {tp.topic} partition {tp.partition}: the table holds {have}, "
                                f"the last commit stored {want}")
        if problems:
            raise OffsetStoreError(
                f"The offsets table {self.tables['offsets']} does not match the last commit of group "
                f"{group_id!r} (batch {batch_time}, {self.tables['commits']} id {commit_id}): "
                + "; ".join(problems) + ". It was edited by hand or rows were deleted. Nothing was "
                "committed and no offset was reset. Restore the rows (the committed offsets are in "
                f"{self.tables['commits']}.offsets), or, if the change is deliberate, delete the group's "
                f"rows from {self.tables['commits']} so the table is taken as it is.")
        return stored, commit_id

    def _committed_ranges(self, cur: Any, group_id: str, t: int) -> tuple[OffsetRange, ...] | None:
        cur.execute(self._q('SELECT "ranges" FROM {C} WHERE "group_id" = ? AND "batch_time_ms" = ?'), (group_id, t))
        row = cur.fetchone()
        return None if row is None else tuple(offset_ranges_from_json(row[0], self.tables["commits"]))

    def _check_batch(self, cur: Any, group_id: str, t: int,
                     merged: tuple[OffsetRange, ...]) -> Mapping[TopicPartition, int] | None:
        """Lock the group's rows and check; return the stored offsets, None if already committed."""
        stored, _ = self._state(cur, group_id, lock=True)
        return self._admit_commit(group_id, t, merged, self._committed_ranges(cur, group_id, t),
                                  lambda: stored, holder=self.tables["commits"], place=self.tables["offsets"],
                                  reset=self._reset_audit)

    def _apply(self, cur: Any, group_id: str, t: int, merged: tuple[OffsetRange, ...],
               stored: Mapping[TopicPartition, int]) -> None:
        for r in merged:
            if r.topicPartition() in stored:
                cur.execute(self._q('UPDATE {O} SET "until_offset" = ?, "batch_time_ms" = ?, "updated_at" = {now} '
                                    'WHERE "group_id" = ? AND "topic" = ? AND "partition" = ? AND "until_offset" = ?'),
                            (r.untilOffset, t, group_id, r.topic, r.partition, stored[r.topicPartition()]))
                if cur.rowcount != 1:
                    raise OffsetFencedError(
                        f"Commit refused for group {group_id!r}: the offsets row of topic {r.topic} partition "
                        f"{r.partition} no longer holds the expected offset {r.fromOffset} (changed concurrently). "
                        "Nothing was stored.")
            else:
                try:
                    cur.execute(self._q('INSERT INTO {O} ("group_id", "topic", "partition", "until_offset", '
                                        '"batch_time_ms", "updated_at") VALUES (?, ?, ?, ?, ?, {now})'),
                                (group_id, r.topic, r.partition, r.untilOffset, t))
                except self._dialect.integrity_errors:
                    raise OffsetFencedError(
                        f"Commit refused for group {group_id!r}: topic {r.topic} partition {r.partition} has no "
                        "stored offset in this batch's view but another driver inserted one meanwhile; "
                        "nothing was stored.") from None
        try:
            audit = None if self._reset_audit is None else json.dumps(self._reset_audit.doc())
            cur.execute(self._q('INSERT INTO {C} ("group_id", "batch_time_ms", "ranges", "offsets", "committed_at", '
                                '"reset") VALUES (?, ?, ?, ?, {now}, ?)' + self._returning_id),
                        (group_id, t, offset_ranges_to_json(merged),
                         partition_offsets_to_json(advance_offsets(stored, merged)), audit))
        except self._dialect.integrity_errors:
            raise OffsetFencedError(f"Commit of batch {t} for group {group_id!r} refused: another driver "
                                    "committed this batch meanwhile; nothing was stored.") from None
        new_id = cur.fetchone()[0] if self._returning_id else cur.lastrowid
        if new_id is None or new_id % 100 == 0:  # prune the history every 100 commits
            cur.execute(self._q('DELETE FROM {C} WHERE "group_id" = ? AND "id" <= (SELECT "id" FROM {C} '
                                'WHERE "group_id" = ? ORDER BY "id" DESC LIMIT 1 OFFSET ?)'),
                        (group_id, group_id, self.keep_history))

    # -- contract -----------------------------------------------------------------------------
    def _load(self, group_id: str, topics: Collection[str] | None) -> dict[TopicPartition, int]:
        with self._txn("loading offsets", write=False) as cur, self._wrapped("loading offsets"):
            stored, _ = self._state(cur, group_id, lock=False)
        return stored

    def _commit(self, group_id: str, t: int, merged: tuple[OffsetRange, ...]) -> bool:
        with self._txn("committing offsets", write=True) as cur, self._wrapped("committing offsets"):
            stored = self._check_batch(cur, group_id, t, merged)
            if stored is not None:
                self._apply(cur, group_id, t, merged, stored)
        self._remember_commit(group_id, t)
        return stored is not None

    @contextlib.contextmanager
    def _transaction(self, group_id: str, t: int, given: tuple[OffsetRange, ...],
                     merged: tuple[OffsetRange, ...], epoch: int) -> Iterator[Transaction]:
        what = f"Commit of batch {t} of group {group_id!r}"
        with self._lock:
            with self._open_since(epoch, what):  # a stopped stream's batch fails before its block
                pass
            with self._wrapped("opening a transaction"):
                conn = self._connection()
                self._dialect.begin(conn, write=True)
                cur = conn.cursor()
            try:
                with self._wrapped("checking offsets"):
                    stored = self._check_batch(cur, group_id, t, merged)
                yield Transaction(cur, group_id, t, given, stored is None, self._dialect.paramstyle)
                if stored is None:
                    _rollback(conn)  # a re-run of a committed batch: drop its writes
                    self._remember_commit(group_id, t)
                    return
                # close() waits for this step, or this step sees the close and rolls back.
                with self._open_since(epoch, what), self._wrapped("committing offsets"):
                    self._apply(cur, group_id, t, merged, stored)
                    conn.commit()
                self._remember_commit(group_id, t)
            except BaseException:
                _rollback(conn)
                raise
        self._mirror_commit(group_id, merged)

    def _remember_commit(self, group_id: str, t: int) -> None:
        self._committed_here[(group_id, t)] = None
        while len(self._committed_here) > REMEMBERED_COMMITS:
            self._committed_here.popitem(last=False)

    def _committed_in(self, group_id: str, t: int) -> bool:
        with self._lock:
            if (group_id, t) in self._committed_here:
                return True
        with self._txn("reading commits", write=False) as cur, self._wrapped("reading commits"):
            cur.execute(self._q('SELECT 1 FROM {C} WHERE "group_id" = ? AND "batch_time_ms" = ?'), (group_id, t))
            return cur.fetchone() is not None

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        with self._txn("reading commits", write=False) as cur, self._wrapped("reading commits"):
            cur.execute(self._q('SELECT "batch_time_ms", "ranges", "committed_at", "reset" FROM {C} '
                                'WHERE "group_id" = ? ORDER BY "id" DESC LIMIT ?'), (group_id, max(0, int(limit))))
            rows = cur.fetchall()
        return [CommitRecord(int(t), tuple(offset_ranges_from_json(r, self.tables["commits"])),
                             self._dialect.to_datetime(at), reset_audit(self.tables["commits"], reset))
                for t, r, at, reset in rows]

    def _record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                          batch_time_ms: int | None) -> None:
        with self._txn("recording data loss", write=True) as cur, self._wrapped("recording data loss"):
            stored, commit_id = self._state(cur, group_id, lock=True)
            cur.execute(self._q('INSERT INTO {L} ("group_id", "topic", "partition", "lost_from", "lost_until", '
                                '"batch_time_ms", "after_commit_id", "recorded_at") VALUES (?, ?, ?, ?, ?, ?, ?, {now})'),
                        (group_id, tp.topic, tp.partition, lost_from, lost_until, batch_time_ms, commit_id))
            if stored.get(tp) == lost_from:
                cur.execute(self._q('UPDATE {O} SET "until_offset" = ?, "updated_at" = {now} WHERE "group_id" = ? '
                                    'AND "topic" = ? AND "partition" = ? AND "until_offset" = ?'),
                            (lost_until, group_id, tp.topic, tp.partition, lost_from))

    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        with self._txn("reading data losses", write=False) as cur, self._wrapped("reading data losses"):
            cur.execute(self._q('SELECT "topic", "partition", "lost_from", "lost_until", "batch_time_ms", '
                                '"recorded_at" FROM {L} WHERE "group_id" = ? ORDER BY "id"'), (group_id,))
            rows = cur.fetchall()
        return [DataLossRecord(topic, int(p), int(a), int(b), None if t is None else int(t),
                               self._dialect.to_datetime(at)) for topic, p, a, b, t, at in rows]

    def close(self) -> None:
        super().close()  # first: a transaction still open (an abandoned batch) can no longer commit
        if self._lock.acquire(timeout=CLOSE_WAIT_S):
            try:
                self._drop_connection()
            finally:
                self._lock.release()
            return
        # A transaction holds the lock for its whole block, which may be stuck in the user's code
        # (a stopped stream's abandoned batch): cancel and close its connection, so the database
        # rolls it back and releases its row locks now rather than when the block ends.
        conn, self._conn = self._conn, None
        # The block keeps the old lock until it ends; the store's next user (a new stream on this
        # store object) must not wait for it.
        self._lock = threading.RLock()
        if conn is not None:
            log.warning("%r closed while a transaction was still open (a batch abandoned by the stop "
                           "of its stream): it is rolled back and its offsets are not committed", self)
            # psycopg2 cancels the running statement; sqlite3 interrupts it (both thread-safe).
            cancel = getattr(conn, "cancel", None) or getattr(conn, "interrupt", None)
            with contextlib.suppress(Exception):
                if cancel is not None:
                    cancel()
            _rollback(conn)  # sqlite3 keeps the write lock of a closed connection with a live cursor
            with contextlib.suppress(Exception):
                conn.close()


def _rollback(conn: Any) -> None:
    with contextlib.suppress(Exception):
        conn.rollback()


class SqliteOffsetStore(SqlOffsetStore):
    """The embedded default: offsets (and, through :meth:`transaction`, results) in a SQLite file.

    Parameters
    ----------
    path : str or os.PathLike
        The database file (created with its folder on first use, unless ``create`` is False).
    timeout : float
        Seconds to wait for another writer's lock.
    create : bool
        False: the file must exist; nothing is created (see :class:`SqlOffsetStore`).
    **kwargs
        ``table_prefix``, ``keep_history``, ``also_commit_to_kafka_group``.
    """

    def __init__(self, path: str | os.PathLike[str] = "dstream_kafka_offsets.db", *, timeout: float = 30.0,
                 create: bool = True, **kwargs: Any) -> None:
        super().__init__(SqliteDialect(path, timeout, create=create), create=create, **kwargs)
        self.path = os.fspath(path)


class PostgresOffsetStore(SqlOffsetStore):
    """Offsets (and results) in PostgreSQL through psycopg2.

    Parameters
    ----------
    dsn : str, optional
        libpq connection string or ``postgresql://`` URI.
    table_prefix, schema, keep_history, also_commit_to_kafka_group
        See :class:`SqlOffsetStore`.
    create : bool
        False: the tables must exist (see :class:`SqlOffsetStore`).
    timeout : float
        Seconds a store call waits to connect (libpq ``connect_timeout``, unless given) and for
        a lock another session holds (``lock_timeout``); past it the call fails with
        :class:`~dstream_kafka.errors.OffsetStoreError` and nothing is written. Statements of
        the application inside ``stream.transaction()`` get no statement timeout from the store.
    **connect_kwargs
        ``psycopg2.connect`` keyword arguments (``host``, ``port``, ``dbname``, ``user``,
        ``password``, ...). The password never appears in ``repr``, logs or error messages.
    """

    def __init__(self, dsn: str | None = None, *, table_prefix: str = "dstream_kafka_", schema: str | None = None,
                 keep_history: int = 1000, also_commit_to_kafka_group: Any = None, timeout: float = 30.0,
                 create: bool = True, **connect_kwargs: Any) -> None:
        super().__init__(PostgresDialect(dsn, connect_kwargs, timeout), table_prefix=table_prefix, schema=schema,
                         keep_history=keep_history, also_commit_to_kafka_group=also_commit_to_kafka_group,
                         create=create)
