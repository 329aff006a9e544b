"""Driver look-ups give up with a clear error, never hang; the latest offsets are retried."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError

from dstream_kafka.plan.consumer_strategy import ConsumerStrategies
from dstream_kafka.client.latest_offsets import REFRESH_LEADER_BACKOFF_MS, latest_offsets
from dstream_kafka.errors import BrokerTimeoutError, ConfigurationError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.plan.positions import PartitionPositions
from dstream_kafka.plan.start_positions import API_TIMEOUT_MS


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


def _positions() -> PartitionPositions:
    strategy = ConsumerStrategies.Subscribe(["t"], {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"})
    return PartitionPositions(strategy, group_id="g", store_group="g", fail_on_data_loss=True)


@pytest.mark.parametrize("first_start, what", [(True, "starting position"), (False, "committed offset")])
def test_an_unanswered_offset_lookup_raises_broker_timeout_naming_the_partition(first_start, what) -> None:
    consumer = _SilentCoordinator()
    with pytest.raises(BrokerTimeoutError, match=f"did not return the {what} of t-3 within 60 s"):
        _positions().start_offset(consumer, TopicPartition("t", 3), first_start)
    assert consumer.timeouts == [API_TIMEOUT_MS]


class _FlakyEnds:
    """A driver consumer whose end-offset look-up fails ``failures`` times first."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.timeouts: list[Any] = []

    def end_offsets(self, tps: list[Any], timeout_ms: Any = None) -> dict[Any, int]:
        self.calls += 1
        self.timeouts.append(timeout_ms)
        if self.calls <= self.failures:
            raise KafkaTimeoutError("Failed to get offsets by times in 305000 ms")
        return {tp: 42 for tp in tps}


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_the_latest_offsets_look_up_is_tried_max_retries_more_times(retries, monkeypatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr("dstream_kafka.plan.direct_stream.time.sleep", sleeps.append)
    consumer = _FlakyEnds(failures=retries)
    assert latest_offsets(consumer, [TopicPartition("t", 0)], retries) == {TopicPartition("t", 0): 42}
    assert consumer.calls == retries + 1
    assert sleeps == [REFRESH_LEADER_BACKOFF_MS / 1000.0] * retries


def test_the_error_of_the_last_try_is_raised(monkeypatch) -> None:
    monkeypatch.setattr("dstream_kafka.plan.direct_stream.time.sleep", lambda s: None)
    consumer = _FlakyEnds(failures=3)
    with pytest.raises(BrokerTimeoutError) as caught:
        latest_offsets(consumer, [TopicPartition("t", 0)], retries=2)
    assert isinstance(caught.value.__cause__, KafkaTimeoutError)
    assert consumer.calls == 3


def test_a_look_up_that_never_succeeds_names_the_brokers_and_the_keys_bounding_it(monkeypatch) -> None:
    monkeypatch.setattr("dstream_kafka.plan.direct_stream.time.sleep", lambda s: None)
    with pytest.raises(BrokerTimeoutError, match=(
            r"Kafka at h1:9092 did not return the latest offsets of t-0 in 3 tries of up to "
            r"5000 ms each \(KafkaTimeoutError: .*spark.streaming.kafka.maxRetries, "
            r"spark.streaming.kafka.retryBackoff and spark.streaming.kafka.lookupTimeout")):
        latest_offsets(_FlakyEnds(failures=9), [TopicPartition("t", 0)], retries=2,
                       timeout_ms=5000, servers="h1:9092")


def test_each_try_of_the_look_up_waits_at_most_the_lookup_timeout(monkeypatch) -> None:
    monkeypatch.setattr("dstream_kafka.plan.direct_stream.time.sleep", lambda s: None)
    consumer = _FlakyEnds(failures=1)
    latest_offsets(consumer, [TopicPartition("t", 0)], retries=1, timeout_ms=1234)
    assert consumer.timeouts == [1234, 1234]


def test_the_pause_between_tries_is_the_given_backoff(monkeypatch) -> None:
    sleeps: list[float] = []
    monkeypatch.setattr("dstream_kafka.plan.direct_stream.time.sleep", sleeps.append)
    latest_offsets(_FlakyEnds(failures=2), [TopicPartition("t", 0)], retries=2, backoff_ms=1500)
    assert sleeps == [1.5, 1.5]


def test_a_failed_look_up_of_a_deleted_partition_reports_it_without_retrying(monkeypatch) -> None:
    from dstream_kafka.client.latest_offsets import PartitionsGone as _PartitionsGone

    monkeypatch.setattr("dstream_kafka.plan.direct_stream.time.sleep", lambda s: None)
    consumer = _FlakyEnds(failures=1)
    with pytest.raises(_PartitionsGone) as caught:
        latest_offsets(consumer, [TopicPartition("t", 0), TopicPartition("gone", 0)], retries=5,
                       find_vanished=lambda parts: {tp for tp in parts if tp.topic == "gone"})
    assert caught.value.partitions == {TopicPartition("gone", 0)}
    assert consumer.calls == 1


def test_kafka_pythons_key_error_for_a_partition_that_left_the_metadata_is_checked_for_deletion(
        monkeypatch) -> None:
    from dstream_kafka.client.latest_offsets import PartitionsGone as _PartitionsGone

    class _EndsOfAGoneTopic:
        def end_offsets(self, partitions: Any, timeout_ms: int) -> Any:
            raise KeyError(partitions[0])  # what kafka-python 3.0 raises for a deleted topic

    monkeypatch.setattr("dstream_kafka.plan.direct_stream.time.sleep", lambda s: None)
    with pytest.raises(_PartitionsGone) as caught:
        latest_offsets(_EndsOfAGoneTopic(), [TopicPartition("gone", 0)], retries=0,
                       find_vanished=lambda parts: set(parts))
    assert caught.value.partitions == {TopicPartition("gone", 0)}


def test_default_api_timeout_ms_in_kafka_params_bounds_the_coordinator_lookups() -> None:
    strategy = ConsumerStrategies.Subscribe(
        ["t"], {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "default.api.timeout.ms": "2500"})
    positions = PartitionPositions(strategy, group_id="g", store_group="g", fail_on_data_loss=True)
    consumer = _SilentCoordinator()
    with pytest.raises(BrokerTimeoutError, match=r"within 2\.5 s .*default\.api\.timeout\.ms"):
        positions.start_offset(consumer, TopicPartition("t", 3), True)
    assert consumer.timeouts == [2500]


@pytest.mark.parametrize("value", ["0", "-1", "soon", 1.5, True])
def test_a_bad_default_api_timeout_ms_is_refused_naming_the_key(value: object) -> None:
    strategy = ConsumerStrategies.Subscribe(
        ["t"], {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "default.api.timeout.ms": value})
    with pytest.raises(ConfigurationError, match="default.api.timeout.ms must be a whole number"):
        PartitionPositions(strategy, group_id="g", store_group="g", fail_on_data_loss=True)


class _DeadBroker:
    """end_offsets as kafka-python's against a dead broker: waits its timeout, then times out."""

    def __init__(self) -> None:
        self.timeouts: list[int] = []

    def end_offsets(self, partitions: Any, timeout_ms: int) -> Any:
        from kafka.errors import KafkaTimeoutError

        self.timeouts.append(timeout_ms)
        time.sleep(timeout_ms / 1000.0)
        raise KafkaTimeoutError(f"no answer in {timeout_ms} ms")


def test_a_stop_abandons_an_unanswered_look_up_within_one_slice() -> None:
    from dstream_kafka.errors import StreamingStateError
    from dstream_kafka.client.latest_offsets import MAX_SLICE_MS

    stopping = threading.Event()
    started = time.monotonic()
    threading.Timer(3.5, stopping.set).start()  # in the third slice (1 s, 2 s, then 4 s)
    with pytest.raises(StreamingStateError, match="look-up was abandoned"):
        latest_offsets(_DeadBroker(), [TopicPartition("t", 0)], retries=1, timeout_ms=30_000,
                       stopping=stopping)
    assert time.monotonic() - started < 3.5 + MAX_SLICE_MS / 1000.0


def test_without_a_stop_a_sliced_try_still_waits_the_whole_lookup_timeout_in_growing_slices() -> None:
    consumer = _DeadBroker()
    with pytest.raises(BrokerTimeoutError):
        latest_offsets(consumer, [TopicPartition("t", 0)], retries=0, timeout_ms=2_500,
                       stopping=threading.Event())
    assert consumer.timeouts == [1_000, 1_500] or (  # 1 s, then the rest of the 2.5 s try
        sum(consumer.timeouts) >= 2_400 and consumer.timeouts[0] == 1_000)
