"""Seeing committed offsets: what ``dstream-kafka offsets describe`` shows, as a Python API.

:func:`describe` joins a store's committed offsets with the broker's log start and log end
offsets, like Kafka's ``kafka-consumer-groups --describe`` (plus the log start offset, the time
of the last committed batch and a mark where data was already lost).
:func:`format_rows` renders rows as a table (rich on a terminal, plain text otherwise), JSON or
CSV. :func:`export_offsets` and :func:`import_offsets` move a group's offsets between stores
in Structured Streaming's offsets JSON (``{"topic":{"0":23}}``).
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.operate.broker import (OffsetsBroker, bound_note, brokers_for, check_named_partitions,
                                          check_topic_name)
from dstream_kafka.operate.common import opened_store, render_table
from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.records import CommitRecord

__all__ = ["COLUMNS", "OffsetRow", "describe", "export_offsets", "format_history", "format_rows", "history",
           "import_offsets"]

#: The table's columns, in order.
COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-START-OFFSET", "LOG-END-OFFSET",
           "LAG", "LAG-SECONDS", "LAST-BATCH-TIME", "DATA-LOST")


@dataclass(frozen=True)
class OffsetRow:
    """One partition of a group as :func:`describe` sees it.

    Attributes
    ----------
    group, topic : str
    partition : int
    current_offset : int
        The committed next offset to read.
    log_start_offset, log_end_offset : int or None
        The broker's first and next offset of the partition (None when it is gone).
    lag : int or None
        ``log_end_offset - current_offset``; None when the partition is gone or the committed
        offset is past the log end (see ``note``), where no lag can be told.
    last_batch_time_ms : int or None
        Batch time of the newest committed batch that read the partition (None when the
        store keeps no history of it).
    data_lost : int
        Records already deleted by retention before the stream read them:
        ``log_start_offset - current_offset`` when positive, else 0.
    gone : str
        ``""``, or why the broker no longer has the partition the store holds: ``"topic
        deleted"`` or ``"partition deleted"`` (the topic was recreated with fewer).
    lag_seconds : float or None
        Age of the oldest unread record: now minus the timestamp of the record at the
        committed offset (at the log start when records were lost), read from the log; 0 with
        no lag; None when it could not be read in time, the partition is gone or the committed
        offset is past the log end. Under ``CreateTime`` the timestamp is the producer's clock.
    note : str
        ``""``, or what is wrong and the command that fixes it: a committed offset past the
        log end (the topic was recreated or truncated since the stream committed), where
        a stream refuses to start (offsets the log never had cannot be resumed from).
    """

    group: str
    topic: str
    partition: int
    current_offset: int
    log_start_offset: int | None
    log_end_offset: int | None
    lag: int | None
    last_batch_time_ms: int | None
    data_lost: int
    gone: str = ""
    lag_seconds: float | None = None
    note: str = ""

    @property
    def past_log_end(self) -> bool:
        """Whether the committed offset is past the partition's log end."""
        return self.log_end_offset is not None and self.current_offset > self.log_end_offset

    def last_batch_time(self) -> str:
        """Return the last batch's time as ISO 8601 UTC, or ``"-"``."""
        if self.last_batch_time_ms is None:
            return "-"
        t = _dt.datetime.fromtimestamp(self.last_batch_time_ms / 1000, _dt.timezone.utc)
        return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def jsonValue(self) -> dict[str, Any]:
        """The row under camelCase keys, the casing of the progress JSON (Structured
        Streaming's): ``currentOffset``, ``logStartOffset``, ``logEndOffset``, ``lag``,
        ``lagSeconds``, ``lastBatchTimeMs``, ``lastBatchTime`` (ISO 8601), ``dataLost``,
        ``gone``, ``note``."""
        return {"group": self.group, "topic": self.topic, "partition": self.partition,
                "currentOffset": self.current_offset, "logStartOffset": self.log_start_offset,
                "logEndOffset": self.log_end_offset, "lag": self.lag,
                "lagSeconds": self.lag_seconds, "lastBatchTimeMs": self.last_batch_time_ms,
                "lastBatchTime": self.last_batch_time(), "dataLost": self.data_lost,
                "gone": self.gone, "note": self.note}

    def cells(self) -> tuple[str, ...]:
        """Return the row's cells in :data:`COLUMNS` order (``-`` for offsets of a gone partition,
        whose DATA-LOST cell says ``TOPIC DELETED`` or ``PARTITION DELETED``; ``-`` for the lag of
        a committed offset past the log end, marked ``PAST LOG END``)."""
        mark = (self.gone.upper() if self.gone else f"LOST {self.data_lost}" if self.data_lost
                else "PAST LOG END" if self.past_log_end else "")
        seconds = "-" if self.lag_seconds is None else f"{self.lag_seconds:.1f}"
        return (self.group, self.topic, str(self.partition), str(self.current_offset),
                *("-" if v is None else str(v) for v in (self.log_start_offset, self.log_end_offset, self.lag)),
                seconds, self.last_batch_time(), mark)


