"""The rows of an HBase offsets table: the layout :class:`~dstream_kafka.stores.hbase.HBaseOffsetStore` reads and writes.

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

This module encodes, parses and checks these cells and rows through a happybase table object
it is given; connecting, the compare-and-set of the group cell (the commit point) and the
:class:`~dstream_kafka.stores.base.OffsetStore` contract are in :mod:`dstream_kafka.stores.hbase`.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from dstream_kafka.errors import CorruptCheckpointError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.offsets_json import offset_ranges_from_json, offset_ranges_to_json
from dstream_kafka.stores.hbase_keys import (
    MS_DIGITS,
    batch_row_key,
    batch_row_prefix,
    group_row_key,
    offsets_row_key,
    offsets_row_prefix,
    parse_offsets_row_key,
)
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, ResetAudit, chain_breaks, utc_from_ms

__all__ = [
    "COMMIT_COLUMN",
    "DEFAULT_TABLE",
    "LAYOUT_VERSION",
    "META_FAMILY",
    "OFFSETS_FAMILY",
    "HBaseRows",
    "encode_group_doc",
]

#: The layout of the group cell this version writes; a newer one is refused.
LAYOUT_VERSION = 1

#: Default table name, as in the guide.
DEFAULT_TABLE = "stream_kafka_offsets"
OFFSETS_FAMILY = b"offsets"
META_FAMILY = b"meta"
#: The group cell, the commit point every commit compares and sets.
COMMIT_COLUMN = META_FAMILY + b":commit"


def encode_group_doc(seq: int, offsets: Mapping[TopicPartition, int], batch_ms: int | None,
                     ranges: tuple[OffsetRange, ...], committed_at_ms: int | None,
                     rows: Mapping[str, Mapping[int, int]], losses: list[dict[str, Any]],
                     reset: dict[str, Any] | None = None) -> bytes:
    """Return the group cell (``meta:commit``) holding these offsets, last batch and data losses."""
    by_topic: dict[str, dict[str, int]] = {}
    for tp, off in sorted(offsets.items()):
        by_topic.setdefault(tp.topic, {})[str(tp.partition)] = off
    doc = {"seq": seq, "offsets": by_topic, "batch_ms": batch_ms,
           "ranges": json.loads(offset_ranges_to_json(ranges)), "committed_at_ms": committed_at_ms,
           "rows": {t: {str(p): o for p, o in sorted(parts.items())} for t, parts in sorted(rows.items())},
           "losses": losses, "layout": LAYOUT_VERSION, **({"reset": reset} if reset is not None else {})}
    return json.dumps(doc, separators=(",", ":")).encode()


class HBaseRows:
    """Reads, checks and writes the rows of one offsets table (see the module docstring).

    Every method takes the happybase table to use, so the caller keeps the connection, its
    errors and its lock; ``table_name`` and ``address`` only name the table in errors.
    """

    def __init__(self, table_name: str, address: str) -> None:
        self.table_name, self.address = table_name, address

    def corrupt(self, row: bytes, problem: str) -> CorruptCheckpointError:
        """Return the error for a row of ``table_name`` that is not of this layout."""
        return CorruptCheckpointError(
            f"HBase table {self.table_name!r} at {self.address}, row {row!r}: {problem}. The row was written "
            "by hand or by another tool; nothing was committed and no offset was reset. Fix or remove the row.")

    # -- the group cell -----------------------------------------------------------------------
    def read_group(self, table: Any, group_id: str) -> tuple[bytes | None, dict[str, Any] | None]:
        """Return the raw ``meta:commit`` cell of the group and its parsed document."""
        row = group_row_key(group_id)
        raw = table.row(row, columns=[COMMIT_COLUMN]).get(COMMIT_COLUMN)
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
            raise self.corrupt(row, f"meta:commit is not a dstream_kafka commit document ({exc})") from None
        return raw, doc

    # -- the guide's offsets rows -------------------------------------------------------------
    def parse_offsets_row(self, key: bytes, data: Mapping[bytes, bytes], topic: str,
                          group_id: str) -> dict[TopicPartition, int]:
        try:
            found_topic, found_group, _ = parse_offsets_row_key(key)
        except ValueError as exc:
            raise self.corrupt(key, f"the row key is not <topic>:<group>:<13-digit batchTimeMillis> ({exc})") from None
        if (found_topic, found_group) != (topic, group_id):
            raise self.corrupt(key, f"the row key names topic {found_topic!r} and group {found_group!r}")
        result = {}
        for column, value in data.items():
            family, _, qualifier = column.partition(b":")
            if family != OFFSETS_FAMILY:
                continue
            if not qualifier.isdigit():
                raise self.corrupt(key, f"column {column!r} is not offsets:<partition number>")
            text = value.decode("ascii", "replace").strip()
            if not text.isdigit():
                raise self.corrupt(key, f"column {column!r} holds {value[:40]!r}, not an offset (ASCII decimal)")
            result[TopicPartition(topic, int(qualifier))] = int(text)
        return result

    def newest_offsets_row(self, table: Any, topic: str,
                           group_id: str) -> tuple[int, dict[TopicPartition, int]] | None:
        """Return (batch time, offsets) of the newest offsets row of ``(topic, group)``, read
        with a reversed scan bounded to its prefix; None when the topic has no row."""
        prefix = offsets_row_prefix(topic, group_id)
        # A reversed scan starts at row_start and stops before row_stop; happybase's
        # row_prefix + reverse returns the wrong row, so the bounds are explicit.
        for key, data in table.scan(row_start=prefix + b"\xff", row_stop=prefix, reverse=True, limit=1,
                                    columns=[OFFSETS_FAMILY]):
            offsets = self.parse_offsets_row(key, data, topic, group_id)  # checks the key first
            return int(key[-MS_DIGITS:]), offsets
        return None

    def check_guide_rows(self, table: Any, group_id: str, doc: Mapping[str, Any],
                         topics: Collection[str] | None) -> None:
        """Refuse offsets rows that the group cell does not account for (written by hand or by
        another tool after this store committed), instead of silently ignoring them."""
        last = doc["batch_ms"]
        if last is None:
            return
        names = sorted({tp.topic for tp in doc["_offsets"]} if topics is None else set(topics))
        for topic in names:
            found = self.newest_offsets_row(table, topic, group_id)
            if found is None:
                continue
            ms, offsets = found
            expected = doc["rows"].get(topic)
            changed = ms == last and expected is not None and offsets != {
                TopicPartition(topic, int(p)): o for p, o in expected.items()}
            if ms > last or changed:
                raise self.corrupt(
                    offsets_row_key(topic, group_id, ms),
                    f"this offsets row {'is newer than' if ms > last else 'differs from'} the last batch "
                    f"({last}) committed in {group_row_key(group_id)!r} meta:commit, which holds the "
                    "group's offsets. Remove the row, or change offsets with the offsets CLI")

    def check_chain(self, table: Any, group_id: str, doc: Mapping[str, Any]) -> None:
        """Refuse a group cell whose offsets are not where its last batch left them, or whose
        last batch does not continue the history row before it (both moved over the data
        losses the cell records): a cell edited by hand would skip records silently.

        Raises
        ------
        CorruptCheckpointError
            Naming the table, the row, the group, the partition and both offsets.
        """
        last = doc["batch_ms"]
        if last is None:
            return

        def moved(offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
            for loss in doc["losses"]:  # oldest first, so chained losses apply in turn
                tp = TopicPartition(str(loss["topic"]), int(loss["partition"]))
                if offsets.get(tp) == int(loss["lost_from"]):
                    offsets[tp] = int(loss["lost_until"])
            return offsets

        ranges: tuple[OffsetRange, ...] = doc["_ranges"]
        offsets = doc["_offsets"]
        problems = [f"topic {tp.topic} partition {tp.partition}: the cell stores offset {offsets.get(tp)}, but its "
                    f"last batch ({last}) and the data losses after it give {end}"
                    for tp, end in sorted(moved({r.topicPartition(): r.untilOffset for r in ranges}).items())
                    if offsets.get(tp) != end]
        start = batch_row_key(group_id, last)  # a reversed scan's start is inclusive: skip it
        for key, data in table.scan(row_start=start, row_stop=batch_row_prefix(group_id), reverse=True, limit=2):
            if key != start and not problems:
                before = self.history_row(group_id, key, data)
                problems = chain_breaks(moved(before.offsets()), ranges, None, reset=doc.get("reset") is not None,
                                        previous=f"the batch before it ({before.batch_time_ms})")
                break
        if problems:
            raise self.corrupt(group_row_key(group_id), f"group {group_id!r}: " + "; ".join(problems) + ". Records "
                               "between the two offsets would be skipped with no data loss recorded; inspect the "
                               f"commits with `dstream-kafka offsets history --group {group_id}`, restore the cell, "
                               "and move offsets with `dstream-kafka offsets reset`, which records the move")

    def guide_topics(self, table: Any, group_id: str) -> list[str]:
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

    def write_derived(self, table: Any, group_id: str, doc: Mapping[str, Any]) -> None:
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

    def history_row(self, group_id: str, key: bytes, data: Mapping[bytes, bytes]) -> CommitRecord:
        """Return the commit a history row of the group holds."""
        try:
            ms = int(key[len(batch_row_prefix(group_id)):].decode())
            ranges = tuple(offset_ranges_from_json(data[OFFSETS_FAMILY + b":ranges"].decode(), "ranges"))
            at = int(data[OFFSETS_FAMILY + b":committed_at_ms"])
            reset_cell = data.get(OFFSETS_FAMILY + b":reset")
            reset = ResetAudit.from_doc(None if reset_cell is None else json.loads(reset_cell))
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise self.corrupt(key, f"not a dstream_kafka history row ({exc})") from None
        return CommitRecord(ms, ranges, utc_from_ms(at), reset)

    def load_guide_rows(self, table: Any, group_id: str,
                        topics: Collection[str] | None) -> dict[TopicPartition, int]:
        """Return the offsets of the newest offsets row of each topic (all the group's topics
        when ``topics`` is None): how a group without a group cell is read."""
        names = self.guide_topics(table, group_id) if topics is None else sorted(topics)
        result: dict[TopicPartition, int] = {}
        for topic in names:
            found = self.newest_offsets_row(table, topic, group_id)
            if found is not None:
                result.update(found[1])
        return result
