"""Driver look-ups that need the group coordinator give up with a clear error, never hang."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError

from dstream_kafka.direct_stream import API_TIMEOUT_MS, DirectKafkaInputDStream
from dstream_kafka.errors import BrokerTimeoutError
from dstream_kafka.offsets import TopicPartition


class _SilentCoordinator:
    """A driver consumer whose group coordinator never answers (kafka-python's timeouts)."""

    def __init__(self) -> None:
        self.timeouts: list[Any] = []

    def position(self, tp: Any, timeout_ms: Any = None) -> int:
        self.timeouts.append(timeout_ms)
        raise KafkaTimeoutError("Timeout waiting for coordinator")

    def committed(self, tp: Any, timeout_ms: Any = None) -> int:
        self.timeouts.append(timeout_ms)
        raise KafkaTimeoutError("Timeout waiting for coordinator")


def _stream(consumer: Any) -> DirectKafkaInputDStream:
    stream = object.__new__(DirectKafkaInputDStream)  # only the state _start_offset reads
    stream.consumerStrategy = SimpleNamespace(offsets={})
    stream._unassigned_offsets = {}
    stream._group_id = "g"
    stream._consumer_lock = threading.RLock()
    stream._consumer = consumer
    return stream


@pytest.mark.parametrize("first_start, what", [(True, "starting position"), (False, "committed offset")])
def test_an_unanswered_offset_lookup_raises_broker_timeout_naming_the_partition(first_start, what) -> None:
    consumer = _SilentCoordinator()
    with pytest.raises(BrokerTimeoutError, match=f"did not return the {what} of t-3 within 60 s"):
        _stream(consumer)._start_offset(TopicPartition("t", 3), first_start)
    assert consumer.timeouts == [API_TIMEOUT_MS]
