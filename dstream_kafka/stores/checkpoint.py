"""Offsets in a checkpoint directory: a write-ahead offsets log and a commit log.

Layout (the idea of Structured Streaming's ``HDFSMetadataLog``; ``metadata`` and ``state/`` of
the same directory belong to the streaming checkpoint and are never touched here)::

    <dir>/offsets/<batch_time_ms>      written by plan() before the batch's jobs run
    <dir>/commits/<batch_time_ms>      written by commit() after the batch's output
    <dir>/commits/<batch_time_ms>.next claim: which batch commits after that one
    <dir>/commits/start.next           claim of the first commit
    <dir>/data_loss/<after>-<recorded_at_ms>-<id>   one data-loss record each

Every file is a version line ``v1`` followed by one JSON document
(:mod:`~dstream_kafka.stores.checkpoint_format`), and is written to a temporary file and renamed
(never overwritten), so a reader sees a complete file or none.

* ``offsets/<t>``: ``{"group_id", "batch_time_ms", "ranges": [{"topic", "partition",
  "fromOffset", "untilOffset"}...], "planned_at_ms", "after_commit_ms"}``; ``after_commit_ms``
  is the newest commit when the batch was planned (null before the first), so commit files
  deleted by hand are detected (files of older versions lack it and are not checked). One
  written by a commit that was not planned (an import, a reset) also says ``"by_commit": true``:
  it is never taken for a batch to re-run.
* ``commits/<t>``: ``{"group_id", "batch_time_ms", "ranges", "offsets": {"topic": {"0": next}},
  "previous_batch_time_ms", "committed_at_ms", "planned"}``; ``offsets`` is the full committed
  state after the batch, so the newest commit file alone gives :meth:`CheckpointOffsetStore.load`.
  ``planned`` (true) says ``offsets/<t>`` exists: a commit that was not planned (an import, a
  reset, a commit through the API) writes it first. Files of 0.1.0 lack it: their imports and
  resets had no ``offsets/<t>``.
* ``commits/<p>.next``: ``{"group_id", "batch_time_ms"}``. A commit first claims the slot after
  the newest commit ``p`` by creating this file; a second driver's claim of the same slot fails,
  which fences it even when its batch times differ.

Reading the newest commit cross-checks it before anything is loaded, with the chain rule of
every store (:func:`~dstream_kafka.stores.records.chain_breaks`): its ``offsets`` are where its
own ``ranges`` end and its predecessor's (advanced over the data losses recorded after it) moved
to those ends, and, unless it is a reset, each range starts where its predecessor left the
partition. Its ranges must be those planned in ``offsets/<t>`` (empty ones too; the commit may
add empty ranges), which must exist when the commit says ``planned``. A write-ahead file planned
after a commit that is missing means commit files were deleted. Each contradiction raises
:class:`~dstream_kafka.errors.CorruptCheckpointError` naming the files, what is inconsistent and
the fix; nothing is changed. :meth:`~CheckpointOffsetStore.history` reads the commits without
these checks, so ``dstream-kafka offsets history`` shows a refused store as it is.

A restart re-runs the oldest ``offsets/<t>`` newer than the newest commit that continues the
stored offsets (:meth:`CheckpointOffsetStore.pending`) over exactly the same ranges; one that
does not (no driver could commit it, e.g. a second driver's, refused) is logged and skipped,
and a commit refused as fenced deletes its own ``offsets/<t>``. Planning it again deletes
the newer ``offsets/`` files, which the dead driver planned but never ran. The files of the
newest ``keep_batches`` committed batches are kept; older ones are deleted after a commit
(data-loss records are never deleted). A data-loss record moves the stored offset of its
partition from ``lost_from`` to ``lost_until`` until the next commit carries it on. An
unreadable file raises :class:`~dstream_kafka.errors.CorruptCheckpointError`; offsets are never
reset.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dstream_kafka.checkpoint_fs import CheckpointFileSystem, ChecksumMismatch, open_file_system
from dstream_kafka.errors import ConfigurationError, CorruptCheckpointError, OffsetFencedError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.offsets_json import partition_offsets_from_json, partition_offsets_to_json
from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.checkpoint_format import FORMAT_VERSION, corrupt, encode, parse, ranges_doc
from dstream_kafka.stores.mirror import MirrorTarget, mirror_to
from dstream_kafka.stores.records import (
    CommitRecord,
    DataLossRecord,
    PlannedBatch,
    ResetAudit,
    advance_offsets,
    chain_breaks,
    merge_ranges,
    utc_from_ms,
)

__all__ = ["CheckpointOffsetStore", "FORMAT_VERSION"]

log = logging.getLogger(__name__)

_FIRST = "start"


def _int_name(name: str) -> int | None:
    return int(name) if name.isdigit() else None


class _Commit:
    """The parsed newest commit: batch time, group and full offsets."""

    __slots__ = ("batch_time_ms", "group_id", "ranges", "offsets", "committed_at_ms", "previous", "reset",
                 "planned")

    def __init__(self, doc: Mapping[str, Any], ranges: tuple[OffsetRange, ...],
                 offsets: dict[TopicPartition, int]) -> None:
        self.batch_time_ms = int(doc["batch_time_ms"])
        self.group_id = str(doc["group_id"])
        self.ranges = ranges
        self.offsets = offsets
        self.committed_at_ms = int(doc["committed_at_ms"])
        previous = doc.get("previous_batch_time_ms")
        self.previous = None if previous is None else int(previous)
        self.reset = ResetAudit.from_doc(doc.get("reset"))
        # Every commit file that says so has a write-ahead file; those of 0.1.0 do not say so
        # (its imports and resets wrote none), and are checked without it.
        self.planned = doc.get("planned") is True


class CheckpointOffsetStore(OffsetStore):
    """Offsets in a checkpoint directory (local path or Hadoop URI), for one stream.

    Parameters
    ----------
    path : str or os.PathLike
        The checkpoint directory. A path without scheme is local; a URI (``hdfs://``,
        ``file://``, ``s3a://`` ...) goes through the Hadoop FileSystem of the active
        SparkContext (or ``spark_context``).
    keep_batches : int
        Number of committed batches whose files are kept (default 100).
    spark_context : SparkContext, optional
        Used for Hadoop URIs; defaults to the active one.
    also_commit_to_kafka_group : dict or callable or bool, optional
        Mirror every commit to a Kafka group for lag tools (:func:`~dstream_kafka.stores.mirror.mirror_to`):
        by default through the stream's consumer to its group.id; False turns it off.
    create : bool
        Create the directory's folders on first use (default). False opens an existing store
        for reading: a directory without ``commits/`` raises
        :class:`~dstream_kafka.errors.ConfigurationError` ("no such offset store") and nothing
        is created.

    Notes
    -----
    A checkpoint directory holds the offsets of one group; another group id raises
    :class:`~dstream_kafka.errors.OffsetStoreError` (use one checkpoint directory per stream).
    """

    def __init__(self, path: str | os.PathLike[str], *, keep_batches: int = 100, spark_context: Any = None,
                 also_commit_to_kafka_group: MirrorTarget | None | bool = None, create: bool = True) -> None:
        super().__init__(mirror=mirror_to(also_commit_to_kafka_group))
        self.keep_batches = self._check_keep("keep_batches", keep_batches)
        self._fs: CheckpointFileSystem = open_file_system(path, spark_context)
        self.path = self._fs.root
        self._create = create
        self._ready = False
        self._latest: _Commit | None = None     # cache of the newest commit, None = not read yet
        self._latest_known = False
        self._committed_times: list[int] = []   # sorted batch times of commit files seen
        # Data losses recorded after the newest commit: (name prefix, records). Only this
        # store writes them between commits (a second driver is fenced), so a cache is safe.
        self._loss_cache: tuple[str, list[DataLossRecord]] | None = None
        # The write-ahead file this store wrote (or found) last, so a commit need not read it back.
        self._planned_here: PlannedBatch | None = None

    def __repr__(self) -> str:
        return f"CheckpointOffsetStore({self.path!r})"

    # -- files --------------------------------------------------------------------------------
    def _dir(self, name: str) -> str:
        return self._fs.join(name)

    def _file(self, folder: str, name: str | int) -> str:
        return self._fs.join(folder, str(name))

    def _prepare(self) -> None:
        if not self._ready:
            if not self._create:
                if not self._fs.exists(self._dir("commits")):
                    what = ("does not exist" if not self._fs.exists(self.path)
                            else "holds no checkpoint offset store (no commits/ folder)")
                    raise ConfigurationError(
                        f"No such offset store: the checkpoint directory {self.path} {what}. Check the path in "
                        "the store URI (a stream creates its store when it first starts); nothing was created.")
            else:
                for folder in ("offsets", "commits", "data_loss"):
                    self._fs.mkdirs(self._dir(folder))
            self._ready = True

    def _read_doc(self, path: str, required: Collection[str]) -> dict[str, Any] | None:
        try:
            data = self._fs.read(path)
        except ChecksumMismatch:
            raise corrupt(path, "its content does not match its Hadoop checksum file (.crc): it was "
                                 "changed or damaged after it was written") from None
        if data is None:
            return None
        return parse(path, data, required)

    def _read_commit(self, t: int) -> _Commit | None:
        path = self._file("commits", t)
        doc = self._read_doc(path, ("group_id", "batch_time_ms", "ranges", "offsets", "committed_at_ms"))
        if doc is None:
            return None
        try:
            if int(doc["batch_time_ms"]) != t:
                raise ValueError(f"it says batch_time_ms {doc['batch_time_ms']} but is named {t}")
            ranges = tuple(OffsetRange(**item) for item in doc["ranges"])
            offsets = partition_offsets_from_json(json.dumps(doc["offsets"]), path, allowed_sentinels=())
            return _Commit(doc, ranges, offsets)
        except (TypeError, ValueError, KeyError) as exc:
            raise corrupt(path, f"invalid content ({exc})") from None

    def _times(self, folder: str) -> list[int]:
        """Return the sorted batch times that name files of ``folder`` (other names skipped)."""
        return sorted(t for t in map(_int_name, self._fs.list(self._dir(folder))) if t is not None)

    def _newest(self, group_id: str) -> _Commit | None:
        """Return the newest commit (cached after the first read), checking its group."""
        if not self._latest_known:
            self._prepare()
            self._committed_times = self._times("commits")
            self._latest = self._read_commit(self._committed_times[-1]) if self._committed_times else None
            self._verify_newest(self._latest)
            self._latest_known = True
        if self._latest is not None:
            self._check_owner(self._latest, group_id)
        return self._latest

    def _check_owner(self, commit: _Commit, group_id: str) -> None:
        if commit.group_id != group_id:
            raise OffsetStoreError(
                f"The checkpoint directory {self.path} holds the offsets of group {commit.group_id!r}, "
                f"not {group_id!r}. A checkpoint directory belongs to one stream: use another "
                "directory for this group, or the group id that wrote it.")

    def _verify_newest(self, latest: _Commit | None) -> None:
        """Refuse a newest commit that contradicts itself, its predecessor or its write-ahead
        file (or whose write-ahead file is missing), and commit files missing under write-ahead
        files planned after them."""
        if latest is not None:
            path = self._file("commits", latest.batch_time_ms)
            plan_path = self._file("offsets", latest.batch_time_ms)
            previous = None if latest.previous is None else self._read_commit(latest.previous)
            before: dict[TopicPartition, int] | None = None
            if latest.previous is None or previous is not None:  # a pruned predecessor is not checked
                before = dict(previous.offsets) if previous is not None else {}
                for loss in self._losses_since(latest.previous):
                    tp = TopicPartition(loss.topic, loss.partition)
                    if before.get(tp) == loss.lost_from:
                        before[tp] = loss.lost_until
            source = (self._file("commits", latest.previous) if latest.previous is not None
                      else "the start (no earlier commit)")
            # The rule every store applies to its newest commit (stores/records.py).
            problems = chain_breaks(before, latest.ranges, latest.offsets, reset=latest.reset is not None,
                                    previous=source)
            if problems:
                raise self._inconsistent(path, latest.group_id, "; ".join(problems))
            planned = self._read_planned(latest.batch_time_ms)
            if planned is None and latest.planned:
                raise self._inconsistent(
                    path, latest.group_id, f"its write-ahead file {plan_path} is missing (every commit is planned "
                                    "there first, so it was deleted, and the commit's ranges cannot be checked)")
            mismatch = None if planned is None else _plan_mismatch(planned.ranges, latest.ranges)
            if mismatch:
                raise self._inconsistent(path, latest.group_id, f"its ranges are not those planned in "
                                                                f"{plan_path} ({mismatch})")
        newest = latest.batch_time_ms if latest is not None else -1
        for t in self._times("offsets"):
            if t <= newest:
                continue
            doc = self._read_doc(self._file("offsets", t), ("batch_time_ms", "ranges"))
            after = None if doc is None else doc.get("after_commit_ms")
            if after is not None and int(after) > newest:
                raise CorruptCheckpointError(
                    f"Commit files are missing in {self._dir('commits')}: {self._file('offsets', t)} was "
                    f"planned after the commit of batch {after}, but the newest commit file is "
                    f"{'none' if latest is None else self._file('commits', newest)}. Offsets are never "
                    "reset on their own: restore the deleted commits/ files from a backup, or remove "
                    "offsets/ and commits/ to start the stream afresh from its starting offsets.")

    def _inconsistent(self, path: str, group_id: str, problem: str) -> CorruptCheckpointError:
        """Return the error for a newest commit file that breaks the chain: the file, what is
        inconsistent, that nothing changed, the command that shows the commits and the fix."""
        return CorruptCheckpointError(
            f"Checkpoint file {path} is corrupt: {problem}. It was changed after it was written (by hand or "
            "another tool): records between the offsets would be skipped or read twice with no data loss "
            "recorded, so it is refused; nothing was changed and no offset was reset. Inspect the commits "
            f"with `dstream-kafka offsets history --store checkpoint:{self.path} --group {group_id}`; then "
            "restore the file from a backup, or remove it (and every newer file in offsets/ and commits/) "
            "to resume from the batch before it, whose records the stream reads again.")

    def _forget(self) -> None:
        self._latest_known = False
        self._latest = None
        self._loss_cache = None
        self._planned_here = None

    def _losses_since(self, after: int | None) -> list[DataLossRecord]:
        prefix = f"{_FIRST if after is None else after}-"
        if self._loss_cache is not None and self._loss_cache[0] == prefix:
            return list(self._loss_cache[1])
        names = sorted(n for n in self._fs.list(self._dir("data_loss")) if n.startswith(prefix))
        losses = [self._read_loss(n) for n in names]
        self._loss_cache = (prefix, losses)
        return list(losses)

    def _read_loss(self, name: str) -> DataLossRecord:
        path = self._file("data_loss", name)
        doc = self._read_doc(path, ("group_id", "topic", "partition", "lost_from", "lost_until",
                                    "batch_time_ms", "recorded_at_ms"))
        if doc is None:
            raise corrupt(path, "it disappeared while being read")
        try:
            return DataLossRecord.from_doc(doc)
        except (TypeError, ValueError) as exc:
            raise corrupt(path, f"invalid content ({exc})") from None

    def _stored(self, group_id: str) -> dict[TopicPartition, int]:
        """The committed offsets, advanced over data losses recorded since the newest commit."""
        latest = self._newest(group_id)
        stored = dict(latest.offsets) if latest is not None else {}
        for loss in self._losses_since(latest.batch_time_ms if latest else None):
            tp = TopicPartition(loss.topic, loss.partition)
            if stored.get(tp) == loss.lost_from:
                stored[tp] = loss.lost_until
        return stored

    # -- contract -----------------------------------------------------------------------------
    def _load(self, group_id: str, topics: Collection[str] | None) -> dict[TopicPartition, int]:
        with self._lock:
            self._forget()  # a (re)start reads the files, not the cache
            return self._stored(group_id)

    def _plan(self, group_id: str, t: int, planned: tuple[OffsetRange, ...]) -> None:
        with self._lock:
            self._prepare()
            path = self._file("offsets", t)
            if self._fs.write_new(path, encode(self._plan_doc(group_id, t, planned))):
                self._planned_here = PlannedBatch(t, planned)
                return
            before = self._read_planned(t)
            if before is None or before.ranges == planned or _only_adds_empty(before.ranges, planned):
                self._planned_here = before
                # A restart re-runs this batch. Batches run and commit one at a time, so the
                # plans after it were never run by the driver that made them, and the restarted
                # stream plans afresh from this batch's end: delete them. Left behind, a stale
                # plan would be taken for the uncommitted batch after a later crash (re-running
                # other ranges than the batch that was output, or ranges that no longer continue
                # the stored offsets, refused on every restart).
                self._discard_plans_after(t)
                return
            raise OffsetFencedError(
                f"The write-ahead log {path} of group {group_id!r} already holds other ranges for batch "
                f"{t} ({list(before.ranges)}, now {list(planned)}). Another driver uses this checkpoint "
                "directory, or a planned batch was not re-run over the same ranges.")

    def _plan_doc(self, group_id: str, t: int, ranges: Sequence[OffsetRange]) -> dict[str, Any]:
        latest = self._newest(group_id)
        return {"group_id": group_id, "batch_time_ms": t, "ranges": ranges_doc(ranges),
                "planned_at_ms": int(time.time() * 1000),
                "after_commit_ms": None if latest is None else latest.batch_time_ms}

    def _drop_refused_plan(self, t: int, merged: tuple[OffsetRange, ...]) -> None:
        """Delete ``offsets/<t>`` when it plans exactly the refused batch and no commit holds ``t``.

        The batch does not continue the stored offsets, and commits only move them on, so it
        can never be committed: left behind, a later restart would take it for the batch a
        crashed driver left. Another driver's plan (other ranges) or a committed batch stays.
        """
        try:
            planned = self._read_planned(t)
            if (planned is not None and merge_ranges(planned.ranges) == merged
                    and self._read_commit(t) is None):
                self._fs.delete(self._file("offsets", t))
                log.info("Removed %s: its batch was refused at commit", self._file("offsets", t))
        except Exception as exc:  # the refusal is what the caller must see; pending() skips it anyway
            log.warning("Could not remove the refused batch's plan %s: %s", self._file("offsets", t), exc)

    def _discard_plans_after(self, t: int) -> None:
        for later in self._times("offsets"):
            if later > t:
                self._fs.delete(self._file("offsets", later))

    def _read_planned(self, t: int) -> PlannedBatch | None:
        found = self._read_plan(t)
        return None if found is None else found[0]

    def _read_plan(self, t: int) -> tuple[PlannedBatch, bool] | None:
        """Return ``offsets/<t>`` and whether a commit wrote it (no batch was run over it)."""
        path = self._file("offsets", t)
        doc = self._read_doc(path, ("group_id", "batch_time_ms", "ranges"))
        if doc is None:
            return None
        try:
            return PlannedBatch(t, tuple(OffsetRange(**item) for item in doc["ranges"])), doc.get("by_commit") is True
        except (TypeError, ValueError) as exc:
            raise corrupt(path, f"invalid content ({exc})") from None

    def _pending(self, group_id: str) -> PlannedBatch | None:
        with self._lock:
            latest = self._newest(group_id)
            after = latest.batch_time_ms if latest is not None else -1
            stored: dict[TopicPartition, int] | None = None
            for t in (t for t in self._times("offsets") if t > after):
                found = self._read_plan(t)
                if found is None:
                    continue
                planned, by_commit = found
                if by_commit:
                    # An import or a reset that stopped before its commit file: no stream ran
                    # it, and re-running it as a batch would read records it meant to skip.
                    log.info("Ignoring %s: an import or reset that was never committed; it is not re-run",
                             self._file("offsets", t))
                    continue
                stored = self._stored(group_id) if stored is None else stored
                broken = _breaks(stored, planned.ranges)
                if not broken:
                    return planned
                # Not the batch a crashed driver left: its ranges could never be committed
                # (e.g. a second driver's plan, refused at its commit). Re-running it would
                # output records twice and then fail on every restart.
                log.warning("Ignoring planned batch %s in %s: it does not continue the stored "
                               "offsets (%s), so no driver can commit it; it is not re-run",
                               t, self._file("offsets", t), "; ".join(broken))
            return None

    def _commit(self, group_id: str, t: int, merged: tuple[OffsetRange, ...]) -> bool:
        with self._lock:
            try:
                try:
                    self._commit_once(group_id, t, merged)
                except _ClaimTaken:
                    # Our view was stale: re-read the newest commit and check again, so the
                    # error names the partitions (or the batch goes through if it continues it).
                    self._forget()
                    self._commit_once(group_id, t, merged, retry=False)
            except OffsetFencedError:
                self._forget()  # someone else wrote: re-read the files next time
                self._drop_refused_plan(t, merged)
                raise
        # A re-run of the committed batch is mirrored too: the mirror a crash missed catches up.
        return True

    def _commit_once(self, group_id: str, t: int, merged: tuple[OffsetRange, ...], retry: bool = True) -> None:
        latest = self._newest(group_id)
        committed = None
        if latest is not None and t <= latest.batch_time_ms:
            # Commits are ordered: a batch at or before the newest one is either that same
            # batch again or another driver's.
            previous = latest if t == latest.batch_time_ms else self._read_commit(t)
            if previous is None or previous.ranges != merged:
                raise OffsetFencedError(
                    f"Commit of batch {t} for group {group_id!r} refused: the checkpoint {self.path} already "
                    f"committed batch {latest.batch_time_ms}" + (f" with other ranges ({list(previous.ranges)})"
                                                                 if previous is not None else "")
                    + ". Another driver uses this checkpoint directory; nothing was stored.")
            committed = previous.ranges
        where = f"checkpoint {self.path}"
        stored = self._admit_commit(group_id, t, merged, committed, lambda: self._stored(group_id),
                                    holder=where, place=where,
                                    reset=self._reset_audit)
        if stored is None:
            return
        # Every commit has its write-ahead file, which the newest commit is checked against. A
        # stream planned it already; an import, a reset or a commit made through the API
        # writes it here, before it claims the slot.
        plan_path = self._file("offsets", t)
        planned = self._planned_here if self._planned_here and self._planned_here.batch_time_ms == t \
            else self._read_planned(t)
        if planned is None and not self._fs.write_new(plan_path, encode({**self._plan_doc(group_id, t, merged),
                                                                          "by_commit": True})):
            planned = self._read_planned(t)  # written meanwhile: by another driver
        if planned is not None:
            mismatch = _plan_mismatch(planned.ranges, merged)
            if mismatch:
                raise OffsetFencedError(
                    f"Commit of batch {t} for group {group_id!r} refused: its ranges are not those planned in "
                    f"{plan_path} ({mismatch}). Another driver uses this checkpoint directory; nothing was "
                    "stored.")
        prev = latest.batch_time_ms if latest is not None else None
        claim = self._file("commits", f"{_FIRST if prev is None else prev}.next")
        if not self._fs.write_new(claim, encode({"group_id": group_id, "batch_time_ms": t})):
            doc = self._read_doc(claim, ("group_id", "batch_time_ms"))
            if doc is None or doc["batch_time_ms"] != t or doc["group_id"] != group_id:
                if retry:
                    raise _ClaimTaken
                raise OffsetFencedError(
                    f"Commit of batch {t} for group {group_id!r} refused: batch "
                    f"{doc and doc['batch_time_ms']} already claimed the commit after "
                    f"{prev if prev is not None else 'the start'} in {claim}. Another driver commits to "
                    "this checkpoint directory; nothing was stored. If no other driver runs, remove "
                    f"{claim} and restart.")
            # Our own claim from an attempt that crashed before writing the commit file.
        now = int(time.time() * 1000)
        offsets = advance_offsets(stored, merged)
        doc = {"group_id": group_id, "batch_time_ms": t, "ranges": ranges_doc(merged),
               "offsets": json.loads(partition_offsets_to_json(offsets)),
               "previous_batch_time_ms": prev, "committed_at_ms": now, "planned": True}
        if self._reset_audit is not None:
            doc["reset"] = self._reset_audit.doc()
        path = self._file("commits", t)
        if not self._fs.write_new(path, encode(doc)):
            existing = self._read_commit(t)
            if existing is None or existing.ranges != merged:
                raise OffsetFencedError(
                    f"Commit of batch {t} for group {group_id!r} refused: {path} was written by another "
                    "driver with other ranges; nothing was stored.")
            doc = {**doc, "committed_at_ms": existing.committed_at_ms}
        self._latest = _Commit(doc, merged, offsets)
        self._loss_cache = (f"{t}-", [])  # nothing can be recorded after a commit not yet made
        self._committed_times.append(t)
        self._prune()

    def _prune(self) -> None:
        if len(self._committed_times) <= self.keep_batches + 10:
            return  # prune in steps of 10 batches: listing folders is not free on HDFS
        self._committed_times = self._times("commits")
        drop = self._committed_times[:-self.keep_batches]
        if not drop:
            return
        floor = drop[-1]
        try:
            for t in drop:
                self._fs.delete(self._file("commits", t))
                self._fs.delete(self._file("commits", f"{t}.next"))
            for planned in self._times("offsets"):
                if planned <= floor:
                    self._fs.delete(self._file("offsets", planned))
        except Exception as exc:  # retention is housekeeping: never fail the commit for it
            log.warning("Pruning old checkpoint files in %s failed: %s", self.path, exc)
        self._committed_times = self._committed_times[-self.keep_batches:]

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        # The commits as stored, without the newest one's cross-checks: `offsets history` is how
        # a commit refused as inconsistent is inspected.
        with self._lock:
            self._prepare()
            records: list[CommitRecord] = []
            for t in reversed(self._times("commits")):
                if len(records) >= limit:
                    break
                commit = self._read_commit(t)
                if commit is not None:
                    if not records:
                        self._check_owner(commit, group_id)
                    records.append(CommitRecord(t, commit.ranges, utc_from_ms(commit.committed_at_ms),
                                                commit.reset))
            return records

    def _record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                          batch_time_ms: int | None) -> None:
        with self._lock:
            latest = self._newest(group_id)
            now = int(time.time() * 1000)
            # The name says which commit it follows, so _stored() finds the records that still
            # move offsets without reading every record.
            after = _FIRST if latest is None else latest.batch_time_ms
            name = f"{after}-{now:013d}-{uuid.uuid4().hex[:8]}"
            doc = {"group_id": group_id, **DataLossRecord.doc(tp, lost_from, lost_until, batch_time_ms, now)}
            self._fs.write_new(self._file("data_loss", name), encode(doc))
            self._loss_cache = None

    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        with self._lock:
            self._prepare()
            names = [n for n in self._fs.list(self._dir("data_loss")) if not n.startswith(".")]
            records = [self._read_loss(n) for n in names]
        return sorted(records, key=lambda r: r.recorded_at)


class _ClaimTaken(Exception):
    """Internal: another commit claimed the slot after the newest commit we knew."""


def _breaks(stored: Mapping[TopicPartition, int], planned: Sequence[OffsetRange]) -> list[str]:
    """Describe each range of ``planned`` that does not start at its partition's stored offset."""
    return [f"{r.topic}-{r.partition} planned from {r.fromOffset}, stored at {stored[r.topicPartition()]}"
            for r in merge_ranges(planned)
            if r.topicPartition() in stored and stored[r.topicPartition()] != r.fromOffset]


def _plan_mismatch(planned: Sequence[OffsetRange], committed: Sequence[OffsetRange]) -> str:
    """Describe how a commit's ranges differ from its write-ahead file's; ``""`` when they agree.

    They agree when every planned range is committed as planned (empty ones too) and the commit's
    other ranges are empty: a re-plan that only adds empty ranges keeps the first file.
    """
    plan = {r.topicPartition(): r for r in merge_ranges(planned)}
    done = {r.topicPartition(): r for r in merge_ranges(committed)}
    problems = [f"topic {tp.topic} partition {tp.partition}: planned [{plan[tp].fromOffset}, {plan[tp].untilOffset}), "
                + ("not committed" if tp not in done else f"committed [{done[tp].fromOffset}, {done[tp].untilOffset})")
                for tp in sorted(plan) if done.get(tp) != plan[tp]]
    problems += [f"topic {tp.topic} partition {tp.partition}: committed [{r.fromOffset}, {r.untilOffset}), not planned"
                 for tp, r in sorted(done.items()) if tp not in plan and r.count() > 0]
    return "; ".join(problems)


def _only_adds_empty(before: Sequence[OffsetRange], now: Sequence[OffsetRange]) -> bool:
    """True when ``now`` is ``before`` plus empty ranges of partitions ``before`` did not have."""
    known = {r.topicPartition(): r for r in before}
    extra = [r for r in now if r.topicPartition() not in known]
    return (all(known[r.topicPartition()] == r for r in now if r.topicPartition() in known)
            and len(now) - len(extra) == len(before) and all(r.count() == 0 for r in extra))
