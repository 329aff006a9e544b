"""A copy of committed offsets to a Kafka consumer group, for lag monitoring only.

Stores that keep offsets outside Kafka (checkpoint, SQL, ZooKeeper, HBase) take
``also_commit_to_kafka_group`` and build a :class:`KafkaGroupMirror` with :func:`mirror_to`;
the store calls it after each commit. Lag tools (``kafka-consumer-groups --describe``, Burrow,
kafka-lag-exporter) then see the group's progress. **On by default**: without the argument
(None) the mirror commits through the stream's own driver consumer, to the stream's
``group.id``, once the stream binds it (:meth:`~dstream_kafka.stores.base.OffsetStore.bind_consumer`);
``also_commit_to_kafka_group=False`` turns it off. The mirror is best effort: a failure logs a
warning (at most one a minute) and never fails the batch, and the stored offsets stay the only
source of truth. Through the stream's consumer the copy is sent with ``commit_async``: the
batch does not wait for the broker's answer (a synchronous commit cost every store a Kafka
round trip per batch, 8-9 ms of its 11-15 ms, ``benchmarks/batch_cost.py``). A failed copy is
sent again, whole, with the next batch; closing the store sends the last copy synchronously
unless it is known to have landed, so a stopped stream's group shows its last batch. Its commits carry the metadata :data:`MIRROR_METADATA`, so offsets someone
else committed to the group (Kafka's own reset tool) can be told apart.

The group's copy follows the store both ways: :func:`copy_reset_to_group` moves it when
``dstream-kafka offsets reset`` moves the store, and :func:`check_group_not_moved` refuses a
stream's start when someone else (``kafka-consumer-groups --reset-offsets``) moved the group,
which the stream would otherwise ignore silently, its store being the source of truth. Both
ask the store whether it mirrors (:attr:`~dstream_kafka.stores.base.OffsetStore.mirrors_to_group`).

:mod:`dstream_kafka.stores.base` knows only the :class:`~dstream_kafka.stores.base.OffsetMirror`
protocol, so the abstract base imports no store and no Kafka client.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from dstream_kafka.errors import OffsetStoreError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores.kafka_group import GroupCommitter

__all__ = ["MIRROR_METADATA", "KafkaGroupMirror", "MirrorTarget", "check_group_not_moved", "copy_reset_to_group",
           "mirror_to"]

log = logging.getLogger(__name__)

#: Kafka params with ``bootstrap.servers`` (optionally ``group.id``), or ``fn(group_id, offsets)``.
MirrorTarget: TypeAlias = Mapping[str, Any] | Callable[[str, dict[TopicPartition, int]], Any]

#: Timeout of one mirror commit to Kafka.
MIRROR_TIMEOUT_MS = 10_000


#: The metadata of every offset the mirror commits.
MIRROR_METADATA = '{"dstream_kafka_mirror":1}'


class KafkaGroupMirror:
    """Best-effort copy of committed offsets to a Kafka consumer group, for lag monitoring.

    Parameters
    ----------
    target : dict or callable or None
        Kafka params (``bootstrap.servers``, optional ``group.id`` overriding the store's group
        id), a callable ``fn(group_id, offsets)`` with ``offsets`` a ``{TopicPartition: int}``
        dict, or None: only through the consumer a stream binds (nothing before it does).

    Only offsets that differ from what this mirror last copied are sent: a partition with no
    new records is not committed again at every batch (such a partition may belong to a topic
    deleted meanwhile, whose commit kafka-python would retry until the timeout).
    """

    def __init__(self, target: MirrorTarget | None) -> None:
        self._last_warning = float("-inf")
        self._failing = False  # the last mirror commit failed
        self._copied: dict[str, dict[TopicPartition, int]] = {}
        self._through_stream = target is None
        self._bound: Any = None
        self._bound_lock: Any = None
        self._fn: Callable[..., Any] | None = None
        self._committer: GroupCommitter | None = None
        self._group: str | None = None
        self._last_sent: Any = None  # the future of the last asynchronous copy
        self._last_copy: tuple[str, dict[Any, Any]] | None = None  # and what it sent
        self._resend = False  # an asynchronous copy failed: send every offset again
        if callable(target):
            self._fn = target
        elif target is not None:
            self._committer = GroupCommitter(target)
            self._group = target.get("group.id") or target.get("group_id")

    def bind_consumer(self, consumer: Any, lock: Any = None) -> None:
        """Commit through ``consumer`` when the mirrored group is its group (see
        :meth:`~dstream_kafka.stores.base.OffsetStore.bind_consumer`)."""
        if self._committer is not None:
            self._committer.bind(consumer, lock)
        self._bound, self._bound_lock = consumer, lock

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Mirror ``offsets``; never raises (a failure is logged as a warning)."""
        from kafka.structs import OffsetAndMetadata

        group = self._group or group_id
        if self._resend:
            self._resend = False
            self._copied.pop(group, None)
        copied = self._copied.setdefault(group, {})
        offsets = {tp: o for tp, o in offsets.items() if copied.get(tp) != o}
        if not offsets:
            return
        try:
            if self._through_stream:
                consumer = self._bound
                if consumer is None or consumer.config.get("group_id") != group:
                    return  # no stream bound (a command-line tool), or the stream uses another group
                from kafka import TopicPartition as KafkaTopicPartition

                if self._failing and not _reachable(consumer):
                    # An outage: each try would hold the stream's consumer (and the batch, or a
                    # graceful stop) for MIRROR_TIMEOUT_MS; the next batch's commit catches up.
                    raise ConnectionError("no bootstrap server accepts a connection")
                with self._bound_lock or contextlib.nullcontext():
                    # Only partitions the stream's metadata still lists: kafka-python retries a
                    # commit of a deleted topic's partition until the timeout, which every
                    # batch would then wait for while holding the stream's consumer.
                    live = {tp: o for tp, o in offsets.items() if _listed(consumer, tp)}
                    if live:  # the answer comes on the client's I/O thread: not waited for
                        copy = {KafkaTopicPartition(*tp): OffsetAndMetadata(o, MIRROR_METADATA, -1)
                                for tp, o in live.items()}
                        sent = consumer.commit_async(copy)
                        self._last_copy = (group, copy)
                        sent.add_callback(self._sent)
                        sent.add_errback(lambda exc: self._not_sent(group, exc))
                        self._last_sent = sent
            elif self._fn is not None:
                self._fn(group, dict(offsets))
            else:
                assert self._committer is not None
                self._committer.commit(
                    group, {tp: OffsetAndMetadata(o, MIRROR_METADATA, -1) for tp, o in offsets.items()},
                    MIRROR_TIMEOUT_MS)
            copied.update(offsets)
            if not self._through_stream:  # an asynchronous copy's callbacks say how it went
                self._failing = False
        except Exception as exc:  # monitoring only: never fail the batch
            self._failing = True
            self._warn(group, exc)

    def _sent(self, _response: Any) -> None:
        self._failing = False

    def _not_sent(self, group: str, exc: Any) -> None:
        self._failing = self._resend = True
        self._warn(group, exc)

    def _warn(self, group: str, exc: Any) -> None:
        """Log a failed copy: at most one warning a minute, as this runs every batch. Only the
        exception type and Kafka's error text: never the params (they may hold passwords)."""
        now = time.monotonic()
        quiet = now - self._last_warning < 60.0
        if not quiet:
            self._last_warning = now
        log.log(logging.DEBUG if quiet else logging.WARNING,
                "Mirroring committed offsets to Kafka group %r failed (monitoring only, the batch "
                "is committed): %s: %s", group, type(exc).__name__, exc)

    def close(self) -> None:
        """Make sure the group holds the last copy (so a stopped stream's group shows its last
        batch): unless its asynchronous commit succeeded, it is sent again synchronously, once.
        Then close the consumers the mirror opened (never a bound one)."""
        last, sent, consumer = self._last_copy, self._last_sent, self._bound
        if last is not None and consumer is not None and not (sent.is_done and sent.succeeded()):
            group, offsets = last
            try:
                if not _reachable(consumer):
                    raise ConnectionError("no bootstrap server accepts a connection")
                with self._bound_lock or contextlib.nullcontext():
                    consumer.commit(offsets, timeout_ms=MIRROR_TIMEOUT_MS)
            except Exception as exc:  # monitoring only
                self._warn(group, exc)
        if self._committer is not None:
            self._committer.close()