def describe(store: OffsetStore | str, group: str, *, bootstrap_servers: str | None = None,
             topic: str | None = None, timeout: float = 10.0) -> list[OffsetRow]:
    """Return the committed offsets of ``group`` with the broker's offsets and the lag.

    Parameters
    ----------
    store : OffsetStore or str
        A store or a store URI (:mod:`dstream_kafka.stores.uri`); a store opened from a URI is
        closed before returning.
    group : str
        The consumer group (the stream's ``group.id``).
    bootstrap_servers : str, optional
        The brokers to ask for log offsets; defaults to the hosts of a ``kafka://`` store URI.
    topic : str, optional
        Only this topic.
    timeout : float
        Seconds to wait for the store and the broker.

    Returns
    -------
    list of OffsetRow
        Sorted by topic and partition. A partition the broker no longer has (its topic was
        deleted) is a row with ``gone`` set and no log offsets; a committed offset past the log
        end (the topic was recreated or truncated) has no lag and a ``note`` naming the reset
        that fixes it; the others are shown as usual.

    Raises
    ------
    ConfigurationError
        No brokers to ask; no such store (a store URI is opened for reading: nothing is
        created); an unknown group (nothing committed) or topic.
    """
    bootstrap_servers = brokers_for(store, bootstrap_servers)
    if isinstance(store, str):
        opened, _ = opened_store(store, timeout)
        try:
            return _describe(opened, store, group, bootstrap_servers, topic, timeout)
        finally:
            opened.close()
    return _describe(store, None, group, bootstrap_servers, topic, timeout)


def _describe(store: OffsetStore, store_uri: str | None, group: str, bootstrap_servers: str,
              topic: str | None, timeout: float) -> list[OffsetRow]:
    committed = store.load(group, None if topic is None else [topic])
    if not committed:
        what = f"topic {topic!r} of group {group!r}" if topic else f"group {group!r}"
        raise ConfigurationError(
            f"--group/--topic: the store holds no committed offsets for {what}; check the names "
            "(a stream commits after its first batch)")
    last: dict[TopicPartition, int] = {}
    for record in store.history(group, limit=1000):  # newest first
        for r in record.ranges:
            last.setdefault(r.topicPartition(), record.batch_time_ms)
    with OffsetsBroker(bootstrap_servers, timeout) as broker:
        gone = broker.existing(committed)
        start, end = broker.log_offsets([tp for tp in committed if not gone[tp]])
    unread = {tp: max(current, start[tp]) for tp, current in committed.items()
              if not gone[tp] and end[tp] > max(current, start[tp])}
    ages = _oldest_unread_ages(bootstrap_servers, unread, timeout)
    rows = []
    for tp, current in sorted(committed.items()):
        if gone[tp]:
            rows.append(OffsetRow(group, tp.topic, tp.partition, current, None, None, None, last.get(tp), 0,
                                  gone[tp]))
            continue
        if current > end[tp]:
            # Not a healthy lag of 0: the log was recreated or truncated under the stream.
            rows.append(OffsetRow(group, tp.topic, tp.partition, current, start[tp], end[tp], None,
                                  last.get(tp), 0, note=_past_end_note(store_uri, group, tp, current, end[tp])))
            continue
        rows.append(OffsetRow(group, tp.topic, tp.partition, current, start[tp], end[tp],
                              end[tp] - current, last.get(tp),
                              max(start[tp] - current, 0),
                              lag_seconds=ages.get(tp) if tp in unread else 0.0))
    return rows


