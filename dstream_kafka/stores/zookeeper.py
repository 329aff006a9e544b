"""Offsets in ZooKeeper (kazoo), in the layout old Kafka tools read.

Znodes (``<g>`` is the group id)::

    /consumers/<g>/offsets/<topic>/<partition>           next offset to read, ASCII decimal
    /consumers/<g>/dstream_kafka/commits/<batch_time_ms> {"ranges": [...], "committed_at_ms": ...}
    /consumers/<g>/dstream_kafka/data_loss/record-<seq>  {"topic", "partition", "lost_from", ...}
    /consumers/<g>/dstream_kafka/layout                  LAYOUT_VERSION (written with the first commit);
                                                         a newer one is refused

A commit reads every partition node (data and version), checks that each range starts at the
stored offset, then writes all offsets and the history node in **one ZooKeeper transaction**:
``set_data`` with the version read (or ``create`` for a new partition) plus ``create`` of the
history node. Any concurrent change makes the whole transaction fail, which is reported as
:class:`~dstream_kafka.errors.OffsetFencedError`; nothing is written. The newest
``keep_history`` history nodes are kept. :meth:`~ZooKeeperOffsetStore.load` checks the offset
nodes against the newest history node, and that node against the one before it (both moved
over the recorded data losses): a node changed by hand raises
:class:`~dstream_kafka.errors.OffsetStoreError` instead of skipping records.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dstream_kafka.errors import ConfigurationError, MissingDependencyError, OffsetFencedError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.offsets_json import offset_ranges_from_json, offset_ranges_to_json
from dstream_kafka.stores.base import OffsetStore
from dstream_kafka.stores.mirror import MirrorTarget, mirror_to
from dstream_kafka.stores.records import CommitRecord, DataLossRecord, ResetAudit, chain_breaks, utc_from_ms

__all__ = ["LAYOUT_VERSION", "ZooKeeperOffsetStore"]

#: The znode layout this version writes; a group of a newer layout is refused.
LAYOUT_VERSION = 1

log = logging.getLogger(__name__)


def _kazoo() -> Any:
    try:
        import kazoo.client
        import kazoo.exceptions
    except ImportError:
        raise MissingDependencyError(
            "The ZooKeeper offset store needs kazoo: install dstream_kafka[zookeeper] "
            "(pip install 'dstream_kafka[zookeeper]')") from None
    return kazoo


def _check_name(value: str, what: str) -> str:
    # A znode name must not contain '/', and '.'/'..' are reserved.
    if not isinstance(value, str) or not value or "/" in value or value in (".", ".."):
        raise ConfigurationError(f"{what} {value!r} cannot be a ZooKeeper node name")
    return value


class ZooKeeperOffsetStore(OffsetStore):
    """Offsets at ``/consumers/<group>/offsets/<topic>/<partition>`` in ZooKeeper.

    Parameters
    ----------
    hosts : str or KazooClient
        ``host:port[,host:port...][/chroot]``, or a started ``KazooClient`` (not closed by
        :meth:`close`).
    timeout : float
        Seconds the store waits for ZooKeeper: to connect, and for the answer to each request
        (also the session timeout of a client the store creates). A server that does not answer
        in time fails the store call with :class:`~dstream_kafka.errors.OffsetStoreError`, so a
        stopped ZooKeeper fails the batch after about ``timeout`` seconds; nothing is written.
    keep_history : int
        History nodes kept per group.
    also_commit_to_kafka_group : dict or callable or bool, optional
        Mirror every commit to a Kafka group for lag tools (:func:`~dstream_kafka.stores.mirror.mirror_to`):
        by default through the stream's consumer to its group.id; False turns it off.
    create : bool
        False opens an existing store for reading: a chroot (``hosts/ROOT``) that does not exist
        raises :class:`~dstream_kafka.errors.ConfigurationError` ("no such offset store"). The
        store creates nodes only when it commits, so reads never create any.
    **client_kwargs
        Further ``KazooClient`` arguments (``auth_data``, ``use_ssl``, ...); never logged.
    """

    def __init__(self, hosts: Any = "127.0.0.1:2181", *, timeout: float = 15.0, keep_history: int = 1000,
                 also_commit_to_kafka_group: MirrorTarget | None | bool = None, create: bool = True,
                 **client_kwargs: Any) -> None:
        super().__init__(mirror=mirror_to(also_commit_to_kafka_group))
        self._create = create
        kazoo = _kazoo()
        self.keep_history = self._check_keep("keep_history", keep_history)
        self._exc = kazoo.exceptions
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise ConfigurationError(
                f"ZooKeeper store timeout must be a positive number of seconds, got {timeout!r}: "
                "pass e.g. OffsetStores.zookeeper(hosts, timeout=15.0)")
        self._timeout = float(timeout)
        if isinstance(hosts, str):
            self.hosts = hosts
            self._zk = kazoo.client.KazooClient(hosts=hosts, timeout=timeout, **client_kwargs)
            self._owned = True
            self._started = False
        else:
            self.hosts = getattr(hosts, "hosts", repr(hosts))
            self._zk, self._owned, self._started = hosts, False, True
        self._history_count: dict[str, int] = {}
        self._ensured: set[str] = set()
        self._layout_ok: set[str] = set()

    def __repr__(self) -> str:
        return f"ZooKeeperOffsetStore({self.hosts!r})"

    # -- plumbing -----------------------------------------------------------------------------
    def _client(self) -> Any:
        if not self._started:
            try:
                with warnings.catch_warnings():
                    if not self._create:  # kazoo warns of a missing chroot; the check below says it in one line
                        warnings.filterwarnings("ignore", message="No chroot path exists")
                    self._zk.start(timeout=self._timeout)
            except Exception as exc:
                raise OffsetStoreError(f"Connecting to ZooKeeper {self.hosts} failed: "
                                       f"{type(exc).__name__}: {exc}") from None
            self._started = True
            chroot = getattr(self._zk, "chroot", "")
            if not self._create and chroot and self._wait(self._zk.exists_async("/")) is None:
                raise ConfigurationError(
                    f"No such offset store: ZooKeeper {self.hosts} has no node {chroot} (the chroot). Check the path "
                    "in the store URI (a stream creates its store when it first commits); nothing was created.")
        return self._zk

    def _wait(self, request: Any, deadline: float | None = None) -> Any:
        """Return the result of a kazoo async request, waiting at most until ``deadline``
        (default: the store's timeout from now); a request still unanswered raises
        OffsetStoreError (kazoo queues requests while it reconnects, and would wait forever)."""
        if deadline is None:
            deadline = time.monotonic() + self._timeout
        try:
            return request.get(timeout=max(0.0, deadline - time.monotonic()))
        except self._zk.handler.timeout_exception:
            raise OffsetStoreError(
                f"ZooKeeper {self.hosts} did not answer within the store's timeout of {self._timeout:g} s: "
                "the server is down or unreachable. Nothing was written by this call; restart once "
                "ZooKeeper is back (OffsetStores.zookeeper(hosts, timeout=...) sets the bound).") from None

    @contextlib.contextmanager
    def _wrapped(self, what: str) -> Any:
        try:
            yield
        except (self._exc.ConnectionLoss, self._exc.SessionExpiredError) as exc:
            raise OffsetStoreError(
                f"ZooKeeper {self.hosts}: {what} failed: {type(exc).__name__}: the connection to ZooKeeper "
                "was lost (server down or unreachable). A commit whose answer was lost is recognised "
                "by its history node when the stream restarts; no offset was reset.") from None
        except self._exc.KazooException as exc:
            raise OffsetStoreError(f"ZooKeeper {self.hosts}: {what} failed: {type(exc).__name__}: {exc}") from None

    @staticmethod
    def _group_path(group_id: str) -> str:
        return f"/consumers/{_check_name(group_id, 'group id')}"

    def _offset_path(self, group_id: str, tp: TopicPartition) -> str:
        return f"{self._group_path(group_id)}/offsets/{_check_name(tp.topic, 'topic')}/{tp.partition}"

    def _get_many(self, paths: Sequence[str]) -> list[tuple[bytes, Any] | None]:
        """Read nodes in parallel (one round trip); None for a node that does not exist."""
        zk = self._client()
        deadline = time.monotonic() + self._timeout
        pending = [zk.get_async(path) for path in paths]
        results: list[tuple[bytes, Any] | None] = []
        for request in pending:
            try:
                results.append(self._wait(request, deadline))
            except self._exc.NoNodeError:
                results.append(None)
        return results

    def _ensure(self, path: str) -> None:
        if path not in self._ensured:  # a path once created stays (nobody deletes offsets)
            self._wait(self._client().ensure_path_async(path))
            self._ensured.add(path)

    def _read_offset(self, path: str, found: tuple[bytes, Any] | None = None,
                     fetch: bool = True) -> tuple[int | None, int]:
        """Return (offset, version) of a partition node; (None, -1) when it does not exist."""
        if fetch:
            found = self._get_many([path])[0]
        if found is None:
            return None, -1
        data, stat = found
        text = (data or b"").decode("ascii", "replace").strip()
        if not text.isdigit():
            raise OffsetStoreError(
                f"ZooKeeper node {path} holds {data[:40]!r}, not an offset (ASCII decimal). It was written "
                "by hand or another tool; nothing was committed and no offset was reset. Fix the node.")
        return int(text), stat.version

    def _check_layout(self, group_id: str, write: bool) -> None:
        """Refuse a group of a newer layout; with ``write``, record this layout where none is."""
        if group_id in self._layout_ok:
            return
        path = f"{self._group_path(group_id)}/dstream_kafka/layout"
        found = self._get_many([path])[0]
        if found is not None:
            text = (found[0] or b"").decode("ascii", "replace").strip()
            if not text.isdigit() or int(text) > LAYOUT_VERSION:
                raise OffsetStoreError(
                    f"ZooKeeper node {path} says layout {text[:20]!r}: group {group_id!r} was written by a newer "
                    f"dstream_kafka (this version reads layout {LAYOUT_VERSION}). Nothing was read or written; "
                    "upgrade dstream_kafka to use it.")
        elif write:
            self._ensure(f"{self._group_path(group_id)}/dstream_kafka")
            with contextlib.suppress(self._exc.NodeExistsError):
                self._wait(self._client().create_async(path, str(LAYOUT_VERSION).encode()))
        else:
            return  # not recorded yet (nothing committed, or an older release): check again later
        self._layout_ok.add(group_id)

    # -- contract -----------------------------------------------------------------------------
    def _load(self, group_id: str, topics: Collection[str] | None) -> dict[TopicPartition, int]:
        base = f"{self._group_path(group_id)}/offsets"
        result: dict[TopicPartition, int] = {}
        with self._lock, self._wrapped("loading offsets"):
            self._check_layout(group_id, write=False)
            zk = self._client()
            try:
                names = self._wait(zk.get_children_async(base)) if topics is None else list(topics)
            except self._exc.NoNodeError:
                return {}
            for topic in sorted(names):
                try:
                    partitions = self._wait(zk.get_children_async(f"{base}/{_check_name(topic, 'topic')}"))
                except self._exc.NoNodeError:
                    continue
                for name in partitions:
                    if name.isdigit():
                        offset, _ = self._read_offset(f"{base}/{topic}/{name}")
                        if offset is not None:
                            result[TopicPartition(topic, int(name))] = offset
            self._check_history(group_id, result, topics)
        return result

    def _check_history(self, group_id: str, stored: Mapping[TopicPartition, int],
                       topics: Collection[str] | None) -> None:
        """Refuse offset nodes that are not where the newest history node left them, or a newest
        history node that does not continue the one before it (both moved over recorded data
        losses). A group without history (seeded, or written by other code) is taken as it is.

        Raises
        ------
        OffsetStoreError
            Naming ZooKeeper, the group, the partition, both offsets and what to do.
        """
        history = f"{self._group_path(group_id)}/dstream_kafka/commits"
        try:
            times = sorted(int(n) for n in self._wait(self._client().get_children_async(history)) if n.isdigit())
        except self._exc.NoNodeError:
            return
        paths = [f"{history}/{t}" for t in times[-2:]]
        commits = [self._parse_commit(path, found) for path, found in zip(paths, self._get_many(paths))]
        if not commits or commits[-1] is None:
            return  # no history, or pruned meanwhile
        losses = self._data_losses(group_id)

        def moved(ranges: Sequence[OffsetRange]) -> dict[TopicPartition, int]:
            offsets = {r.topicPartition(): r.untilOffset for r in ranges}
            for loss in losses:  # oldest first, so chained losses apply in turn
                tp = TopicPartition(loss.topic, loss.partition)
                if offsets.get(tp) == loss.lost_from:
                    offsets[tp] = loss.lost_until
            return offsets

        ranges, _, reset = commits[-1]
        problems = [f"topic {tp.topic} partition {tp.partition}: the offset node holds {stored.get(tp, 'nothing')}, "
                    f"the newest commit ({paths[-1]}) ended at {offset}"
                    for tp, offset in sorted(moved(ranges).items())
                    if (topics is None or tp.topic in topics) and stored.get(tp) != offset]
        previous = commits[0] if len(commits) == 2 else None
        if previous is not None:
            problems += chain_breaks(moved(previous[0]), ranges, None, reset=reset is not None,
                                     previous=f"the commit before it ({paths[0]})")
        if problems:
            raise OffsetStoreError(
                f"The offsets of group {group_id!r} in ZooKeeper {self.hosts} do not continue its commit history: "
                + "; ".join(problems) + ". The nodes were changed by hand or by another tool: records between the "
                "two offsets would be skipped or read twice with no data loss recorded. Nothing was read and no "
                f"offset was reset. Inspect the commits with `dstream-kafka offsets history --group {group_id}`; "
                f"restore the nodes, or, if the move is deliberate, delete {history} so the offset nodes are taken "
                "as they are (`dstream-kafka offsets reset` moves offsets and records the move).")

    def _commit(self, group_id: str, t: int, merged: tuple[OffsetRange, ...]) -> bool:
        history = f"{self._group_path(group_id)}/dstream_kafka/commits"
        with self._lock, self._wrapped("committing offsets"):
            self._check_layout(group_id, write=True)
            zk = self._client()
            paths = [self._offset_path(group_id, r.topicPartition()) for r in merged]
            found = self._get_many([f"{history}/{t}", *paths])
            done = self._parse_commit(f"{history}/{t}", found[0])
            # (offset, version) per partition, read after the history node so that a re-run of a
            # committed batch is a no-op; the transaction below writes with these versions.
            current: dict[TopicPartition, tuple[int | None, int]] = {}

            def read_stored() -> dict[TopicPartition, int]:
                current.update({r.topicPartition(): self._read_offset(path, item, fetch=False)
                                for r, path, item in zip(merged, paths, found[1:])})
                return {tp: off for tp, (off, _) in current.items() if off is not None}

            if self._admit_commit(group_id, t, merged, None if done is None else done[0], read_stored,
                                  holder="ZooKeeper", place=f"ZooKeeper {self.hosts}",
                                  reset=self._reset_audit) is None:
                return False
            self._ensure(history)
            for topic in sorted({r.topic for r in merged if current[r.topicPartition()][0] is None}):
                self._ensure(f"{self._group_path(group_id)}/offsets/{topic}")
            tx = zk.transaction()
            for r in merged:
                path = self._offset_path(group_id, r.topicPartition())
                offset, version = current[r.topicPartition()]
                data = str(r.untilOffset).encode("ascii")
                if offset is None:
                    tx.create(path, data)
                else:
                    tx.set_data(path, data, version=version)
            record: dict[str, Any] = {"ranges": json.loads(offset_ranges_to_json(merged)),
                                      "committed_at_ms": int(time.time() * 1000)}
            if self._reset_audit is not None:
                record["reset"] = self._reset_audit.doc()
            tx.create(f"{history}/{t}", json.dumps(record, separators=(",", ":")).encode())
            results = self._wait(tx.commit_async())
            failed = [(i, res) for i, res in enumerate(results)
                      if isinstance(res, Exception) and not isinstance(res, self._exc.RolledBackError)]
            if failed:
                self._ensured.clear()  # the nodes may have been removed by hand: ensure again
                i, res = failed[0]
                what = (f"topic {merged[i].topic} partition {merged[i].partition} changed concurrently "
                        f"(expected offset {merged[i].fromOffset})" if i < len(merged)
                        else f"batch {t} was committed concurrently")
                raise OffsetFencedError(
                    f"Commit of batch {t} for group {group_id!r} refused by ZooKeeper ({type(res).__name__}): "
                    f"{what}. Another driver commits for this group; nothing was stored.")
            self._prune(group_id, history)
        return True

    def _prune(self, group_id: str, history: str) -> None:
        count = self._history_count.get(group_id, self.keep_history + 10) + 1
        self._history_count[group_id] = count
        if count <= self.keep_history + 10:
            return  # list the children only every 10 commits past the limit
        zk = self._client()
        times = sorted(int(n) for n in self._wait(zk.get_children_async(history)) if n.isdigit())
        for stale in times[:-self.keep_history]:
            with contextlib.suppress(self._exc.NoNodeError):
                self._wait(zk.delete_async(f"{history}/{stale}"))
        self._history_count[group_id] = min(len(times), self.keep_history)

    def _read_commit(self, path: str) -> tuple[tuple[OffsetRange, ...], int, ResetAudit | None] | None:
        return self._parse_commit(path, self._get_many([path])[0])

    def _parse_commit(self, path: str, found: tuple[bytes, Any] | None
                      ) -> tuple[tuple[OffsetRange, ...], int, ResetAudit | None] | None:
        if found is None:
            return None
        data = found[0]
        try:
            doc = json.loads(data)
            return (tuple(offset_ranges_from_json(json.dumps(doc["ranges"]), path)), int(doc["committed_at_ms"]),
                    ResetAudit.from_doc(doc.get("reset")))
        except (ValueError, KeyError, TypeError) as exc:
            raise OffsetStoreError(f"ZooKeeper node {path} is not a dstream_kafka commit record ({exc}); "
                                   "restore or remove it") from None

    def _history(self, group_id: str, limit: int) -> list[CommitRecord]:
        history = f"{self._group_path(group_id)}/dstream_kafka/commits"
        records = []
        with self._lock, self._wrapped("reading the commit history"):
            try:
                times = sorted((int(n) for n in self._wait(self._client().get_children_async(history))
                                if n.isdigit()), reverse=True)
            except self._exc.NoNodeError:
                return []
            for t in times[:max(0, limit)]:
                found = self._read_commit(f"{history}/{t}")
                if found is not None:
                    records.append(CommitRecord(t, found[0], utc_from_ms(found[1]), found[2]))
        return records

    def _record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int, lost_until: int,
                          batch_time_ms: int | None) -> None:
        folder = f"{self._group_path(group_id)}/dstream_kafka/data_loss"
        record = DataLossRecord.doc(tp, lost_from, lost_until, batch_time_ms, int(time.time() * 1000))
        with self._lock, self._wrapped("recording data loss"):
            zk = self._client()
            self._ensure(folder)
            path = self._offset_path(group_id, tp)
            offset, version = self._read_offset(path)
            tx = zk.transaction()
            tx.create(f"{folder}/record-", json.dumps(record).encode(), sequence=True)
            if offset == lost_from:
                tx.set_data(path, str(lost_until).encode("ascii"), version=version)
            results = self._wait(tx.commit_async())
            if any(isinstance(r, Exception) for r in results):
                raise OffsetFencedError(
                    f"Recording data loss of {tp.topic}-{tp.partition} for group {group_id!r} failed: the "
                    "offset node changed concurrently; nothing was stored.")

    def _data_losses(self, group_id: str) -> list[DataLossRecord]:
        folder = f"{self._group_path(group_id)}/dstream_kafka/data_loss"
        records = []
        with self._lock, self._wrapped("reading data losses"):
            zk = self._client()
            try:
                names = sorted(self._wait(zk.get_children_async(folder)))
            except self._exc.NoNodeError:
                return []
            for name in names:
                data, _ = self._wait(zk.get_async(f"{folder}/{name}"))
                records.append(DataLossRecord.from_doc(json.loads(data)))
        return records

    def close(self) -> None:
        with self._lock:
            if self._owned and self._started:
                with contextlib.suppress(Exception):
                    self._zk.stop()
                    self._zk.close()
                self._started = False
            super().close()