def _reachable(consumer: Any) -> bool:
    """Whether a bootstrap server of ``consumer`` accepts a TCP connection (1 s at most)."""
    from dstream_kafka.client.reachability import any_reachable

    servers = consumer.config.get("bootstrap_servers") or ""
    return any_reachable(servers if isinstance(servers, str) else ",".join(map(str, servers)))


def _listed(consumer: Any, tp: TopicPartition) -> bool:
    """Whether ``consumer``'s cached cluster metadata lists ``tp`` (no request is sent)."""
    from dstream_kafka._kafka_internals import cluster_metadata

    cluster = cluster_metadata(consumer)
    # topics() first: kafka-python logs an error for each look-up of an unknown topic
    return tp.topic in cluster.topics() and tp.partition in (cluster.partitions_for_topic(tp.topic) or ())


def mirror_to(target: MirrorTarget | None | bool) -> KafkaGroupMirror | None:
    """Return the mirror of a store's ``also_commit_to_kafka_group`` argument.

    None (the default): through the stream's consumer; False: no mirror; else the target.
    """
    if target is False:
        return None
    if target is True:
        target = None
    return KafkaGroupMirror(target)


def _mirrors(store: Any) -> bool:
    # A store of the user's own that only quacks like an OffsetStore mirrors nothing.
    return bool(getattr(store, "mirrors_to_group", False))