def _past_end_note(store_uri: str | None, group: str, tp: TopicPartition, current: int, end: int) -> str:
    store = store_uri if store_uri is not None else "URI"
    return (f"the committed offset {current} is past the log end {end}: the topic may have been recreated or "
            "truncated, and a stream refuses to start from it (DataLossError). Move it with "
            f"`dstream-kafka offsets reset --store {store} --group {group} --topic {tp.topic}:{tp.partition} "
            "--to-earliest` (a recreated topic, read from its start; --to-latest skips its records), a dry run "
            "until --execute")


def _oldest_unread_ages(servers: str, positions: dict[TopicPartition, int],
                        timeout: float) -> dict[TopicPartition, float]:
    """Seconds since the timestamp of the record at each of ``positions`` (one fetch per
    partition, all within ``timeout``); a partition whose record did not come is left out."""
    if not positions:
        return {}
    import time

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    ms = int(timeout * 1000)
    consumer = KafkaConsumer(bootstrap_servers=servers, enable_auto_commit=False, group_id=None,
                             request_timeout_ms=max(ms, 1000), max_poll_records=500,
                             fetch_max_wait_ms=100, max_partition_fetch_bytes=65536)
    found: dict[TopicPartition, float] = {}
    try:
        consumer.assign([KafkaTopicPartition(*tp) for tp in positions])
        for tp, offset in positions.items():
            consumer.seek(KafkaTopicPartition(*tp), offset)
        deadline = time.monotonic() + timeout
        while len(found) < len(positions) and time.monotonic() < deadline:
            for ktp, records in consumer.poll(timeout_ms=200).items():
                tp = TopicPartition(ktp.topic, ktp.partition)
                if tp not in found and records:
                    found[tp] = max(time.time() - records[0].timestamp / 1000.0, 0.0)
                    consumer.pause(ktp)  # one record is enough
    finally:
        consumer.close(autocommit=False)
    return {tp: round(age, 3) for tp, age in found.items()}


def format_rows(rows: Sequence[OffsetRow], fmt: str = "table", *, terminal: bool = False) -> str:
    """Render rows of :func:`describe` with a total line.

    Parameters
    ----------
    rows : sequence of OffsetRow
    fmt : {"table", "json", "csv"}
        ``table``: aligned columns (a rich table when ``terminal``), rows with data lost
        marked ``LOST n`` (partitions gone from the cluster ``TOPIC DELETED``, a committed
        offset past the log end ``PAST LOG END`` with lag ``-``), then a ``TOTAL`` line of lag
        and lost records, then a ``NOTE`` line per row with a note (what is wrong, the command
        that fixes it). ``json``: a list of objects (:meth:`OffsetRow.jsonValue`, camelCase
        keys; a gone partition has ``null`` log offsets and lag, and ``gone`` says why; a
        committed offset past the log end has ``null`` lag and a ``note``).
        ``csv``: a header of :data:`COLUMNS` and one line per row (no total).
    terminal : bool
        Draw a rich table (colours, borders) instead of plain text.

    Returns
    -------
    str
    """
    if fmt == "json":
        return json.dumps([r.jsonValue() for r in rows], indent=2)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows(r.cells() for r in rows)
        return out.getvalue().rstrip("\n")
    if fmt != "table":
        raise ConfigurationError(f"--format must be table, json or csv, got {fmt!r}")
    lag = sum(r.lag or 0 for r in rows)
    lost = sum(r.data_lost for r in rows)
    gone = sum(1 for r in rows if r.gone)
    past = [r for r in rows if r.past_log_end]
    total = (f"TOTAL: {len(rows)} partitions, lag {lag}"
             + (f", {lost} records LOST (committed offset below the log start)" if lost else "")
             + (f", {gone} GONE from the cluster (topic deleted; not in the lag)" if gone else "")
             + (f", {len(past)} PAST the LOG END (committed offset beyond it; not in the lag)" if past else ""))
    rendered = render_table(COLUMNS, [(r.cells(), bool(r.data_lost or r.gone or r.note)) for r in rows],
                            terminal=terminal)
    notes = "".join(f"\nNOTE {r.topic}-{r.partition}: {r.note}" for r in rows if r.note)
    return rendered + "\n" + total + notes


