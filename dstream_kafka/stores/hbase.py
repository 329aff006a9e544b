"""Offsets in an HBase table (happybase over the Thrift1 gateway), in the layout of Cloudera's guide.

The table's layout (one group cell per group, the guide's offsets rows, history rows) and the
code that reads and writes its rows are in :mod:`dstream_kafka.stores.hbase_rows`; this module
connects to the gateway, holds the commit point and implements the
:class:`~dstream_kafka.stores.base.OffsetStore` contract.

Atomicity and fencing
---------------------
HBase mutates one row atomically, never several. A batch touching several topics writes one
offsets row per topic, so the **commit point is a single cell**: ``meta:commit`` of the group
row, replaced with Thrift1 ``checkAndPut`` (compare the exact bytes read, set the new ones;
happybase does not expose it, so :meth:`HBaseOffsetStore._compare_and_set` calls the Thrift
client happybase wraps, in one place). That JSON document holds the group's offsets of every
partition, the last batch and its ranges, and the data-loss records, so a commit and a data
loss record with its offset move are each one atomic step. A second driver that read the same
document loses the compare-and-set and gets :class:`~dstream_kafka.errors.OffsetFencedError`;
one that read an older document fails the continuation check first. The group cell lives in
the ``meta`` family without TTL, so an idle group never loses its offsets to the TTL.

The guide's offsets rows and the history row of a batch are written **after** the commit point
(by the winner only, so a fenced driver never overwrites them). A crash between the two leaves
the group cell committed and these rows missing: the first commit of the next store instance
writes them again from the group cell (``rows``, ``ranges``), so they are derived, idempotent
copies. :meth:`~HBaseOffsetStore.load` reads the group cell; when a group has no group cell
(a table written by the guide's own code, or by hand) it falls back to the reversed scans of the
offsets rows, and the first commit creates the cell (``checkAndPut`` on a missing cell).

Results and offsets
-------------------
HBase has no multi-row transactions, so results and offsets cannot be committed together. The
strongest guarantee is **effectively once for idempotent writes**: write every result row under
a key derived from its input (:func:`result_row_key`: topic, partition and offset of the Kafka
record, or batch time and partition for aggregates), then commit the offsets. A crash before
the commit replays the batch from the stored offsets; the replay writes the same keys with the
same values, so the results are overwritten, never duplicated. Readers can see the results of a
batch before its offsets are committed (between the two steps), and non-idempotent writes
(increments, appends) are at-least-once.

Failures
--------
HBase (or its Thrift gateway) down at start: the first call raises
:class:`~dstream_kafka.errors.OffsetStoreError` naming ``host:port`` within ``timeout`` seconds;
nothing is written or reset. Down at commit: the exception propagates, the batch is not
committed (the group cell is unchanged or, if the gateway applied it and the answer was lost, a
re-run of the same batch is a no-op), and a restart replays it. A row key under a group's
prefix that is not this layout, an offsets column that is not a partition number, a value that
is not an offset, a group cell that is not valid JSON, or (checked by :meth:`~OffsetStore.load`)
an offsets row newer than the group cell's last batch or differing from it raises
:class:`~dstream_kafka.errors.CorruptCheckpointError` naming the table, row and what to fix;
nothing is ever reset silently.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import time
from collections.abc import Collection, Iterator, Mapping
from typing import Any, cast

from dstream_kafka.errors import (
    ConfigurationError,
    CorruptCheckpointError,
    MissingDependencyError,
    OffsetFencedError,
    OffsetStoreError,
)
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.hbase_keys import batch_row_key, batch_row_prefix, group_row_key
from dstream_kafka.stores.hbase_rows import (
    COMMIT_COLUMN,
    DEFAULT_TABLE,
    LAYOUT_VERSION,
    META_FAMILY,
    OFFSETS_FAMILY,
    HBaseRows,
    encode_group_doc,
)
from dstream_kafka.stores.mirror import MirrorTarget, mirror_to
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, ResetAudit, advance_offsets, utc_from_ms

__all__ = ["LAYOUT_VERSION", "HBaseOffsetStore", "result_row_key"]

log = logging.getLogger(__name__)

_DAY = 24 * 3600


def result_row_key(topic: str, partition: int, offset: int, prefix: str = "") -> bytes:
    """Return an idempotent result row key for the Kafka record at ``offset``.

    Writing each result under the key of the record it came from makes a replayed batch
    overwrite its earlier results instead of duplicating them. Offsets are zero-padded to 20
    digits so rows sort in offset order.

    Examples
    --------
    >>> result_row_key("clicks", 3, 42, prefix="app1:")
    b'app1:clicks:3:00000000000000000042'
    """
    if offset < 0 or partition < 0:
        raise ConfigurationError(f"partition and offset must be >= 0, got {partition}, {offset}")
    return f"{prefix}{topic}:{partition}:{offset:020d}".encode()


def _happybase() -> Any:
    try:
        import happybase
    except ImportError:
        raise MissingDependencyError(
            "The HBase offset store needs happybase: install dstream_kafka[hbase] "
            "(pip install 'dstream_kafka[hbase]')") from None
    return happybase


class HBaseOffsetStore(OffsetStore):
    """Offsets in an HBase table through the Thrift1 gateway (see the module docstring).

    Parameters
    ----------
    host : str
        Host of the HBase Thrift1 gateway.
    port : int
        Its port (9090 by default in HBase).
    table : str
        Table name; created with both families when missing and ``create_table`` is true.
    ttl_days : float
        TTL of the ``offsets`` family when the store creates the table (the guide's 30 days).
        The group cell (``meta`` family) has no TTL.
    timeout : float
        Connect and call timeout in seconds.
    create_table : bool
        Create the table when it does not exist.
    also_commit_to_kafka_group : dict or callable or bool, optional
        Mirror every commit to a Kafka group for lag tools (:func:`~dstream_kafka.stores.mirror.mirror_to`):
        by default through the stream's consumer to its group.id; False turns it off.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 9090, *, table: str = DEFAULT_TABLE,
                 ttl_days: float = 30.0, timeout: float = 10.0, create_table: bool = True,
                 also_commit_to_kafka_group: MirrorTarget | None | bool = None) -> None:
        super().__init__(mirror=mirror_to(also_commit_to_kafka_group))
        self._happybase = _happybase()
        from thriftpy2.thrift import TException

        # What the client raises when the gateway is unreachable or HBase fails a call (the
        # IOError and IllegalArgument of the IDL are TExceptions); anything else is a bug.
        self._client_errors: tuple[type[BaseException], ...] = (OSError, TException)
        if not isinstance(table, str) or not table:
            raise ConfigurationError(f"table must be a non-empty string, got {table!r}")
        if not ttl_days > 0:
            raise ConfigurationError(f"ttl_days must be > 0, got {ttl_days!r}")
        self.host, self.port, self.table_name = host, int(port), table
        self.ttl_days, self.timeout, self.create_table = ttl_days, timeout, create_table
        self._rows = HBaseRows(table, self.address)
        self._conn: Any = None
        self._table: Any = None
        # Groups whose derived rows (offsets rows, history row) of the last batch this instance
        # has not written yet: all of them at start, in case the last driver crashed between
        # the commit point and these rows.
        self._derived_ok: set[str] = set()

    def __repr__(self) -> str:
        return f"HBaseOffsetStore('{self.address}', table={self.table_name!r})"

    @property
    def address(self) -> str:
        """``host:port`` of the Thrift gateway."""
        return f"{self.host}:{self.port}"

    # -- plumbing -----------------------------------------------------------------------------
    def _open(self) -> Any:
        """Return the happybase table, connecting and checking (or creating) the table once."""
        if self._table is not None:
            return self._table
        conn = self._happybase.Connection(self.host, self.port, timeout=int(self.timeout * 1000),
                                          autoconnect=False, transport="buffered", protocol="binary")
        try:
            conn.open()
            names = set(conn.tables())
            if self.table_name.encode() not in names:
                if not self.create_table:
                    conn.close()
                    raise ConfigurationError(
                        f"No such offset store: HBase {self.address} has no table {self.table_name!r}. Check the "
                        "table name in the store URI (a stream creates its table when it first starts, unless "
                        "create_table=False); nothing was created.")
                conn.create_table(self.table_name, {
                    OFFSETS_FAMILY.decode(): dict(max_versions=1, block_cache_enabled=True,
                                                  time_to_live=int(self.ttl_days * _DAY)),
                    META_FAMILY.decode(): dict(max_versions=1, block_cache_enabled=True),
                })
            table = conn.table(self.table_name)
            families = set(table.families())
        except self._client_errors as exc:
            conn.close()
            raise self._error("connecting", exc) from None
        missing = [f.decode() for f in (OFFSETS_FAMILY, META_FAMILY) if f not in families]
        if missing:
            conn.close()
            raise CorruptCheckpointError(
                f"HBase {self.address}: table {self.table_name!r} has no column famil"
                f"{'ies' if len(missing) > 1 else 'y'} {', '.join(missing)} (it has "
                f"{sorted(f.decode() for f in families)}); it is not an offsets table of this layout. "
                f"Add {'them' if len(missing) > 1 else 'it'} in the HBase shell, e.g. "
                f"alter '{self.table_name}', {{NAME => '{missing[0]}', VERSIONS => 1}}, or use another table.")
        self._conn, self._table = conn, table
        return table

    def _error(self, what: str, exc: BaseException) -> OffsetStoreError:
        return OffsetStoreError(f"HBase Thrift gateway {self.address} (table {self.table_name!r}): {what} failed: "
                                f"{type(exc).__name__}: {exc}. Nothing was reset.")

    @contextlib.contextmanager
    def _calls(self, what: str) -> Iterator[Any]:
        """Yield the table; turn client errors into OffsetStoreError and drop the connection,
        which is unusable after a transport error (the next call reconnects)."""
        table = self._open()
        try:
            yield table
        except self._client_errors as exc:
            self._drop()
            raise self._error(what, exc) from None

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        self._conn = self._table = None

    def _compare_and_set(self, row: bytes, old: bytes | None, new: bytes) -> bool:
        """Replace ``meta:commit`` of ``row`` with ``new`` if it still holds ``old`` (None: absent).

        happybase has no check-and-put; this is the one place that calls the Thrift1 client it
        wraps (``Hbase.checkAndPut``, one mutation, atomic in the region server).
        """
        # Hbase_thrift is the module thriftpy2 builds from happybase's IDL when happybase loads.
        Mutation = importlib.import_module("Hbase_thrift").Mutation

        return bool(self._conn.client.checkAndPut(self.table_name.encode(), row, COMMIT_COLUMN, old,
                                                  Mutation(column=COMMIT_COLUMN, value=new), {}))

    def _write_derived(self, table: Any, group_id: str, doc: Mapping[str, Any]) -> None:
        """Write the offsets rows and the history row of the group cell's last batch (idempotent);
        a method of the store so that the crash tests can slow it down or make it fail."""
        self._rows.write_derived(table, group_id, doc)

    # -- contract -----------------------------------------------------------------------------
    def _load(self, group_id: str, topics: Collection[str] | None) -> dict[TopicPartition, int]:
        with self._lock, self._calls("loading offsets") as table:
            _, doc = self._rows.read_group(table, group_id)
            if doc is not None:
                self._rows.check_guide_rows(table, group_id, doc, topics)  # at start: a scan per topic
                self._rows.check_chain(table, group_id, doc)
                return dict(doc["_offsets"])
            return self._rows.load_guide_rows(table, group_id, topics)

    def _commit(self, group_id: str, t: int, merged: tuple[OffsetRange, ...]) -> bool:
        with self._lock, self._calls("committing offsets") as table:
            raw, doc = self._rows.read_group(table, group_id)
            if doc is not None and group_id not in self._derived_ok:
                self._write_derived(table, group_id, doc)  # repair a crash after the last commit point
                self._derived_ok.add(group_id)
            committed: tuple[OffsetRange, ...] | None = None
            if doc is not None and doc["batch_ms"] is not None:
                if doc["batch_ms"] == t:
                    committed = doc["_ranges"]
                elif t < doc["batch_ms"]:
                    data = table.row(batch_row_key(group_id, t))
                    if data:
                        committed = self._rows.history_row(group_id, batch_row_key(group_id, t), data).ranges

            def read_stored() -> Mapping[TopicPartition, int]:
                if doc is not None:
                    return cast("Mapping[TopicPartition, int]", doc["_offsets"])
                return self._rows.load_guide_rows(table, group_id, None)  # a group the guide's code wrote

            stored = self._admit_commit(group_id, t, merged, committed, read_stored, holder="HBase",
                                        place=f"HBase {self.address} table {self.table_name!r}",
                                        reset=self._reset_audit)
            if stored is None:
                return False
            offsets = advance_offsets(stored, merged)
            batch_topics = {r.topic for r in merged}
            rows = {topic: {tp.partition: o for tp, o in offsets.items() if tp.topic == topic}
                    for topic in batch_topics}
            new = encode_group_doc(int(doc["seq"]) + 1 if doc else 1, offsets, t, merged,
                                         int(time.time() * 1000), rows, list(doc["losses"]) if doc else [],
                                         None if self._reset_audit is None else self._reset_audit.doc())
            if not self._compare_and_set(group_row_key(group_id), raw, new):
                raise OffsetFencedError(
                    f"Commit of batch {t} for group {group_id!r} refused by HBase {self.address} (checkAndPut "
                    f"on {group_row_key(group_id)!r} failed): another driver committed for this group since "
                    "this one read it. Nothing was stored.")
            # The batch is committed now; failing to write its derived rows must not make the
            # stream believe otherwise (it would replay a committed batch): the next commit
            # writes them again.
            try:
                self._write_derived(table, group_id, json.loads(new))
                self._derived_ok.add(group_id)
            except Exception as exc:
                self._derived_ok.discard(group_id)
                self._drop()
                log.warning("HBase %s: batch %s of group %r is committed but its offsets rows were not "
                               "written (%s: %s); the next commit writes them", self.address, t, group_id,
                               type(exc).__name__, exc)
        return True

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        if limit <= 0:
            return []
        with self._lock, self._calls("reading the commit history") as table:
            _, doc = self._rows.read_group(table, group_id)
            if doc is None or doc["batch_ms"] is None:
                return []
            last = doc["batch_ms"]
            # The last batch comes from the group cell (its history row may not be written yet).
            records = [CommitRecord(last, doc["_ranges"], utc_from_ms(doc["committed_at_ms"]),
                                    ResetAudit.from_doc(doc.get("reset")))]
            prefix = batch_row_prefix(group_id)
            start = batch_row_key(group_id, last)  # a reversed scan's start is inclusive: skip it
            for key, data in table.scan(row_start=start, row_stop=prefix, reverse=True, limit=limit + 1):
                if key == start:
                    continue
                if len(records) >= limit:
                    break
                records.append(self._rows.history_row(group_id, key, data))
        return records[:limit]

    def _record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                          batch_time_ms: int | None) -> None:
        record = DataLossRecord.doc(tp, lost_from, lost_until, batch_time_ms, int(time.time() * 1000))
        with self._lock, self._calls("recording data loss") as table:
            raw, doc = self._rows.read_group(table, group_id)
            if doc is None:
                offsets = self._rows.load_guide_rows(table, group_id, [tp.topic])
                doc = {"seq": 0, "batch_ms": None, "_ranges": (), "committed_at_ms": None, "rows": {},
                       "losses": []}
            else:
                offsets = dict(doc["_offsets"])
            if offsets.get(tp) == lost_from:
                offsets[tp] = lost_until
            rows = {t: {int(p): o for p, o in parts.items()} for t, parts in doc["rows"].items()}
            new = encode_group_doc(int(doc["seq"]) + 1, offsets, doc["batch_ms"], doc["_ranges"],
                                         doc["committed_at_ms"], rows, [*doc["losses"], record], doc.get("reset"))
            if not self._compare_and_set(group_row_key(group_id), raw, new):
                raise OffsetFencedError(
                    f"Recording data loss of {tp.topic}-{tp.partition} for group {group_id!r} failed: the group "
                    f"row changed concurrently in HBase {self.address}; nothing was stored.")

    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        with self._lock, self._calls("reading data losses") as table:
            _, doc = self._rows.read_group(table, group_id)
        return [] if doc is None else [DataLossRecord.from_doc(x) for x in doc["losses"]]

    def close(self) -> None:
        with self._lock:
            self._drop()
            super().close()

