"""Where partitions start and resume, tested with a scripted driver consumer and store."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.plan.consumer_strategy import ConsumerStrategies
from dstream_kafka.errors import ConfigurationError, DataLossError, PartitionsRevokedError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.plan.positions import PartitionPositions
from dstream_kafka.stores.base import PlannedBatch

PARAMS = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


class _Consumer:
    """A driver consumer over a log per partition: ``logs[tp] = (earliest, latest)``."""

    def __init__(self, logs: dict[TopicPartition, tuple[int, int]],
                 committed: dict[TopicPartition, int] | None = None,
                 positions: dict[TopicPartition, int] | None = None) -> None:
        self.logs = logs
        self.committed_offsets = committed or {}
        self.positions = positions or {}
        self.seeks: dict[Any, int] = {}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {tp.partition for tp in self.logs if tp.topic == topic}

    def vanished(self, parts: Any) -> set[TopicPartition]:
        return {tp for tp in parts if tp not in self.logs}

    def beginning_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return {tp: self.logs[TopicPartition(*tp)][0] for tp in tps}

    def end_offsets(self, tps: list[Any]) -> dict[Any, int]:
        return {tp: self.logs[TopicPartition(*tp)][1] for tp in tps}

    def committed(self, tp: Any, timeout_ms: Any = None) -> int | None:
        return self.committed_offsets.get(TopicPartition(*tp))

    def position(self, tp: Any, timeout_ms: Any = None) -> int:
        return self.positions[TopicPartition(*tp)]

    def seek(self, tp: Any, offset: int) -> None:
        self.seeks[TopicPartition(*tp)] = offset


class _Store:
    def __init__(self, stored: dict[TopicPartition, int], pending: PlannedBatch | None = None) -> None:
        self.stored = stored
        self.planned = pending
        self.losses: list[tuple[Any, ...]] = []
        self.loaded_topics: Any = None

    def load(self, group_id: str, topics: Any = None) -> dict[TopicPartition, int]:
        self.loaded_topics = topics
        return dict(self.stored)

    keeps_group_offsets = False

    def pending(self, group_id: str) -> PlannedBatch | None:
        return self.planned

    def last_reset(self, group_id: str) -> None:
        return None

    def record_data_loss(self, group_id: str, tp: TopicPartition, lost_from: int,
                         lost_until: int, batch_time_ms: int | None) -> None:
        self.losses.append((group_id, tp, lost_from, lost_until))


def _positions(fail_on_data_loss: bool = True, offsets: dict[Any, int] | None = None) -> PartitionPositions:
    strategy = ConsumerStrategies.Subscribe(["t"], PARAMS, offsets)
    return PartitionPositions(strategy, group_id="g", store_group="g",
                              fail_on_data_loss=fail_on_data_loss,
                              find_vanished=lambda consumer, parts: consumer.vanished(parts))


def _resume(positions: PartitionPositions, consumer: _Consumer, store: Any,
            assigned: set[TopicPartition]) -> None:
    stored = positions.load(store)
    positions.start(consumer, store, stored, assigned)


def test_a_resume_continues_at_the_stored_offsets_and_seeks_the_driver_there() -> None:
    consumer, store = _Consumer({T0: (0, 50), T1: (0, 50)}), _Store({T0: 10, T1: 20})
    positions = _positions()
    _resume(positions, consumer, store, {T0, T1})
    assert positions.current == {T0: 10, T1: 20} == consumer.seeks
    assert store.loaded_topics == ["t"]


def test_a_first_start_takes_explicit_offsets_then_kafkas_position() -> None:
    consumer = _Consumer({T0: (0, 50), T1: (0, 50)}, positions={T1: 7})
    positions = _positions(offsets={T0: 3})
    _resume(positions, consumer, None, {T0, T1})
    assert positions.current == {T0: 3, T1: 7}


def test_a_first_start_without_a_position_names_auto_offset_reset() -> None:
    consumer = _Consumer({T0: (0, 50)})  # position() raises KeyError: no reset policy
    with pytest.raises(ConfigurationError, match="auto.offset.reset"):
        _resume(_positions(), consumer, None, {T0})


def test_a_stored_offset_before_the_log_start_is_data_loss() -> None:
    consumer, store = _Consumer({T0: (30, 50)}), _Store({T0: 10})
    with pytest.raises(DataLossError, match="earliest available 30"):
        _resume(_positions(), consumer, store, {T0})


def test_without_fail_on_data_loss_the_loss_is_recorded_and_skipped() -> None:
    consumer, store = _Consumer({T0: (30, 50)}), _Store({T0: 10})
    positions = _positions(fail_on_data_loss=False)
    _resume(positions, consumer, store, {T0})
    assert positions.current == {T0: 30} and store.losses == [("g", T0, 10, 30)]


def test_a_stored_offset_past_the_log_end_always_fails() -> None:
    consumer, store = _Consumer({T0: (0, 5)}), _Store({T0: 10})
    with pytest.raises(DataLossError):
        _resume(_positions(fail_on_data_loss=False), consumer, store, {T0})


def test_a_stored_partition_not_assigned_yet_continues_at_its_stored_offset_later() -> None:
    consumer, store = _Consumer({T0: (0, 50), T1: (0, 50)}, committed={T1: 2}), _Store({T0: 10, T1: 20})
    positions = _positions()
    _resume(positions, consumer, store, {T0})
    assert positions.current == {T0: 10} and positions.unassigned == {T1: 20}
    positions.track(consumer, {T0, T1})
    assert positions.current == {T0: 10, T1: 20} and not positions.unassigned


def test_a_stored_partition_that_vanished_is_data_loss() -> None:
    consumer, store = _Consumer({T0: (0, 50)}), _Store({T0: 10, T2: 20})
    with pytest.raises(DataLossError, match="t-2 .* no longer exists"):
        _resume(_positions(), consumer, store, {T0})


def test_without_a_store_a_new_partition_starts_at_its_committed_offset_else_its_first() -> None:
    consumer = _Consumer({T0: (0, 50), T1: (0, 50), T2: (4, 50)}, committed={T1: 6}, positions={T0: 1})
    positions = _positions()
    _resume(positions, consumer, None, {T0})
    positions.track(consumer, {T0, T1, T2})
    assert positions.current == {T0: 1, T1: 6, T2: 4}


def test_with_a_store_a_new_partition_starts_at_its_first_offset_not_the_groups() -> None:
    consumer = _Consumer({T0: (0, 50), T1: (0, 50), T2: (4, 50)}, committed={T1: 6})
    positions = _positions()
    _resume(positions, consumer, _Store({T0: 1}), {T0})
    positions.track(consumer, {T0, T1, T2})
    assert positions.current == {T0: 1, T1: 0, T2: 4}


@pytest.mark.parametrize(("reset", "start"), [("earliest", 3), ("latest", 50)])
def test_an_empty_store_starts_at_auto_offset_reset_not_the_groups_committed_offset(
        reset: str, start: int) -> None:
    consumer = _Consumer({T0: (3, 50)}, committed={T0: 40}, positions={T0: 40})
    strategy = ConsumerStrategies.Subscribe(["t"], {**PARAMS, "auto.offset.reset": reset})
    positions = PartitionPositions(strategy, group_id="g", store_group="g", fail_on_data_loss=True)
    _resume(positions, consumer, _Store({}), {T0})
    assert positions.current == {T0: start}


def test_an_empty_store_warns_naming_the_groups_offsets_and_the_option_that_takes_them(
        caplog: pytest.LogCaptureFixture) -> None:
    consumer = _Consumer({T0: (0, 50), T1: (0, 50)}, committed={T1: 40})
    positions = _positions()
    with caplog.at_level("WARNING", logger="dstream_kafka.plan.positions"):
        _resume(positions, consumer, _Store({T0: 5}), {T0, T1})
    warning, = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "t-1 at 40" in warning and """'startingOffsets': '{"t":{"1":40}}'""" in warning
    assert positions.current[T1] == 0


def test_a_revoked_partition_fails_naming_it() -> None:
    consumer = _Consumer({T0: (0, 50), T1: (0, 50)})
    positions = _positions()
    _resume(positions, consumer, _Store({T0: 1, T1: 1}), {T0, T1})
    with pytest.raises(PartitionsRevokedError, match="t', partition=1"):
        positions.track(consumer, {T0})


def test_a_tracked_partition_whose_topic_was_deleted_fails_as_data_loss_naming_the_topic() -> None:
    consumer = _Consumer({T0: (0, 50), T1: (0, 50)})
    positions = _positions()
    _resume(positions, consumer, _Store({T0: 1, T1: 1}), {T0, T1})
    consumer.logs = {}  # the topic is deleted; the group's next assignment has nothing
    with pytest.raises(DataLossError, match="t-0 \\(at offset 1\\), t-1 \\(at offset 1\\) no longer "
                                            "exist in Kafka: topic 't' was deleted"):
        positions.track(consumer, set())


U0 = TopicPartition("u", 0)


def _two_topics_t_deleted() -> tuple[_Consumer, PartitionPositions, _Store]:
    """A stream (failOnDataLoss=False) at t-0: 7 and u-0: 3, after topic t was deleted."""
    consumer = _Consumer({T0: (0, 50), U0: (0, 50)})
    positions = PartitionPositions(ConsumerStrategies.Subscribe(["t", "u"], PARAMS), group_id="g",
                                   store_group="g", fail_on_data_loss=False,
                                   find_vanished=lambda consumer, parts: consumer.vanished(parts))
    store = _Store({T0: 7, U0: 3})
    _resume(positions, consumer, store, {T0, U0})
    del consumer.logs[T0]
    return consumer, positions, store


def test_a_deleted_topic_with_fail_on_data_loss_off_is_recorded_and_no_longer_tracked() -> None:
    consumer, positions, store = _two_topics_t_deleted()
    positions.track(consumer, {U0}, store)
    assert positions.current == {U0: 3}
    assert store.losses == [("g", T0, 7, 7)]


def test_a_given_up_partition_still_assigned_is_not_started_again() -> None:
    consumer, positions, store = _two_topics_t_deleted()
    positions.lose([T0], store)
    positions.track(consumer, {T0, U0}, store)  # no rebalance yet: T0 is still assigned
    assert positions.current == {U0: 3}


def test_the_pending_batch_is_re_run_once_with_its_own_ranges_and_time() -> None:
    pending = PlannedBatch(1000, (OffsetRange("t", 0, 5, 9), OffsetRange("t", 1, 2, 4)))
    consumer = _Consumer({T0: (0, 50), T1: (0, 50)})
    positions = _positions()
    _resume(positions, consumer, _Store({T0: 5}, pending), {T0})
    replay = positions.take_replay({T0: 50})
    assert replay == (1000, {T0: 9, T1: 4})
    assert positions.ranges_to(replay[1]) == [OffsetRange("t", 0, 5, 9), OffsetRange("t", 1, 2, 4)]
    positions.advance(replay[1], {T0: 50}, replaying=True)
    assert positions.current == {T0: 9} and positions.unassigned == {T1: 4}
    assert positions.take_replay({T0: 50}) is None


def test_a_deleted_topic_read_to_its_last_known_end_is_given_up_without_data_loss() -> None:
    consumer = _Consumer({T0: (0, 50), T1: (0, 50)})
    positions = _positions()
    store = _Store({T0: 1, T1: 1})
    _resume(positions, consumer, store, {T0, T1})
    positions.note_ends({T0: 9, T1: 9})
    positions.advance({T0: 9, T1: 9}, {T0, T1}, replaying=False)  # the batch reading up to the end
    consumer.logs = {}
    positions.track(consumer, set(), store)
    assert positions.current == {} and store.losses == []


def test_a_deleted_topic_with_records_past_the_position_fails_naming_the_last_known_end() -> None:
    consumer = _Consumer({T0: (0, 50)})
    positions = _positions()
    _resume(positions, consumer, _Store({T0: 1}), {T0})
    positions.note_ends({T0: 9})
    consumer.logs = {}
    with pytest.raises(DataLossError, match="t-0 \\(at offset 1\\).*last known end offsets: t-0 9"):
        positions.track(consumer, set())


def test_an_empty_store_given_explicit_offsets_does_not_warn_about_the_groups(
        caplog: pytest.LogCaptureFixture) -> None:
    consumer = _Consumer({T0: (0, 50)}, committed={T0: 40})
    with caplog.at_level("WARNING", logger="dstream_kafka.plan.positions"):
        _resume(_positions(offsets={T0: 7}), consumer, _Store({}), {T0})
    assert not [r for r in caplog.records if "holds committed offsets" in r.getMessage()]


def test_an_empty_store_with_auto_offset_reset_none_names_the_fix() -> None:
    strategy = ConsumerStrategies.Subscribe(["t"], {**PARAMS, "auto.offset.reset": "none"})
    positions = PartitionPositions(strategy, group_id="g", store_group="g", fail_on_data_loss=True)
    with pytest.raises(ConfigurationError, match="startingOffsets option"):
        _resume(positions, _Consumer({T0: (0, 50)}, committed={T0: 40}), _Store({}), {T0})
