"""Crash tests: a real driver process SIGKILLed mid-stream, restarted, and its effects counted.

Each trial (:mod:`tests.crash.harness`) runs :mod:`tests.crash.driver` as its own process (own
SparkContext, JVM and Python workers, killed together as one process group) against the
session's real broker, PostgreSQL, ZooKeeper and HBase while records keep arriving, kills it twice,
restarts it and finally lets it finish. CI runs one trial per store: its first kill hits the
store's worst window on purpose (the driver's test-only ``CRASH_AT`` hook), its second is drawn
from a fixed seed. A driver start costs 5-10 s on two cores, so the many seeded random trials
are the campaign's job: ``python -m tests.crash.campaign`` (docs/development/testing.rst, "Crash tests").
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests.crash` from any working directory

from tests.crash.harness import Services, TrialSpec, run_trial  # noqa: E402

from support import poll_as_member, wait_until  # noqa: E402

# each trial starts, SIGKILLs and restarts a driver program three times: about 35 s
pytestmark = pytest.mark.slow

#: Seed of the random kills (the campaign uses "<seed>-<trial>").
SEED = "ci-1"


@pytest.fixture
def services(request: pytest.FixtureRequest, kafka: Any) -> Services:
    """The session's services; PostgreSQL, ZooKeeper and HBase start only for their own stores."""
    store = request.node.callspec.params.get("store") if hasattr(request.node, "callspec") else None
    return Services(kafka,
                    postgres=request.getfixturevalue("postgres") if store == "postgres" else None,
                    zookeeper=request.getfixturevalue("zookeeper") if store == "zookeeper" else None,
                    hbase=request.getfixturevalue("hbase") if store == "hbase" else None)


@pytest.mark.parametrize("store, worst", [
    ("sqlite", "after-output:1"),   # the transaction committed, the stream did not know yet
    ("postgres", "mid-output:1"),   # half the rows written inside the open transaction
])
def test_transactional_stores_apply_every_record_exactly_once_across_kills(
        store: str, worst: str, services: Services, tmp_path: Path) -> None:
    """Killed anywhere (also inside the transaction, or after it but before the stream knew),
    every record's row is in the results table exactly once at the end."""
    result = run_trial(services, TrialSpec(store, SEED, plans=(worst, "random")), tmp_path / "trial")
    assert result.kills >= 1 and not result.errors, result.describe()
    assert (result.lost, result.duplicated) == (0, 0), result.describe()


@pytest.mark.parametrize("store, worst", [
    ("kafka", "after-output:1"),     # the batch's effects written, its offsets not committed
    ("zookeeper", "after-output:2"),
])
def test_at_least_once_stores_lose_nothing_and_replay_only_the_uncommitted_batch(
        store: str, worst: str, services: Services, tmp_path: Path) -> None:
    """Nothing is lost, and every duplicate is a re-run of the one batch that was output but not
    committed when the driver died."""
    result = run_trial(services, TrialSpec(store, SEED, plans=(worst, "random")), tmp_path / "trial")
    assert result.kills >= 1 and not result.errors, result.describe()
    assert (result.lost, result.outside) == (0, 0), result.describe()
    assert result.duplicated > 0, result.describe()  # the worst kill really hit its window


@pytest.mark.parametrize("store", ["hbase"])
def test_the_hbase_store_keeps_one_result_row_per_record_and_replays_only_the_uncommitted_batch(
        store: str, services: Services, tmp_path: Path) -> None:
    """The first kill comes after a batch's results are in HBase and its line is in the effects
    file, before its offsets commit. The replay overwrites the rows (keyed by the record), so the
    HBase results table ends with exactly one row per record; the effects file outside HBase is
    at-least-once: nothing lost, duplicates only from the one uncommitted batch."""
    result = run_trial(services, TrialSpec(store, SEED, plans=("after-output:1", "random")), tmp_path / "trial")
    assert result.kills >= 1 and not result.errors, result.describe()
    assert (result.rows_lost, result.rows_duplicated) == (0, 0), result.describe()
    assert (result.lost, result.outside) == (0, 0), result.describe()
    assert result.duplicated > 0, result.describe()  # the worst kill really hit its window: a replay


