"""A second driver refused on a checkpoint store leaves nothing a later driver takes for its own.

Two store instances on one checkpoint folder stand for two drivers: the second plans a batch from
a stale view, the first commits, the second's commit is refused. Its planned batch must neither
stay behind as "pending" nor be re-run by a later start, nor block ``offsets reset``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from dstream_kafka.errors import OffsetFencedError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import CheckpointOffsetStore, OffsetStores

G = "group-1"
TP = TopicPartition("events", 0)


def r(start: int, end: int) -> OffsetRange:
    return OffsetRange("events", 0, start, end)


@pytest.fixture
def drivers(tmp_path: Path) -> Iterator[Any]:
    """``make()``: a new store (a driver) on the test's one checkpoint folder."""
    stores: list[CheckpointOffsetStore] = []

    def make() -> CheckpointOffsetStore:
        store = OffsetStores.checkpoint(str(tmp_path / "checkpoint"), also_commit_to_kafka_group=False)
        stores.append(store)
        return store

    yield make
    for store in stores:
        store.close()


@pytest.fixture
def stale_plan(drivers: Any) -> tuple[CheckpointOffsetStore, Path]:
    """(second driver, folder): the first driver committed batch 1000 over 0-10 after the second
    loaded the empty store; the second then planned batch 1100 over 0-10 (not committed yet)."""
    first, second = drivers(), drivers()
    assert second.load(G) == {}
    first.plan(G, 1000, [r(0, 10)])
    first.commit(G, 1000, [r(0, 10)])
    second.plan(G, 1100, [r(0, 10)])
    return second, Path(second.path)


def test_a_driver_refused_at_commit_removes_its_planned_batch(
        drivers: Any, stale_plan: tuple[CheckpointOffsetStore, Path]) -> None:
    second, folder = stale_plan
    with pytest.raises(OffsetFencedError):
        second.commit(G, 1100, [r(0, 10)])
    assert not (folder / "offsets" / "1100").exists()
    assert drivers().pending(G) is None


def test_a_planned_batch_that_does_not_continue_the_newest_commit_is_not_pending(
        drivers: Any, stale_plan: tuple[CheckpointOffsetStore, Path], caplog: pytest.LogCaptureFixture) -> None:
    _, folder = stale_plan  # the second driver died before its commit: its plan stays
    with caplog.at_level(logging.WARNING, logger="dstream_kafka.stores.checkpoint"):
        pending = drivers().pending(G)
    assert pending is None
    assert any("Ignoring planned batch 1100" in m and "events-0 planned from 0, stored at 10" in m
               for m in caplog.messages)


def test_a_reset_is_not_refused_for_a_planned_batch_no_driver_can_commit(
        drivers: Any, stale_plan: tuple[CheckpointOffsetStore, Path]) -> None:
    store = drivers()
    store.reset(G, {TP: 4}, expected={TP: 10}, user="u", host="h")
    assert store.load(G) == {TP: 4}


def test_a_planned_batch_that_continues_the_newest_commit_is_still_re_run(drivers: Any) -> None:
    first = drivers()
    first.plan(G, 1000, [r(0, 10)])
    first.commit(G, 1000, [r(0, 10)])
    first.plan(G, 1100, [r(10, 15)])  # the driver dies here
    pending = drivers().pending(G)
    assert pending is not None and pending.batch_time_ms == 1100 and pending.ranges == (r(10, 15),)


def test_a_stream_started_over_a_refused_drivers_plan_reads_on_without_re_running_it(
        kafka: Any, make_ssc: Callable[..., Any], unique: Callable[[str], str], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    from support import string_params, wait_until

    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [f"v{i}" for i in range(20)], partition=0)
    tp, folder = TopicPartition(topic, 0), str(tmp_path / "shared")
    first, second = (OffsetStores.checkpoint(folder, also_commit_to_kafka_group=False) for _ in range(2))
    assert second.load(group) == {}
    first.plan(group, 1000, [OffsetRange(topic, 0, 0, 10)])
    first.commit(group, 1000, [OffsetRange(topic, 0, 0, 10)])
    second.plan(group, 1100, [OffsetRange(topic, 0, 0, 10)])  # the refused driver's plan stays
    first.close()
    second.close()
    ssc = make_ssc(0.3)
    seen: list[int] = []
    strategy = ConsumerStrategies.Assign([tp], string_params(kafka, group, **{"auto.offset.reset": "earliest"}))
    with OffsetStores.checkpoint(folder) as store, caplog.at_level(logging.WARNING):
        KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent, strategy, offsetStore=store).foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: r.offset).collect()))
        ssc.start()
        try:
            wait_until(lambda: store.load(group) == {tp: 20} or ssc.getState() == "STOPPED", "the commit of 10-20")
            ssc.awaitTerminationOrTimeout(0)  # raises the error that stopped the stream, if any
        finally:
            ssc.stop(stopSparkContext=False)
    assert sorted(seen) == list(range(10, 20))
    assert not any("Re-running uncommitted batch" in m for m in caplog.messages)
