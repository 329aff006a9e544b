"""The kafka-python backend (the default): ``kafka.KafkaConsumer`` assign, seek and poll."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from dstream_kafka.backends import OffsetOutOfRange
from dstream_kafka.record import ConsumerRecord

__all__ = ["KafkaPythonBackend"]

log = logging.getLogger(__name__)


def _to_record(r: Any) -> ConsumerRecord:
    # tuple.__new__ skips the NamedTuple constructor's argument handling: this runs per record.
    return tuple.__new__(
        ConsumerRecord,
        (
            r.topic,
            r.partition,
            r.offset,
            r.timestamp,
            r.timestamp_type,
            r.key,
            r.value,
            tuple(r.headers) if r.headers else (),
        ),
    )


class KafkaPythonBackend:
    """A ``kafka.KafkaConsumer`` assigned to one partition.

    The client gets no ``group_id``: it only reads assigned partitions and never commits, and
    with a group id kafka-python would look up the group coordinator on every poll.
    """

    def __init__(self, topic: str, partition: int, config: Mapping[str, Any]) -> None:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KafkaTopicPartition
        from kafka.serializer import DeserializeWrapper, Deserializer

        self.topic_partition = KafkaTopicPartition(topic, partition)
        config = dict(config)
        config["group_id"] = None
        for name in ("key_deserializer", "value_deserializer"):
            # Wrapped here so kafka-python does not warn about plain callables.
            decode = config.get(name)
            if decode is not None and not isinstance(decode, Deserializer):
                config[name] = DeserializeWrapper(decode)
        consumer = KafkaConsumer(**config)
        consumer.assign([self.topic_partition])
        self._consumer = consumer

    def seek(self, offset: int) -> None:
        self._consumer.seek(self.topic_partition, offset)

    def fetch(self, timeout_ms: int) -> list[ConsumerRecord]:
        from kafka.errors import OffsetOutOfRangeError

        try:
            batch = self._consumer.poll(timeout_ms=timeout_ms).get(self.topic_partition)
        except OffsetOutOfRangeError:
            raise OffsetOutOfRange() from None
        return [_to_record(r) for r in batch] if batch else []

    def position(self) -> int:
        # kafka-python moves the position past control batches and aborted batches.
        position = self._consumer.position(self.topic_partition, timeout_ms=5000)
        return -1 if position is None else position

    def watermarks(self, timeout_ms: int) -> tuple[int | None, int | None]:
        tp = self.topic_partition
        earliest = self._consumer.beginning_offsets([tp], timeout_ms=timeout_ms)[tp]
        latest = self._consumer.end_offsets([tp], timeout_ms=timeout_ms)[tp]
        return earliest, latest

    def close(self) -> None:
        self._consumer.close(autocommit=False, timeout_ms=5000)
