"""KafkaOffsetReader's offset look-ups that time out: the error says why, from fresh metadata."""

from __future__ import annotations

from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError

from dstream_kafka.client.offset_reader import KafkaOffsetReader
from dstream_kafka.errors import BrokerTimeoutError, UnknownTopicPartitionError
from dstream_kafka.offsets import TopicPartition


class _Consumer:
    """A consumer whose offset look-ups time out; ``topics`` is its fresh metadata."""

    config = {"bootstrap_servers": "127.0.0.1:9"}

    def __init__(self, topics: dict[str, set[int]] | None) -> None:
        self._topics = topics

    def beginning_offsets(self, tps: Any, timeout_ms: int) -> Any:
        raise KafkaTimeoutError("Failed to get offsets by timestamps in 30000 ms")

    end_offsets = beginning_offsets

    def topics(self) -> set[str]:
        if self._topics is None:
            raise KafkaTimeoutError("no metadata either")
        return set(self._topics)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return (self._topics or {}).get(topic)


def test_a_look_up_of_a_deleted_topic_that_times_out_says_the_partition_is_gone() -> None:
    reader = KafkaOffsetReader(consumer=_Consumer({"kept": {0}}))
    with pytest.raises(UnknownTopicPartitionError,
                       match=r"gone-0 no longer exists .*127.0.0.1:9: it was deleted") as raised:
        reader.latest([TopicPartition("kept", 0), TopicPartition("gone", 0)])
    assert isinstance(raised.value.__cause__, KafkaTimeoutError)


def test_a_look_up_that_times_out_while_the_partition_exists_is_a_broker_timeout() -> None:
    reader = KafkaOffsetReader(consumer=_Consumer({"kept": {0}}))
    with pytest.raises(BrokerTimeoutError, match=r"did not answer the offsets of kept-0 within"):
        reader.earliest([TopicPartition("kept", 0)])


def test_a_look_up_that_times_out_without_metadata_is_a_broker_timeout() -> None:
    reader = KafkaOffsetReader(consumer=_Consumer(None))
    with pytest.raises(BrokerTimeoutError, match="did not answer"):
        reader.latest([TopicPartition("kept", 0)])