def copy_reset_to_group(store: Any, group: str, offsets: Mapping[TopicPartition, int], servers: str,
                        timeout: float) -> None:
    """Commit a reset's offsets to the Kafka group ``store`` mirrors to (best effort: warns)."""
    if not _mirrors(store):
        return
    from kafka.structs import OffsetAndMetadata

    ms = int(timeout * 1000)
    committer = GroupCommitter({"bootstrap.servers": servers}, ms)
    try:
        committer.commit(group, {tp: OffsetAndMetadata(o, MIRROR_METADATA, -1) for tp, o in offsets.items()}, ms)
    except Exception as exc:  # the store is reset; only the lag copy is behind
        log.warning("The reset is written, but copying it to Kafka group %r failed (%s: %s); lag tools show "
                       "the old offsets until the stream's next batch", group, type(exc).__name__, exc)
    finally:
        committer.close()


def check_group_not_moved(consumer: Any, store: Any, group: str, stored: Mapping[TopicPartition, int]) -> None:
    """Refuse to start when the Kafka group's offsets were moved outside dstream_kafka.

    A committed offset of the group that differs from the stored one and lacks the mirror's
    metadata was written by another tool; with the mirror off (``also_commit_to_kafka_group=
    False``) the group is not looked at.

    Raises
    ------
    OffsetStoreError
        Naming the partitions, both offsets and ``dstream-kafka offsets reset``.
    """
    from kafka import TopicPartition as KafkaTopicPartition

    if not _mirrors(store) or consumer.config.get("group_id") != group:
        return
    moved = []
    for tp, offset in sorted(stored.items()):
        found = consumer.committed(KafkaTopicPartition(*tp), metadata=True)
        # Ours: the mirror's metadata, or the Kafka group store's ({"dstream_kafka":1,...}) when the
        # stream used that store before; Kafka's tools commit empty metadata.
        ours = found is not None and (found.metadata == MIRROR_METADATA or '"dstream_kafka"' in (found.metadata or ""))
        if found is not None and found.offset != offset and not ours:
            moved.append(f"{tp.topic}-{tp.partition}: group at {found.offset}, store at {offset}")
    if moved:
        raise OffsetStoreError(
            f"The offsets of Kafka group {group!r} were moved outside dstream_kafka ({'; '.join(moved)}), "
            "probably by kafka-consumer-groups --reset-offsets. This stream's offsets live in its offset store, "
            "which that tool does not change; nothing was read. To start where the group now is, move the store "
            f"with `dstream-kafka offsets reset --store URI --group {group} --from-file FILE` (Kafka's CSV "
            "topic,partition,offset) or --to-offset N; to keep the store's offsets, run `dstream-kafka offsets "
            f"reset --store URI --group {group} --all-topics --to-current --execute`.")
