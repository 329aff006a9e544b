"""A copy of committed offsets to a Kafka consumer group, for lag monitoring only.

Stores that keep offsets outside Kafka (checkpoint, SQL, ZooKeeper) take
``also_commit_to_kafka_group`` and build a :class:`KafkaGroupMirror` with :func:`mirror_to`;
the store calls it after each commit. Lag tools (``kafka-consumer-groups.sh --describe``) then
see the group's progress. The mirror is best effort: a failure logs a warning (at most one a
minute) and never fails the batch, and the stored offsets stay the only source of truth.

:mod:`dstream_kafka.stores.base` knows only the :class:`~dstream_kafka.stores.base.OffsetMirror`
protocol, so the abstract base imports no store and no Kafka client.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores.kafka_group import GroupCommitter

__all__ = ["KafkaGroupMirror", "MirrorTarget", "mirror_to"]

logger = logging.getLogger(__name__)

#: Kafka params with ``bootstrap.servers`` (optionally ``group.id``), or ``fn(group_id, offsets)``.
MirrorTarget: TypeAlias = Mapping[str, Any] | Callable[[str, dict[TopicPartition, int]], Any]

#: Timeout of one mirror commit to Kafka.
MIRROR_TIMEOUT_MS = 10_000


class KafkaGroupMirror:
    """Best-effort copy of committed offsets to a Kafka consumer group, for lag monitoring.

    Parameters
    ----------
    target : dict or callable
        Kafka params (``bootstrap.servers``, optional ``group.id`` overriding the store's group
        id) or a callable ``fn(group_id, offsets)`` with ``offsets`` a ``{TopicPartition: int}``
        dict.
    """

    def __init__(self, target: MirrorTarget) -> None:
        self._last_warning = float("-inf")
        if callable(target):
            self._fn: Callable[..., Any] | None = target
            self._committer: GroupCommitter | None = None
            self._group: str | None = None
        else:
            self._fn = None
            self._committer = GroupCommitter(target)
            self._group = target.get("group.id") or target.get("group_id")

    def bind_consumer(self, consumer: Any, lock: Any = None) -> None:
        """Commit through ``consumer`` when the mirrored group is its group (see
        :meth:`~dstream_kafka.stores.base.OffsetStore.bind_consumer`)."""
        if self._committer is not None:
            self._committer.bind(consumer, lock)

    def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Mirror ``offsets``; never raises (a failure is logged as a warning)."""
        from kafka.structs import OffsetAndMetadata

        group = self._group or group_id
        try:
            if self._fn is not None:
                self._fn(group, dict(offsets))
            else:
                assert self._committer is not None
                self._committer.commit(
                    group, {tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()}, MIRROR_TIMEOUT_MS)
        except Exception as exc:  # monitoring only: never fail the batch
            # Only the exception type and Kafka's error text: never the params (they may hold
            # SASL/SSL passwords). At most one warning a minute, as this runs every batch.
            now = time.monotonic()
            quiet = now - self._last_warning < 60.0
            if not quiet:
                self._last_warning = now
            logger.log(logging.DEBUG if quiet else logging.WARNING,
                       "Mirroring committed offsets to Kafka group %r failed (monitoring only, the batch "
                       "is committed): %s: %s", group, type(exc).__name__, exc)

    def close(self) -> None:
        """Close the consumers the mirror opened (never a bound one)."""
        if self._committer is not None:
            self._committer.close()


def mirror_to(target: MirrorTarget | None) -> KafkaGroupMirror | None:
    """Return the mirror of a store's ``also_commit_to_kafka_group`` argument (None: no mirror)."""
    return None if target is None else KafkaGroupMirror(target)
