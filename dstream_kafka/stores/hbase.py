"""Offsets in an HBase table (happybase over the Thrift1 gateway), in the layout of Cloudera's guide.

Layout
------
One table (``stream_kafka_offsets`` by default) is shared by many apps, topics and groups.
Row keys are described in :mod:`dstream_kafka.stores.hbase_keys`; ``<g>`` is the group id with
``%`` and ``:`` percent-escaped, times are epoch milliseconds zero-padded to 13 digits::

    family offsets (TTL, 30 days by default; 1 version)
      <topic>:<g>:<batchTimeMillis>   offsets:<partition> = untilOffset (ASCII decimal)   <- the guide
      #batch:<g>:<batchTimeMillis>    offsets:ranges = JSON ranges, offsets:committed_at_ms,
                                      offsets:reset = JSON audit (a reset's commit only)
    family meta (no TTL; 1 version)
      #group:<g>                      meta:commit = JSON {"seq", "offsets", "batch_ms", "ranges",
                                                          "committed_at_ms", "rows", "losses",
                                                          "reset" (a reset's commit only),
                                                          "layout": LAYOUT_VERSION (absent: 1)}

An offsets row holds, as in the guide, one column per partition of the topic with the offset
the next batch starts at, for **every** partition of the topic the group has committed (not only
those of the batch), so the newest row of a ``(topic, group)`` alone gives the topic's offsets:
a reversed scan from ``<topic>:<g>:\\xff`` down to ``<topic>:<g>:`` (limit 1) reads it.

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
from typing import Any

from dstream_kafka.errors import (
    ConfigurationError,
    CorruptCheckpointError,
    MissingDependencyError,
    OffsetFencedError,
    OffsetStoreError,
)
from dstream_kafka.offsets import OffsetRange, TopicPartition, offset_ranges_from_json, offset_ranges_to_json
from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.hbase_keys import (
    MS_DIGITS,
    batch_row_key,
    batch_row_prefix,
    group_row_key,
    offsets_row_key,
    offsets_row_prefix,
    parse_offsets_row_key,
)
from dstream_kafka.stores.mirror import MirrorTarget, mirror_to
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, ResetAudit, advance_offsets, utc_from_ms

__all__ = ["LAYOUT_VERSION", "HBaseOffsetStore", "result_row_key"]

#: The layout of the group cell this version writes; a newer one is refused.
LAYOUT_VERSION = 1

logger = logging.getLogger(__name__)

#: Default table name, as in the guide.
DEFAULT_TABLE = "stream_kafka_offsets"
OFFSETS_FAMILY = b"offsets"
META_FAMILY = b"meta"
_COMMIT_COLUMN = META_FAMILY + b":commit"
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
                    raise OffsetStoreError(
                        f"HBase {self.address}: table {self.table_name!r} does not exist (create_table=False)")
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

        return bool(self._conn.client.checkAndPut(self.table_name.encode(), row, _COMMIT_COLUMN, old,
                                                  Mutation(column=_COMMIT_COLUMN, value=new), {}))

    def _corrupt(self, row: bytes, problem: str) -> CorruptCheckpointError:
        return CorruptCheckpointError(
            f"HBase table {self.table_name!r} at {self.address}, row {row!r}: {problem}. The row was written "
            "by hand or by another tool; nothing was committed and no offset was reset. Fix or remove the row.")

    # -- the group cell -----------------------------------------------------------------------
    def _read_group(self, table: Any, group_id: str) -> tuple[bytes | None, dict[str, Any] | None]:
        """Return the raw ``meta:commit`` cell of the group and its parsed document."""
        row = group_row_key(group_id)
        raw = table.row(row, columns=[_COMMIT_COLUMN]).get(_COMMIT_COLUMN)
        if raw is None:
            return None, None
        try:
            doc = json.loads(raw)
            if isinstance(doc, dict) and int(doc.get("layout", 1)) > LAYOUT_VERSION:
                raise OffsetStoreError(
                    f"HBase table {self.table_name!r} at {self.address}, row {row!r}: layout {doc['layout']}, written "
                    f"by a newer dstream_kafka (this version reads layout {LAYOUT_VERSION}). Nothing was read or "
                    "written; upgrade dstream_kafka to use it.")
            offsets = {TopicPartition(topic, int(p)): int(o)
                       for topic, parts in doc["offsets"].items() for p, o in parts.items()}
            if any(o < 0 for o in offsets.values()):
                raise ValueError("negative offset")
            doc["_offsets"] = offsets
            doc["_ranges"] = tuple(offset_ranges_from_json(json.dumps(doc["ranges"]), "ranges"))
            int(doc["seq"])
            for loss in doc["losses"]:
                DataLossRecord.from_doc(loss)
            ResetAudit.from_doc(doc.get("reset"))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise self._corrupt(row, f"meta:commit is not a dstream_kafka commit document ({exc})") from None
        return raw, doc

    @staticmethod
    def _encode_group_doc(seq: int, offsets: Mapping[TopicPartition, int], batch_ms: int | None,
                          ranges: tuple[OffsetRange, ...], committed_at_ms: int | None,
                          rows: Mapping[str, Mapping[int, int]], losses: list[dict[str, Any]],
                          reset: dict[str, Any] | None = None) -> bytes:
        by_topic: dict[str, dict[str, int]] = {}
        for tp, off in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, {})[str(tp.partition)] = off
        doc = {"seq": seq, "offsets": by_topic, "batch_ms": batch_ms,
               "ranges": json.loads(offset_ranges_to_json(ranges)), "committed_at_ms": committed_at_ms,
               "rows": {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(rows.items())},
               "losses": losses, "layout": LAYOUT_VERSION, **({"reset": reset} if reset is not None else {})}
        return json.dumps(doc, separators=(",", ":")).encode()

    # -- the guide's offsets rows -------------------------------------------------------------
    def _parse_offsets_row(self, key: bytes, data: Mapping[bytes, bytes], topic: str,
                           group_id: str) -> dict[TopicPartition, int]:
        try:
            found_topic, found_group, _ = parse_offsets_row_key(key)
        except ValueError as exc:
            raise self._corrupt(key, f"the row key is not <topic>:<group>:<13-digit batchTimeMillis> ({exc})") from None
        if (found_topic, found_group) != (topic, group_id):
            raise self._corrupt(key, f"the row key names topic {found_topic!r} and group {found_group!r}")
        result = {}
        for column, value in data.items():
            family, _, qualifier = column.partition(b":")
            if family != OFFSETS_FAMILY:
                continue
            if not qualifier.isdigit():
                raise self._corrupt(key, f"column {column!r} is not offsets:<partition number>")
            text = value.decode("ascii", "replace").strip()
            if not text.isdigit():
                raise self._corrupt(key, f"column {column!r} holds {value[:40]!r}, not an offset (ASCII decimal)")
            result[TopicPartition(topic, int(qualifier))] = int(text)
        return result

    def _newest_offsets_row(self, table: Any, topic: str,
                            group_id: str) -> tuple[int, dict[TopicPartition, int]] | None:
        """Return (batch time, offsets) of the newest offsets row of ``(topic, group)``, read
        with a reversed scan bounded to its prefix; None when the topic has no row."""
        prefix = offsets_row_prefix(topic, group_id)
        # A reversed scan starts at row_start and stops before row_stop; happybase's
        # row_prefix + reverse returns the wrong row, so the bounds are explicit.
        for key, data in table.scan(row_start=prefix + b"\xff", row_stop=prefix, reverse=True, limit=1,
                                    columns=[OFFSETS_FAMILY]):
            offsets = self._parse_offsets_row(key, data, topic, group_id)  # checks the key first
            return int(key[-MS_DIGITS:]), offsets
        return None

    def _check_guide_rows(self, table: Any, group_id: str, doc: Mapping[str, Any],
                          topics: Collection[str] | None) -> None:
        """Refuse offsets rows that the group cell does not account for (written by hand or by
        another tool after this store committed), instead of silently ignoring them."""
        last = doc["batch_ms"]
        if last is None:
            return
        names = sorted({tp.topic for tp in doc["_offsets"]} if topics is None else set(topics))
        for topic in names:
            found = self._newest_offsets_row(table, topic, group_id)
            if found is None:
                continue
            ms, offsets = found
            expected = doc["rows"].get(topic)
            changed = ms == last and expected is not None and offsets != {
                TopicPartition(topic, int(p)): o for p, o in expected.items()}
            if ms > last or changed:
                raise self._corrupt(
                    offsets_row_key(topic, group_id, ms),
                    f"this offsets row {'is newer than' if ms > last else 'differs from'} the last batch "
                    f"({last}) committed in {group_row_key(group_id)!r} meta:commit, which holds the "
                    "group's offsets. Remove the row, or change offsets with the offsets CLI")

    def _guide_topics(self, table: Any, group_id: str) -> list[str]:
        """Return the topics with offsets rows of the group (a filtered key-only full scan)."""
        needle = b":" + offsets_row_prefix("x", group_id)[2:]  # b":<group>:"
        # The filter keeps rows whose key holds ":<group>:" (quotes doubled for the filter
        # language; the comparator ignores case); the key parser then checks every key.
        quoted = needle.replace(b"'", b"''")
        flt = b"RowFilter(=, 'substring:" + quoted + b"') AND KeyOnlyFilter()"
        topics = set()
        for key, _ in table.scan(filter=flt):
            if key.startswith(b"#"):
                continue
            try:
                topic, group, _ = parse_offsets_row_key(key)
            except ValueError:
                continue  # another group whose name merely contains this one
            if group == group_id:
                topics.add(topic)
        return sorted(topics)

    def _write_derived(self, table: Any, group_id: str, doc: Mapping[str, Any]) -> None:
        """Write the offsets rows and the history row of the group cell's last batch (idempotent)."""
        batch_ms = doc.get("batch_ms")
        if batch_ms is None:
            return
        with table.batch() as b:
            for topic, parts in doc["rows"].items():
                b.put(offsets_row_key(topic, group_id, batch_ms),
                      {OFFSETS_FAMILY + b":" + p.encode(): str(o).encode() for p, o in parts.items()})
            cells = {OFFSETS_FAMILY + b":ranges": json.dumps(doc["ranges"], separators=(",", ":")).encode(),
                     OFFSETS_FAMILY + b":committed_at_ms": str(doc["committed_at_ms"]).encode()}
            if doc.get("reset") is not None:
                cells[OFFSETS_FAMILY + b":reset"] = json.dumps(doc["reset"], separators=(",", ":")).encode()
            b.put(batch_row_key(group_id, batch_ms), cells)

    def _history_row(self, table: Any, group_id: str, key: bytes,
                     data: Mapping[bytes, bytes]) -> CommitRecord:
        try:
            ms = int(key[len(batch_row_prefix(group_id)):].decode())
            ranges = tuple(offset_ranges_from_json(data[OFFSETS_FAMILY + b":ranges"].decode(), "ranges"))
            at = int(data[OFFSETS_FAMILY + b":committed_at_ms"])
            reset_cell = data.get(OFFSETS_FAMILY + b":reset")
            reset = ResetAudit.from_doc(None if reset_cell is None else json.loads(reset_cell))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise self._corrupt(key, f"not a dstream_kafka history row ({exc})") from None
        return CommitRecord(ms, ranges, utc_from_ms(at), reset)

    # -- contract -----------------------------------------------------------------------------
    def _load(self, group_id: str, topics: Collection[str] | None) -> dict[TopicPartition, int]:
        with self._lock, self._calls("loading offsets") as table:
            _, doc = self._read_group(table, group_id)
            if doc is not None:
                self._check_guide_rows(table, group_id, doc, topics)  # at start: a scan per topic
                return dict(doc["_offsets"])
            return self._load_guide_rows(table, group_id, topics)

    def _load_guide_rows(self, table: Any, group_id: str,
                         topics: Collection[str] | None) -> dict[TopicPartition, int]:
        names = self._guide_topics(table, group_id) if topics is None else sorted(topics)
        result: dict[TopicPartition, int] = {}
        for topic in names:
            found = self._newest_offsets_row(table, topic, group_id)
            if found is not None:
                result.update(found[1])
        return result

    def _commit(self, group_id: str, t: int, merged: tuple[OffsetRange, ...]) -> bool:
        with self._lock, self._calls("committing offsets") as table:
            raw, doc = self._read_group(table, group_id)
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
                        committed = self._history_row(table, group_id, batch_row_key(group_id, t), data).ranges

            def read_stored() -> Mapping[TopicPartition, int]:
                if doc is not None:
                    return doc["_offsets"]
                return self._load_guide_rows(table, group_id, None)  # a group the guide's code wrote

            stored = self._admit_commit(group_id, t, merged, committed, read_stored, holder="HBase",
                                        place=f"HBase {self.address} table {self.table_name!r}",
                                        reset=self._reset_audit)
            if stored is None:
                return False
            offsets = advance_offsets(stored, merged)
            batch_topics = {r.topic for r in merged}
            rows = {topic: {tp.partition: o for tp, o in offsets.items() if tp.topic == topic}
                    for topic in batch_topics}
            new = self._encode_group_doc(int(doc["seq"]) + 1 if doc else 1, offsets, t, merged,
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
                logger.warning("HBase %s: batch %s of group %r is committed but its offsets rows were not "
                               "written (%s: %s); the next commit writes them", self.address, t, group_id,
                               type(exc).__name__, exc)
        return True

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        if limit <= 0:
            return []
        with self._lock, self._calls("reading the commit history") as table:
            _, doc = self._read_group(table, group_id)
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
                records.append(self._history_row(table, group_id, key, data))
        return records[:limit]

    def _record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                          batch_time_ms: int | None) -> None:
        record = DataLossRecord.doc(tp, lost_from, lost_until, batch_time_ms, int(time.time() * 1000))
        with self._lock, self._calls("recording data loss") as table:
            raw, doc = self._read_group(table, group_id)
            if doc is None:
                offsets = self._load_guide_rows(table, group_id, [tp.topic])
                doc = {"seq": 0, "batch_ms": None, "_ranges": (), "committed_at_ms": None, "rows": {},
                       "losses": []}
            else:
                offsets = dict(doc["_offsets"])
            if offsets.get(tp) == lost_from:
                offsets[tp] = lost_until
            rows = {t: {int(p): o for p, o in parts.items()} for t, parts in doc["rows"].items()}
            new = self._encode_group_doc(int(doc["seq"]) + 1, offsets, doc["batch_ms"], doc["_ranges"],
                                         doc["committed_at_ms"], rows, [*doc["losses"], record], doc.get("reset"))
            if not self._compare_and_set(group_row_key(group_id), raw, new):
                raise OffsetFencedError(
                    f"Recording data loss of {tp.topic}-{tp.partition} for group {group_id!r} failed: the group "
                    f"row changed concurrently in HBase {self.address}; nothing was stored.")

    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        with self._lock, self._calls("reading data losses") as table:
            _, doc = self._read_group(table, group_id)
        return [] if doc is None else [DataLossRecord.from_doc(x) for x in doc["losses"]]

    def close(self) -> None:
        with self._lock:
            self._drop()
            super().close()