def export_offsets(store: OffsetStore | str, group: str, *, topic: str | None = None,
                   timeout: float = 10.0) -> str:
    """Return the committed offsets of ``group`` as Structured Streaming's offsets JSON.

    Parameters
    ----------
    store : OffsetStore or str
        A store or a store URI (a store opened from a URI is closed before returning).
    group : str
        The consumer group.
    topic : str, optional
        Only this topic.
    timeout : float
        Seconds to wait for the store.

    Returns
    -------
    str
        ``{"topic":{"partition":offset}}``, sorted; the next offset to read per partition.

    Raises
    ------
    ConfigurationError
        If the store holds no offsets for the group (or topic).
    """
    from dstream_kafka.offsets_json import partition_offsets_to_json

    opened, owned = opened_store(store, timeout)
    try:
        committed = opened.load(group, None if topic is None else [topic])
    finally:
        if owned:
            opened.close()
    if not committed:
        what = f"topic {topic!r} of group {group!r}" if topic else f"group {group!r}"
        raise ConfigurationError(
            f"--group/--topic: the store holds no committed offsets for {what}; check the names")
    return partition_offsets_to_json(committed)


def import_offsets(store: OffsetStore | str, group: str, offsets_json: str, *,
                   bootstrap_servers: str | None = None, batch_time_ms: int | None = None,
                   timeout: float = 10.0) -> CommitRecord:
    """Write offsets given as Structured Streaming's offsets JSON as one new commit of ``group``.

    The import is an ordinary commit through the store's API, so it is atomic, it appears in
    :meth:`~dstream_kafka.stores.base.OffsetStore.history` (batch time = the import time) and
    earlier commits stay untouched. Each range runs from the stored offset to the imported
    one; a partition the store does not hold yet starts at the imported offset.

    Before the store is opened (a store URI that names no store yet is created, so an import
    can seed a new store), the offsets are checked against the broker as
    :func:`~dstream_kafka.operate.reset.reset` checks a ``--from-file``: topic names Kafka
    accepts, topics and partitions that exist, and offsets within ``[log start, log end]``
    (refused, not clamped: an import writes at once, without a dry run).

    Parameters
    ----------
    store : OffsetStore or str
        The target store or its URI.
    group : str
        The consumer group.
    offsets_json : str
        ``{"topic":{"partition":offset}}`` with concrete offsets (no -1/-2).
    bootstrap_servers : str, optional
        The brokers of the topics; default the hosts of a ``kafka://`` store URI.
    batch_time_ms : int, optional
        The commit's batch time; default now. Must be later than the group's newest commit.
    timeout : float
        Seconds to wait for the store and the broker.

    Returns
    -------
    CommitRecord
        The commit written.

    Raises
    ------
    OffsetsJsonError
        If the text is not offsets JSON (nothing is written).
    ConfigurationError
        If no brokers are named, a topic name is not one Kafka accepts, a topic or partition
        does not exist, an offset lies outside its partition's log, an offset is below the stored one (moving back is a reset, not an import), or a
        stream holds the group, as for a reset: members in the Kafka group (a subscribed
        driver) or a planned batch not committed yet. Nothing is written.
    OffsetFencedError
        If a stream committed between the read and the write (the store's fencing).
    """
    import time

    from dstream_kafka.offsets import OffsetRange
    from dstream_kafka.offsets_json import partition_offsets_from_json

    wanted = partition_offsets_from_json(offsets_json, "--file", allowed_sentinels=())
    if not wanted:
        raise ConfigurationError('--file: the offsets JSON names no partition; expected e.g. {"topic":{"0":23}}')
    servers = brokers_for(store, bootstrap_servers)
    for tp in wanted:
        check_topic_name(tp.topic, "--file")
    with OffsetsBroker(servers, timeout) as broker:
        check_named_partitions(broker, wanted, "--file")
        low, high = broker.log_offsets(sorted(wanted))
        outside = [f"{tp.topic}-{tp.partition} {bound_note(o, low[tp], high[tp])} (the log holds "
                   f"[{low[tp]}, {high[tp]}])" for tp, o in sorted(wanted.items()) if bound_note(o, low[tp], high[tp])]
        if outside:
            raise ConfigurationError(
                f"--file: {'; '.join(outside)}; an import stores only offsets within [log start, log end]: fix the "
                "file, or use `dstream-kafka offsets reset --from-file FILE`, which clamps into the log. Nothing "
                "was written.")
        opened, owned = opened_store(store, timeout, create=True)
        try:
            pending = opened.pending(group)
            if pending is not None:
                raise ConfigurationError(
                    f"--store: a stream holds group {group!r}: batch {pending.batch_time_ms} is planned but "
                    "not committed; stop the stream (or let it finish the batch) and import again")
            stored = opened.load(group)
            ranges = []
            for tp, offset in sorted(wanted.items()):
                start = stored.get(tp, offset)
                if offset < start:
                    raise ConfigurationError(
                        f"--file: {tp.topic}-{tp.partition} would move back from {start} to {offset}; an "
                        "import only adds partitions or moves offsets forward (moving back is a reset)")
                ranges.append(OffsetRange(tp.topic, tp.partition, start, offset))
            newest = opened.history(group, limit=1)
            t = int(time.time() * 1000) if batch_time_ms is None else batch_time_ms
            if newest and t <= newest[0].batch_time_ms:
                t = newest[0].batch_time_ms + 1
            # As reset does: a stream subscribed to the group would be fenced by the import.
            broker.check_no_members(group, "import")
            opened.commit(group, t, ranges)
            written = opened.history(group, limit=1)
            return written[0] if written else CommitRecord(t, tuple(ranges), _dt.datetime.now(_dt.timezone.utc))
        finally:
            if owned:
                opened.close()