def test_the_checkpoint_store_reruns_exactly_the_batch_that_was_output_when_the_driver_died(
        services: Services, tmp_path: Path) -> None:
    """The first run dies after a batch's output with many batches planned ahead (write-ahead
    log); the second re-runs it, outputs the next and dies between its commit claim and its
    commit file. The third must re-run *that* batch over its ranges and complete its own claim,
    not re-run a plan left over from the first run: records keep arriving and a batch takes up
    to 1000, so those ranges differ. Nothing is lost; duplicates are those re-runs only."""
    spec = TrialSpec("checkpoint", SEED, plans=("after-output:1", "in-commit:2"), max_per_batch=1000)
    result = run_trial(services, spec, tmp_path / "trial")
    assert result.kills == 2 and not result.errors, result.describe()
    assert (result.lost, result.outside, result.replay_mismatch) == (0, 0, 0), result.describe()
    assert result.duplicated > 0, result.describe()


def test_after_a_rerun_the_checkpoint_store_never_offers_a_plan_of_the_dead_driver(tmp_path: Path) -> None:
    """The write-ahead log alone (no Spark): a driver dies with batches 1 and 2 planned; its
    successor re-runs 1, plans 3 from 1's end, commits 1 and dies too. The next restart must
    re-run 3 (what that driver output), not 2 (planned by the first driver, never run)."""
    from dstream_kafka import OffsetRange, OffsetStores

    def ranges(start: int, end: int) -> list[OffsetRange]:
        return [OffsetRange("events", 0, start, end)]

    folder, group = tmp_path / "checkpoint", "g"
    first = OffsetStores.checkpoint(folder)
    first.plan(group, 1_000, ranges(0, 10))
    first.plan(group, 2_000, ranges(10, 20))
    second = OffsetStores.checkpoint(folder)
    rerun = second.pending(group)
    assert rerun is not None and rerun.batch_time_ms == 1_000
    second.plan(group, 1_000, rerun.ranges)
    second.plan(group, 3_000, ranges(10, 25))
    second.commit(group, 1_000, rerun.ranges)
    third = OffsetStores.checkpoint(folder).pending(group)
    assert third is not None and (third.batch_time_ms, list(third.ranges)) == (3_000, ranges(10, 25))


class GroupHolder:
    """Another live member of a consumer group (an old driver still running, a killed one not
    yet expired): it holds its share of the partitions until :meth:`leave`."""

    def __init__(self, kafka: Any, topic: str, group: str) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                                      enable_auto_commit=False, auto_offset_reset="earliest")
        self.consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():  # polling keeps it in the group and through rebalances
            poll_as_member(self.consumer)

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}

    def leave(self) -> None:
        self._stop.set()
        self._thread.join()
        self.consumer.close(autocommit=False)


def test_partitions_assigned_after_the_start_resume_from_the_offset_store(
        kafka: Any, sc: Any, tmp_path: Path, unique: Any) -> None:
    """A restarted driver that gets a partition only after its start, because another member
    of the group held it, reads it from the store's offset, not from the beginning (Kafka's
    committed offset, which a SQLite store never moves)."""
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange, OffsetStores
    from dstream_kafka.streaming import StreamingContext

    topic, group = unique("late"), unique("g")
    kafka.create_topic(topic, partitions=2)
    for p in (0, 1):
        kafka.produce(topic, [f"{p}-{i}" for i in range(20)], partition=p)
    db = tmp_path / "offsets.db"
    with OffsetStores.sqlite(db) as store:  # a previous run committed the first 10 of each
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 10), OffsetRange(topic, 1, 0, 10)])
    holder = GroupHolder(kafka, topic, group)
    wait_until(lambda: holder.assignment() == {0, 1}, "the other member to hold both partitions")
    ssc = StreamingContext(sc, 0.2)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params),
                                           offsetStore=OffsetStores.sqlite(db))
    seen: list[tuple[int, int]] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: (r.partition, r.offset)).collect()))
    try:
        ssc.start()  # joins the group: the other member keeps one partition
        # the holder's thread takes its new assignment when it handles the rebalance's answer
        wait_until(lambda: len(holder.assignment()) == 1, "the other member to keep one partition")
        holder.leave()
        expected = [(p, o) for p in (0, 1) for o in range(10, 20)]
        wait_until(lambda: len(seen) >= len(expected) or ssc.getState() == "STOPPED", "the 20 new records")
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
        ssc.awaitTerminationOrTimeout(0)  # raises the error that stopped the stream, if any
    finally:
        ssc.stop(stopSparkContext=False)
    assert sorted(seen) == expected
