"""A Spark Structured Streaming checkpoint folder read (and reset) as an offset store.

Layout (Spark's ``HDFSMetadataLog``; see ``structured-streaming-kafka.md`` of the reference)::

    <dir>/offsets/<batchId>   v1 / {"batchWatermarkMs","batchTimestampMs","conf"} / one line per
                              source: the Kafka source's {"topic":{"partition":offset}} (the end
                              offsets of batch <batchId>), or "-"
    <dir>/commits/<batchId>   v1 / {"nextBatchWatermarkMs":...}: batch <batchId> finished
    <dir>/dstream_kafka/resets/<batchId>   the audit of a reset written by this module

A restarted query resumes after the newest committed batch: at the offsets in
``offsets/<newest committed>``. :meth:`StructuredStreamingCheckpoint.load` returns those; a
newest ``offsets/`` batch without its commit is :meth:`pending` (the query re-runs it on
restart), and a reset is then refused. A reset writes the next batch id to ``offsets/`` (the
newest entry with the reset partitions changed, the metadata line kept) and to ``commits/``
(a copy of the newest commit), each to a temporary file renamed into place without
overwriting, so the query restarts from the new offsets and a query writing the same id at
the same time makes one of the two fail. A checkpoint holds one query, not a consumer group:
the ``group`` argument of every method is only a label. Only queries with one source, a Kafka
source, are supported; other checkpoints are refused with the reason.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
from collections.abc import Collection, Mapping
from typing import Any

from dstream_kafka.errors import ConfigurationError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.offsets_json import partition_offsets_from_json, partition_offsets_to_json
from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, PlannedBatch, ResetAudit

__all__ = ["StructuredStreamingCheckpoint"]


class StructuredStreamingCheckpoint(OffsetStore):
    """The offsets of a Structured Streaming query's checkpoint folder (a local path).

    Parameters
    ----------
    path : str or os.PathLike
        The query's ``checkpointLocation``; it must hold ``offsets/``.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        super().__init__()
        self.path = os.fspath(path)

    def __repr__(self) -> str:
        return f"StructuredStreamingCheckpoint({self.path!r})"

    # -- files --------------------------------------------------------------------------------
    def _ids(self, folder: str) -> list[int]:
        where = os.path.join(self.path, folder)
        if folder == "offsets" and not os.path.isdir(where):
            what = "does not exist" if not os.path.exists(self.path) else "holds no offsets/ folder"
            raise ConfigurationError(
                f"No such offset store: {self.path} {what}, so it is not a Structured Streaming checkpoint. Check "
                "the path in the store URI: give the query's checkpointLocation; nothing was created.")
        try:
            return sorted(int(n) for n in os.listdir(where) if n.isdigit())
        except FileNotFoundError:
            return []

    def _read(self, folder: str, batch: int) -> list[str]:
        path = os.path.join(self.path, folder, str(batch))
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
        version = lines[0]
        if not (version.startswith("v") and version[1:].isdigit()):
            raise OffsetStoreError(f"{path} is not a Structured Streaming log entry (first line {version[:20]!r})")
        if int(version[1:]) > 1 and folder == "offsets":
            raise OffsetStoreError(
                f"{path} is in offsets log format {version}, newer than the v1 this version of dstream_kafka "
                "reads; upgrade dstream_kafka")
        return lines

    def _offsets_entry(self, batch: int) -> tuple[str, dict[TopicPartition, int]]:
        """Return (metadata line, Kafka offsets) of ``offsets/<batch>``."""
        path = os.path.join(self.path, "offsets", str(batch))
        lines = [line for line in self._read("offsets", batch) if line.strip()]
        sources = lines[2:]
        if len(lines) < 3 or len(sources) != 1:
            raise OffsetStoreError(
                f"{path} holds {len(sources)} sources; only a query with one Kafka source can be read")
        if sources[0].strip() == "-":
            return lines[1], {}
        return lines[1], partition_offsets_from_json(sources[0], path, allowed_sentinels=())

    def _committed_batch(self) -> int | None:
        committed = set(self._ids("commits"))
        done = [b for b in self._ids("offsets") if b in committed]
        return done[-1] if done else None

    def _write_new(self, folder: str, batch: int, text: str) -> None:
        target = os.path.join(self.path, folder, str(batch))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        temp = os.path.join(os.path.dirname(target), f".{batch}.{uuid.uuid4().hex}.tmp")
        with open(temp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(temp, target)  # fails if the file exists: never overwrite a query's entry
        except FileExistsError:
            raise OffsetStoreError(
                f"{target} appeared while the reset was written: the query is running; stop it and reset "
                "again") from None
        finally:
            os.unlink(temp)

    # -- contract -----------------------------------------------------------------------------
    def _load(self, group_id: str, topics: Collection[str] | None) -> Mapping[TopicPartition, int]:
        with self._lock:
            batch = self._committed_batch()
            return {} if batch is None else self._offsets_entry(batch)[1]

    def _pending(self, group_id: str) -> PlannedBatch | None:
        with self._lock:
            planned, committed = self._ids("offsets"), self._committed_batch()
            if planned and (committed is None or planned[-1] > committed):
                return PlannedBatch(planned[-1], ())
            return None

    def _commit(self, group_id: str, batch_time_ms: int, merged: tuple[OffsetRange, ...]) -> bool:
        audit = self._reset_audit
        if audit is None:
            raise OffsetStoreError(
                "--store: a Structured Streaming checkpoint takes no commits; move its offsets with "
                "`dstream-kafka offsets reset` (e.g. --from-file), which writes the query's next batch")
        with self._lock:
            batch = self._committed_batch()
            if batch is None:
                raise OffsetStoreError(f"--store: {self.path} has no committed batch to reset from; run the "
                                       "query once first")
            meta_line, stored = self._offsets_entry(batch)
            where = f"Structured Streaming checkpoint {self.path}"
            self._admit_commit(group_id, batch_time_ms, merged, None, lambda: stored, holder=where,
                               place=where, reset=audit)
            offsets = {**stored, **{r.topicPartition(): r.untilOffset for r in merged}}
            meta = json.loads(meta_line)
            meta["batchTimestampMs"] = batch_time_ms
            commit = self._read("commits", batch)
            new = batch + 1
            # The audit first: a reset entry without its audit would show as a batch in history.
            self._write_new("dstream_kafka/resets", new, json.dumps(audit.doc()))
            self._write_new("offsets", new, "\n".join(
                [self._read("offsets", batch)[0], json.dumps(meta, separators=(",", ":")),
                 partition_offsets_to_json(offsets)]))
            self._write_new("commits", new, "\n".join(commit))
        return True

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        with self._lock:
            committed = set(self._ids("commits"))
            batches = [b for b in self._ids("offsets") if b in committed]
            records = []
            for batch in reversed(batches[-max(0, limit):] if limit > 0 else []):
                meta, until = self._offsets_entry(batch)
                since = self._offsets_entry(batch - 1)[1] if batch - 1 in batches else self._initial(batch)
                audit = self._audit(batch)
                ranges = tuple(OffsetRange(tp.topic, tp.partition, until[tp] if audit else since.get(tp, until[tp]),
                                           until[tp]) for tp in sorted(until)
                               if audit is None or tp in audit.previous)
                at = os.path.getmtime(os.path.join(self.path, "commits", str(batch)))
                records.append(CommitRecord(int(json.loads(meta).get("batchTimestampMs", 0)), ranges,
                                            _dt.datetime.fromtimestamp(at, _dt.timezone.utc), audit))
            return records

    def _initial(self, batch: int) -> dict[TopicPartition, int]:
        """The Kafka source's starting offsets (``sources/0/0``) for batch 0; ``{}`` otherwise."""
        path = os.path.join(self.path, "sources", "0", "0")
        if batch != 0 or not os.path.isfile(path):
            return {}
        with open(path, "rb") as fh:
            text = fh.read().lstrip(b"\x00").decode("utf-8", "replace")  # 0x00, "v1", the JSON
        try:
            return partition_offsets_from_json(text.split("\n")[-1], path, allowed_sentinels=())
        except Exception:  # only shown in history: a source file of another form is not an error
            return {}

    def _audit(self, batch: int) -> ResetAudit | None:
        path = os.path.join(self.path, "dstream_kafka", "resets", str(batch))
        try:
            with open(path, encoding="utf-8") as fh:
                return ResetAudit.from_doc(json.load(fh))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError) as exc:
            raise OffsetStoreError(f"{path} is not a reset audit ({exc}); restore or remove it") from None

    def _record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                          batch_time_ms: int | None) -> None:
        raise OffsetStoreError("a Structured Streaming checkpoint records no data loss of a dstream_kafka stream")

    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        return []