def history(store: OffsetStore | str, group: str, *, limit: int = 20,
            timeout: float = 10.0) -> list[CommitRecord]:
    """Return up to ``limit`` committed batches of ``group``, newest first.

    Imports (:func:`import_offsets`) are commits too and appear here. The Kafka group store
    keeps only the newest batch.

    Raises
    ------
    ConfigurationError
        If ``limit`` is not >= 1, or the store holds no commit of the group.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigurationError(f"--limit must be a whole number >= 1, got {limit!r}")
    opened, owned = opened_store(store, timeout)
    try:
        records = opened.history(group, limit)
    finally:
        if owned:
            opened.close()
    if not records:
        raise ConfigurationError(
            f"--group: the store holds no committed batch of group {group!r}; check the name "
            "(a stream commits after its first batch)")
    return records


def format_history(records: Sequence[CommitRecord], fmt: str = "table", *,
                   terminal: bool = False) -> str:
    """Render :func:`history` as a table (BATCH-TIME COMMITTED-AT RECORDS RANGES) or JSON.

    Ranges are ``topic-partition:[from,until)``; RECORDS is the sum of their lengths.
    """
    def iso(t: _dt.datetime) -> str:
        return t.astimezone(_dt.timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def batch(ms: int) -> str:
        return iso(_dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc))

    if fmt == "json":
        # camelCase keys, as the progress JSON and describe's JSON
        return json.dumps([{"batchTimeMs": r.batch_time_ms, "batchTime": batch(r.batch_time_ms),
                            "committedAt": iso(r.committed_at),
                            "records": sum(x.count() for x in r.ranges),
                            "reset": None if r.reset is None else r.reset.doc(),
                            "ranges": [{"topic": x.topic, "partition": x.partition,
                                        "fromOffset": x.fromOffset, "untilOffset": x.untilOffset}
                                       for x in r.ranges]} for r in records], indent=2)
    if fmt != "table":
        raise ConfigurationError(f"--format must be table or json, got {fmt!r}")
    return render_table(("BATCH-TIME", "COMMITTED-AT", "RECORDS", "RANGES"),
                        [((batch(r.batch_time_ms), iso(r.committed_at), str(sum(x.count() for x in r.ranges)),
                           _ranges_text(r)), r.reset is not None) for r in records], terminal=terminal)


def _ranges_text(record: CommitRecord) -> str:
    """``topic-partition:[from,until)`` per range; a reset shows ``RESET by user@host`` and
    ``topic-partition: old -> new`` instead."""
    if record.reset is None:
        return " ".join(f"{x.topic}-{x.partition}:[{x.fromOffset},{x.untilOffset})" for x in record.ranges)
    moves = " ".join(f"{x.topic}-{x.partition}: {record.reset.previous.get(x.topicPartition(), '-')} -> "
                     f"{x.untilOffset}" for x in record.ranges)
    return f"RESET by {record.reset.user}@{record.reset.host}: {moves}"
