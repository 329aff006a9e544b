"""The Kafka group's copy of a store's offsets: moved along by a reset, checked at a stream's start.

Stores other than the Kafka group store mirror their commits to the stream's consumer group by
default (:mod:`dstream_kafka.stores.mirror`), with :data:`~dstream_kafka.stores.mirror.MIRROR_METADATA`,
so Kafka's lag tools see the stream. :func:`copy_reset_to_group` moves that copy when
``dstream-kafka offsets reset`` moves the store; :func:`check_group_not_moved` refuses a start
when someone else (Kafka's ``kafka-consumer-groups --reset-offsets``) moved the group, which
the stream would otherwise ignore silently, its store being the source of truth.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from dstream_kafka.errors import OffsetStoreError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores.base import OffsetStore

__all__ = ["check_group_not_moved", "copy_reset_to_group", "mirrors_to_group"]

logger = logging.getLogger(__name__)


def mirrors_to_group(store: OffsetStore) -> bool:
    """Whether ``store`` copies its offsets to the Kafka group (never the group store itself)."""
    from dstream_kafka.stores.kafka_group import KafkaGroupOffsetStore
    from dstream_kafka.stores.structured_streaming import StructuredStreamingCheckpoint

    return (getattr(store, "_mirror", None) is not None
            and not isinstance(store, (KafkaGroupOffsetStore, StructuredStreamingCheckpoint)))


def copy_reset_to_group(store: OffsetStore, group: str, offsets: Mapping[TopicPartition, int], servers: str,
                        timeout: float) -> None:
    """Commit a reset's offsets to the Kafka group the store mirrors to (best effort: warns)."""
    if not mirrors_to_group(store):
        return
    from kafka.structs import OffsetAndMetadata

    from dstream_kafka.stores.kafka_group import GroupCommitter
    from dstream_kafka.stores.mirror import MIRROR_METADATA

    ms = int(timeout * 1000)
    committer = GroupCommitter({"bootstrap.servers": servers}, ms)
    try:
        committer.commit(group, {tp: OffsetAndMetadata(o, MIRROR_METADATA, -1) for tp, o in offsets.items()}, ms)
    except Exception as exc:  # the store is reset; only the lag copy is behind
        logger.warning("The reset is written, but copying it to Kafka group %r failed (%s: %s); lag tools show "
                       "the old offsets until the stream's next batch", group, type(exc).__name__, exc)
    finally:
        committer.close()


def check_group_not_moved(consumer: Any, store: OffsetStore, group: str,
                          stored: Mapping[TopicPartition, int]) -> None:
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

    from dstream_kafka.stores.mirror import MIRROR_METADATA

    if not mirrors_to_group(store) or consumer.config.get("group_id") != group:
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
