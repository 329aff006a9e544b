"""KafkaOffsetReader's offset look-ups that time out: the error says why, from fresh metadata."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError

from dstream_kafka.client.offset_reader import KafkaOffsetReader
from dstream_kafka.errors import BrokerTimeoutError, UnknownTopicPartitionError
from dstream_kafka.offsets import TopicPartition


@pytest.fixture
def listening() -> Iterator[str]:
    """``host:port`` of a socket that accepts connections (a broker that is up)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield f"127.0.0.1:{server.getsockname()[1]}"


class _Consumer:
    """A consumer whose offset look-ups time out; ``topics`` is its fresh metadata."""

    def __init__(self, topics: dict[str, set[int]] | None, servers: str) -> None:
        self._topics = topics
        self.config = {"bootstrap_servers": servers}
        self.metadata_asked = False

    def beginning_offsets(self, tps: Any, timeout_ms: int) -> Any:
        raise KafkaTimeoutError("Failed to get offsets by timestamps in 30000 ms")

    end_offsets = beginning_offsets

    def topics(self) -> set[str]:
        self.metadata_asked = True
        if self._topics is None:
            raise KafkaTimeoutError("no metadata either")
        return set(self._topics)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return (self._topics or {}).get(topic)


def test_a_look_up_of_a_deleted_topic_that_times_out_says_the_partition_is_gone(
        listening: str) -> None:
    reader = KafkaOffsetReader(consumer=_Consumer({"kept": {0}}, listening))
    with pytest.raises(UnknownTopicPartitionError,
                       match=rf"gone-0 no longer exists .*{listening}: it was deleted") as raised:
        reader.latest([TopicPartition("kept", 0), TopicPartition("gone", 0)])
    assert isinstance(raised.value.__cause__, KafkaTimeoutError)


def test_a_look_up_that_times_out_while_the_partition_exists_is_a_broker_timeout(
        listening: str) -> None:
    reader = KafkaOffsetReader(consumer=_Consumer({"kept": {0}}, listening))
    with pytest.raises(BrokerTimeoutError, match=r"did not answer the offsets of kept-0 within"):
        reader.earliest([TopicPartition("kept", 0)])


def test_a_look_up_that_times_out_without_metadata_is_a_broker_timeout(listening: str) -> None:
    reader = KafkaOffsetReader(consumer=_Consumer(None, listening))
    with pytest.raises(BrokerTimeoutError, match="did not answer"):
        reader.latest([TopicPartition("kept", 0)])


def test_a_look_up_that_times_out_with_no_broker_listening_asks_for_no_metadata() -> None:
    # kafka-python's metadata fetch waits without a bound: with every broker down it would
    # hold the caller (the lag timer among them) until one comes back
    consumer = _Consumer({"kept": {0}}, "127.0.0.1:9")
    with pytest.raises(BrokerTimeoutError, match="did not answer"):
        KafkaOffsetReader(consumer=consumer).latest([TopicPartition("gone", 0)])
    assert not consumer.metadata_asked
