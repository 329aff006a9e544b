"""Hardening of the offset stores and checkpoint folders (issue #18, items 1, 2, 5 and 9; issue #37,
items 2 and 11).

Every test runs against the real service: a Kafka broker, a ZooKeeper server (a private one
where the test stops it), PostgreSQL, or a checkpoint folder on a real (read-only bind-mounted)
file system.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from dstream_kafka.errors import ConfigurationError, CorruptCheckpointError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import OffsetStores

G = "group-1"


def r(start: int, end: int, partition: int = 0, topic: str = "events") -> OffsetRange:
    return OffsetRange(topic, partition, start, end)


def bounded(call: Callable[[], Any], seconds: float) -> tuple[float, BaseException | None, Any]:
    """Run ``call`` in a thread; return (seconds taken, exception, result). Fails the test when
    the call is still running after ``seconds`` (the hang the bound must prevent)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["result"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["error"] = exc

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    took = time.monotonic() - started
    assert not thread.is_alive(), f"the call was still running after {seconds} s"
    return took, box.get("error"), box.get("result")


# -- item 5: user Kafka params pass through the one params builder without collisions ------------

@pytest.mark.parametrize("extra", [{"request.timeout.ms": "5000"}, {"client.id": "my-app"}],
                         ids=["request.timeout.ms", "client.id"])
def test_a_kafka_group_store_loads_with_a_user_setting_the_store_also_sets(kafka, unique, extra):
    store = OffsetStores.kafka({"bootstrap.servers": kafka.bootstrap_servers, **extra}, timeout_ms=20_000)
    try:
        assert store.load(unique("g")) == {}
    finally:
        store.close()


@pytest.mark.parametrize("extra", [{"request.timeout.ms": "15000"}, {"client.id": "my-app"}],
                         ids=["request.timeout.ms", "client.id"])
def test_a_kafka_group_store_records_data_loss_with_a_user_setting_the_store_also_sets(kafka, unique, extra):
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic)
    store = OffsetStores.kafka({"bootstrap.servers": kafka.bootstrap_servers, **extra},
                               data_loss_topic=unique("loss"), timeout_ms=20_000)
    try:
        store.commit(group, 1000, [r(0, 4, topic=topic)])
        store.record_data_loss(group, TopicPartition(topic, 0), 4, 9, batch_time_ms=2000)
        assert store.load(group) == {TopicPartition(topic, 0): 9}
        assert [(x.lost_from, x.lost_until) for x in store.data_losses(group)] == [(4, 9)]
    finally:
        store.close()


def test_a_kafka_group_store_commits_with_a_user_client_id(kafka, unique):
    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic)
    store = OffsetStores.kafka({"bootstrap.servers": kafka.bootstrap_servers, "client.id": "my-app",
                                "request.timeout.ms": "15000"}, timeout_ms=20_000)
    try:
        store.commit(group, 1000, [r(0, 3, topic=topic)])
        assert store.load(group) == {TopicPartition(topic, 0): 3}
    finally:
        store.close()


def test_a_kafka_group_store_commits_through_a_member_left_stranded_mid_rebalance(kafka, unique):
    """kafka-python 3.0.12 can leave a subscribed consumer REBALANCING with no rejoin wanted
    (a metadata-asked rejoin whose assignment was computed before the join finished); its
    commits then fail with RebalanceInProgressError. The store finishes the rejoin and commits."""
    from kafka import KafkaConsumer
    from kafka.coordinator.base import MemberState
    from support import poll_as_member

    topic, group = unique("t"), unique("g")
    kafka.create_topic(topic)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    store = OffsetStores.kafka({"bootstrap.servers": kafka.bootstrap_servers}, timeout_ms=20_000)
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while not consumer.assignment() and time.monotonic() < deadline:
            poll_as_member(consumer)  # the join itself can strand (see above)
        assert consumer.assignment()
        store.bind_consumer(consumer, threading.Lock())
        consumer._coordinator.state = MemberState.REBALANCING  # the state the bug leaves
        store.commit(group, 1000, [r(0, 3, topic=topic)])
        assert store.load(group) == {TopicPartition(topic, 0): 3}
    finally:
        store.close()
        consumer.close()


# -- item 9: checkpoint folders the store cannot write ---------------------------------------------

def _mount(*args: str) -> bool:
    return subprocess.run(["mount", *args], capture_output=True).returncode == 0


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Path]:
    """A folder on a read-only bind mount (root ignores chmod 0555, not a read-only mount)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "existing").mkdir()
    if not (_mount("--bind", str(folder), str(folder)) and _mount("-o", "remount,bind,ro", str(folder))):
        subprocess.run(["umount", str(folder)], capture_output=True)
        pytest.skip("a read-only bind mount needs root with CAP_SYS_ADMIN")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A folder on a 64 KiB tmpfs, to fill up."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    if not _mount("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)):
        pytest.skip("mounting a tmpfs needs root with CAP_SYS_ADMIN")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def test_a_checkpoint_store_on_a_read_only_file_system_raises_offset_store_error(read_only):
    store = OffsetStores.checkpoint(read_only / "checkpoint")
    with pytest.raises(OffsetStoreError, match=r"(?s)ro/checkpoint.*read-only"):
        store.load(G)


def test_a_checkpoint_store_in_an_existing_read_only_folder_raises_offset_store_error(read_only):
    store = OffsetStores.checkpoint(read_only / "existing")
    with pytest.raises(OffsetStoreError, match=r"(?s)ro/existing.*read-only"):
        store.load(G)


def test_a_checkpoint_store_under_a_regular_file_raises_offset_store_error(tmp_path):
    (tmp_path / "file").write_text("x")
    store = OffsetStores.checkpoint(tmp_path / "file" / "checkpoint")
    with pytest.raises(OffsetStoreError, match=r"(?s)file/checkpoint.*not a directory"):
        store.load(G)


def test_a_checkpoint_store_at_a_regular_file_raises_offset_store_error(tmp_path):
    (tmp_path / "file").write_text("x")
    store = OffsetStores.checkpoint(tmp_path / "file")
    with pytest.raises(OffsetStoreError, match="not a directory"):
        store.load(G)


def test_a_checkpoint_store_whose_commits_folder_is_a_file_raises_offset_store_error(tmp_path):
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / "commits").write_text("x")
    store = OffsetStores.checkpoint(tmp_path / "cp")
    with pytest.raises(OffsetStoreError, match="commits"):
        store.load(G)


def test_a_full_file_system_fails_the_commit_with_offset_store_error_and_keeps_the_last_commit(tiny_fs):
    store = OffsetStores.checkpoint(tiny_fs / "checkpoint")
    store.commit(G, 1000, [r(0, 5)])
    filler = tiny_fs / "filler"
    with pytest.raises(OSError):  # fill the file system to the last block
        with open(filler, "wb") as f:
            while True:
                f.write(b"x" * 4096)
                f.flush()
    ranges = [r(5, 9, partition=p, topic="t" * 200) for p in range(64)] + [r(5, 9)]
    with pytest.raises(OffsetStoreError, match="No space left"):
        store.commit(G, 2000, ranges)
    filler.unlink()
    assert OffsetStores.checkpoint(tiny_fs / "checkpoint").load(G) == {TopicPartition("events", 0): 5}


def test_a_streaming_checkpoint_under_a_regular_file_raises_a_clear_error(make_ssc, tmp_path):
    (tmp_path / "file").write_text("x")
    ssc = make_ssc()
    with pytest.raises(OffsetStoreError, match=r"(?s)file/checkpoint.*not a directory"):
        ssc.checkpoint(str(tmp_path / "file" / "checkpoint"))


def test_a_streaming_checkpoint_on_a_read_only_file_system_raises_a_clear_error(make_ssc, read_only):
    ssc = make_ssc()
    with pytest.raises(OffsetStoreError, match="read-only"):
        ssc.checkpoint(str(read_only / "checkpoint"))


# -- item 2: a commit file that contradicts itself, its predecessor or the offsets log -------------

def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Hand-edit a checkpoint store file: version line, then the JSON document."""
    version, _, body = path.read_text().partition("\n")
    doc = json.loads(body)
    change(doc)
    path.write_text(f"{version}\n{json.dumps(doc)}\n")


@pytest.fixture
def committed(tmp_path: Path) -> Path:
    """A checkpoint directory whose stream planned and committed batches 1000 and 2000 over
    events-0 [0, 10) then [10, 20), with events-1 at 7 since batch 1000."""
    folder = tmp_path / "checkpoint"
    store = OffsetStores.checkpoint(folder)
    for t, ranges in ((1000, [r(0, 10), r(0, 7, partition=1)]), (2000, [r(10, 20)])):
        store.plan(G, t, ranges)
        store.commit(G, t, ranges)
    store.close()
    return folder


@pytest.mark.parametrize("offset", [28, 5], ids=["ahead-skips-records", "behind-re-reads-records"])
def test_a_commit_file_whose_offsets_contradict_its_own_ranges_is_refused(committed, offset):
    _edit(committed / "commits" / "2000", lambda doc: doc["offsets"]["events"].update({"0": offset}))
    with pytest.raises(CorruptCheckpointError,
                       match=r"(?s)commits/2000.*topic events partition 0.*own range ends at 20"):
        OffsetStores.checkpoint(committed).load(G)


def test_a_commit_file_whose_ranges_and_offsets_agree_but_contradict_the_offsets_log_is_refused(committed):
    def change(doc: dict[str, Any]) -> None:
        doc["ranges"][0]["untilOffset"] = 28
        doc["offsets"]["events"]["0"] = 28

    _edit(committed / "commits" / "2000", change)
    with pytest.raises(CorruptCheckpointError, match=r"(?s)commits/2000.*offsets/2000"):
        OffsetStores.checkpoint(committed).load(G)


def test_a_commit_file_that_changes_a_partition_outside_its_batch_is_refused(committed):
    _edit(committed / "commits" / "2000", lambda doc: doc["offsets"]["events"].update({"1": 2}))
    with pytest.raises(CorruptCheckpointError, match=r"(?s)commits/2000.*topic events partition 1.*commits/1000"):
        OffsetStores.checkpoint(committed).load(G)


def test_a_commit_file_that_drops_a_partition_of_its_predecessor_is_refused(committed):
    _edit(committed / "commits" / "2000", lambda doc: doc["offsets"]["events"].pop("1"))
    with pytest.raises(CorruptCheckpointError, match=r"(?s)commits/2000.*topic events partition 1"):
        OffsetStores.checkpoint(committed).load(G)


def test_deleting_every_commit_file_while_the_offsets_log_remains_is_refused(committed):
    for path in (committed / "commits").iterdir():
        path.unlink()
    store = OffsetStores.checkpoint(committed)
    with pytest.raises(CorruptCheckpointError, match=r"(?s)checkpoint/commits.*offsets/2000.*never reset"):
        store.load(G)
    with pytest.raises(CorruptCheckpointError):
        store.pending(G)


def test_deleting_a_commit_file_a_later_plan_follows_is_refused(committed):
    OffsetStores.checkpoint(committed).plan(G, 3000, [r(20, 25)])
    (committed / "commits" / "2000").unlink()
    with pytest.raises(CorruptCheckpointError, match=r"(?s)offsets/3000.*batch 2000.*commits/1000"):
        OffsetStores.checkpoint(committed).load(G)


def test_deleting_only_the_newest_commit_file_re_runs_its_batch_from_the_offsets_log(committed):
    # Indistinguishable from a crash between the plan and the commit: at-least-once re-run.
    (committed / "commits" / "2000").unlink()
    store = OffsetStores.checkpoint(committed)
    assert store.load(G) == {TopicPartition("events", 0): 10, TopicPartition("events", 1): 7}
    assert store.pending(G).ranges == (r(10, 20),)


def test_a_first_batch_planned_but_never_committed_is_still_pending(tmp_path):
    store = OffsetStores.checkpoint(tmp_path / "checkpoint")
    store.plan(G, 1000, [r(0, 10)])
    restarted = OffsetStores.checkpoint(tmp_path / "checkpoint")
    assert restarted.load(G) == {}
    assert restarted.pending(G).ranges == (r(0, 10),)


def test_a_batch_planned_before_the_previous_commit_is_still_pending_after_a_crash(tmp_path):
    store = OffsetStores.checkpoint(tmp_path / "checkpoint")
    store.plan(G, 1000, [r(0, 10)])
    store.plan(G, 2000, [r(10, 15)])  # generated while batch 1000 ran
    store.commit(G, 1000, [r(0, 10)])
    restarted = OffsetStores.checkpoint(tmp_path / "checkpoint")
    assert restarted.load(G) == {TopicPartition("events", 0): 10}
    assert restarted.pending(G).ranges == (r(10, 15),)


def test_a_commit_after_a_recorded_data_loss_passes_the_cross_check(tmp_path):
    store = OffsetStores.checkpoint(tmp_path / "checkpoint")
    store.commit(G, 1000, [r(0, 10)])
    store.record_data_loss(G, TopicPartition("events", 0), 10, 40, batch_time_ms=2000)
    store.plan(G, 2000, [r(40, 45)])
    store.commit(G, 2000, [r(40, 45)])
    assert OffsetStores.checkpoint(tmp_path / "checkpoint").load(G) == {TopicPartition("events", 0): 45}


# -- issue #37 item 2: the checkpoint store applies the chain rule of the other stores -------------

def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def empty_newest(committed: Path) -> Path:
    """``committed`` plus an empty batch 3000, events-0 [20, 20), planned and committed."""
    store = OffsetStores.checkpoint(committed)
    store.plan(G, 3000, [r(20, 20)])
    store.commit(G, 3000, [r(20, 20)])
    store.close()
    return committed


def _skip_to_28(doc: dict[str, Any]) -> None:
    doc["ranges"][0].update(fromOffset=28, untilOffset=28)
    if "offsets" in doc:
        doc["offsets"]["events"]["0"] = 28


@pytest.mark.parametrize("files", [["commits"], ["commits", "offsets"]], ids=["commit", "commit-and-plan"])
def test_an_empty_newest_commit_edited_to_skip_records_is_refused_and_nothing_changes(empty_newest, files):
    for folder in files:
        _edit(empty_newest / folder / "3000", _skip_to_28)
    before = _snapshot(empty_newest)
    store = OffsetStores.checkpoint(empty_newest)
    for call in (lambda: store.load(G), lambda: store.pending(G), lambda: store.commit(G, 4000, [r(28, 30)])):
        with pytest.raises(CorruptCheckpointError) as caught:
            call()
        message = str(caught.value)
        assert re.search(r"commits/3000 is corrupt: topic events partition 0: its range starts at 28, but "
                         r"\S*commits/2000 ended at 20", message), message
        assert f"dstream-kafka offsets history --store checkpoint:{empty_newest} --group {G}" in message
        assert "restore the file" in message and "no offset was reset" in message
    assert _snapshot(empty_newest) == before
    # The command it names shows the commits as stored.
    assert [(h.batch_time_ms, h.ranges) for h in store.history(G, 2)] == [(3000, (r(28, 28),)),
                                                                        (2000, (r(10, 20),))]


def test_a_plan_file_edited_away_from_its_commit_is_refused(empty_newest):
    _edit(empty_newest / "offsets" / "3000", _skip_to_28)
    with pytest.raises(CorruptCheckpointError,
                       match=r"(?s)commits/3000 is corrupt: its ranges are not those planned in \S*offsets/3000 "
                             r"\(topic events partition 0: planned \[28, 28\), committed \[20, 20\)\)"):
        OffsetStores.checkpoint(empty_newest).load(G)


def test_a_newest_commit_whose_write_ahead_file_is_missing_is_refused(committed):
    (committed / "offsets" / "2000").unlink()
    before = _snapshot(committed)
    with pytest.raises(CorruptCheckpointError,
                       match=r"(?s)commits/2000 is corrupt: its write-ahead file \S*offsets/2000 is missing.*"
                             r"offsets history"):
        OffsetStores.checkpoint(committed).load(G)
    assert _snapshot(committed) == before


def test_a_commit_made_without_a_plan_writes_its_own_write_ahead_file(tmp_path):
    # Imports, resets and commits through the API plan nothing; the store plans them itself.
    folder = tmp_path / "checkpoint"
    store = OffsetStores.checkpoint(folder)
    store.commit(G, 1000, [r(0, 10)])
    store.reset(G, {TopicPartition("events", 0): 4}, expected={TopicPartition("events", 0): 10},
                user="u", host="h", batch_time_ms=2000)
    assert sorted(os.listdir(folder / "offsets")) == ["1000", "2000"]
    assert OffsetStores.checkpoint(folder).load(G) == {TopicPartition("events", 0): 4}


def test_an_import_that_stopped_before_its_commit_file_is_never_re_run_as_a_batch(committed):
    # The import wrote its write-ahead file, then died: a stream restart must not read the
    # records it meant to skip as a batch (a stream's own plan would be re-run).
    store = OffsetStores.checkpoint(committed)
    store.commit(G, 3000, [r(20, 28)])
    store.close()
    for name in ("3000", "2000.next"):
        (committed / "commits" / name).unlink()
    restarted = OffsetStores.checkpoint(committed)
    assert restarted.load(G) == {TopicPartition("events", 0): 20, TopicPartition("events", 1): 7}
    assert restarted.pending(G) is None


def test_a_newest_commit_of_0_1_0_without_a_write_ahead_file_is_still_read(committed):
    # 0.1.0 wrote no write-ahead file for imports and resets, and no "planned" key.
    _edit(committed / "commits" / "2000", lambda doc: doc.pop("planned"))
    (committed / "offsets" / "2000").unlink()
    assert OffsetStores.checkpoint(committed).load(G) == {TopicPartition("events", 0): 20,
                                                          TopicPartition("events", 1): 7}


# -- item 1: a store whose server stops answering fails the call within the store's timeout --------

@pytest.fixture
def private_zookeeper() -> Iterator[Any]:
    """A ZooKeeper server of this test alone, so that the test may stop it."""
    from tests.support.zookeeper import ZooKeeperServer

    server = ZooKeeperServer().start()
    yield server
    server.stop()


ZK_TIMEOUT = 5.0


@pytest.fixture
def zk_store_without_server(private_zookeeper: Any, unique: Callable[[str], str]) -> Iterator[Any]:
    """A ZooKeeper store (timeout 5 s) that committed one batch, then lost its server."""
    from kazoo.client import KazooClient

    # A fresh server's first session can take longer than 5 s on two busy cores (class
    # loading in its JVM): open and close one under a generous bound first.
    warm = KazooClient(hosts=private_zookeeper.hosts)
    warm.start(timeout=60)
    warm.stop()
    warm.close()
    store = OffsetStores.zookeeper(private_zookeeper.hosts, timeout=ZK_TIMEOUT)
    store.commit(G, 1000, [r(0, 5)])
    private_zookeeper.stop()
    yield store
    bounded(store.close, 3 * ZK_TIMEOUT)


@pytest.mark.parametrize("call", ["load", "commit", "history", "record_data_loss", "data_losses"])
def test_a_zookeeper_store_call_fails_within_its_timeout_when_the_server_stops(zk_store_without_server, call):
    store = zk_store_without_server
    calls = {
        "load": lambda: store.load(G),
        "commit": lambda: store.commit(G, 2000, [r(5, 9)]),
        "history": lambda: store.history(G),
        "record_data_loss": lambda: store.record_data_loss(G, TopicPartition("events", 0), 5, 9, 2000),
        "data_losses": lambda: store.data_losses(G),
    }
    took, error, _ = bounded(calls[call], 6 * ZK_TIMEOUT)
    assert isinstance(error, OffsetStoreError), error
    assert "ZooKeeper" in str(error) and "timeout" in str(error)
    assert took < 2 * ZK_TIMEOUT + 2


def test_a_zookeeper_store_closes_within_its_timeout_when_the_server_is_gone(zk_store_without_server):
    took, error, _ = bounded(zk_store_without_server.close, 6 * ZK_TIMEOUT)
    assert error is None and took < ZK_TIMEOUT + 2


def _zookeeper_stream(kafka: Any, zookeeper: Any, make_ssc: Callable[..., Any],
                      unique: Callable[[str], str]) -> tuple[Any, Any]:
    """A context of 0.5 s batches and a stream over a new topic of 5 records, offsets in
    ``zookeeper`` (timeout 5 s)."""
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

    topic = unique("t")
    kafka.create_topic(topic)
    kafka.send_messages(topic, {"a": 5})
    ssc = make_ssc(0.5)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
              "auto.offset.reset": "earliest"}
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe([topic], params),
        offsetStore=OffsetStores.zookeeper(zookeeper.hosts, timeout=ZK_TIMEOUT))
    return ssc, stream


def test_a_stream_whose_zookeeper_stops_fails_its_batch_clearly_and_stops_in_bounded_time(
        kafka, private_zookeeper, make_ssc, unique):
    from support import wait_until

    ssc, stream = _zookeeper_stream(kafka, private_zookeeper, make_ssc, unique)
    seen: list[Any] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.collect()))
    ssc.start()
    wait_until(lambda: len(seen) >= 5, "the first records")
    private_zookeeper.stop()
    with pytest.raises(OffsetStoreError, match=r"ZooKeeper.*(timeout|connection to ZooKeeper was lost)"):
        ssc.awaitTerminationOrTimeout(10 * ZK_TIMEOUT)
    took, error, _ = bounded(lambda: ssc.stop(stopSparkContext=False), 6 * ZK_TIMEOUT)
    assert error is None and took < 2 * ZK_TIMEOUT + 5


def test_a_stream_committing_after_its_zookeeper_is_gone_fails_within_the_timeout_and_stops(
        kafka, private_zookeeper, make_ssc, unique):
    ssc, stream = _zookeeper_stream(kafka, private_zookeeper, make_ssc, unique)
    gone = threading.Event()

    def output(rdd: Any) -> None:
        # The batch's commit comes after its output: stop ZooKeeper in the output and let the
        # client notice, so the commit is queued by a reconnecting client (the hang of #18).
        if rdd.count() and not gone.is_set():
            private_zookeeper.stop()
            time.sleep(3)
            gone.set()

    stream.foreachRDD(output)
    ssc.start()
    with pytest.raises(OffsetStoreError, match=r"ZooKeeper.*(timeout|connection to ZooKeeper was lost)"):
        ssc.awaitTerminationOrTimeout(60 + 6 * ZK_TIMEOUT)
    assert gone.is_set()
    took, error, _ = bounded(lambda: ssc.stop(stopSparkContext=False), 6 * ZK_TIMEOUT)
    assert error is None and took < 2 * ZK_TIMEOUT + 5


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), "5", None], ids=["zero", "negative", "inf", "str", "none"])
def test_a_zookeeper_store_refuses_a_timeout_that_bounds_nothing(zookeeper, timeout):
    with pytest.raises(ConfigurationError, match=rf"timeout.*{re.escape(repr(timeout))}.*timeout=15.0"):
        OffsetStores.zookeeper(zookeeper.hosts, timeout=timeout)


PG_TIMEOUT = 3.0


@pytest.fixture
def pg_store_behind_a_lock(postgres: Any, unique: Callable[[str], str]) -> Iterator[Any]:
    """A PostgreSQL store (timeout 3 s) whose offsets table another session holds locked."""
    prefix = "s_" + unique("s")[-8:] + "_"
    store = OffsetStores.postgres(table_prefix=prefix, timeout=PG_TIMEOUT, **postgres.dsn_params())
    store.commit(G, 1000, [r(0, 5)])
    store.close()
    blocker = postgres.connect()
    blocker.cursor().execute(f'LOCK TABLE "{prefix}offsets" IN ACCESS EXCLUSIVE MODE')
    store = OffsetStores.postgres(table_prefix=prefix, timeout=PG_TIMEOUT, **postgres.dsn_params())
    yield store
    blocker.rollback()
    blocker.close()
    store.close()


@pytest.mark.parametrize("call", ["load", "commit"])
def test_a_postgres_store_call_behind_a_held_lock_fails_within_its_timeout(pg_store_behind_a_lock, call):
    store = pg_store_behind_a_lock
    calls = {"load": lambda: store.load(G), "commit": lambda: store.commit(G, 2000, [r(5, 9)])}
    took, error, _ = bounded(calls[call], 10 * PG_TIMEOUT)
    assert isinstance(error, OffsetStoreError), error
    assert "timeout" in str(error) and took < 2 * PG_TIMEOUT + 2


def test_a_postgres_store_refuses_a_timeout_that_bounds_nothing(postgres):
    with pytest.raises(ConfigurationError, match=r"timeout.*-1.*timeout=30.0"):
        OffsetStores.postgres(timeout=-1, **postgres.dsn_params())


KAFKA_TIMEOUT_MS = 3000


@pytest.mark.parametrize("call", ["load", "commit", "record_data_loss", "data_losses"])
def test_a_kafka_group_store_call_without_a_broker_fails_within_its_timeout(unique, call):
    from dstream_kafka.operate.services.environment import free_port

    store = OffsetStores.kafka({"bootstrap.servers": f"127.0.0.1:{free_port()}"}, timeout_ms=KAFKA_TIMEOUT_MS)
    group = unique("g")
    calls = {
        "load": lambda: store.load(group),
        "commit": lambda: store.commit(group, 1000, [r(0, 5)]),
        "record_data_loss": lambda: store.record_data_loss(group, TopicPartition("events", 0), 0, 5, 1000),
        "data_losses": lambda: store.data_losses(group),
    }
    try:
        took, error, _ = bounded(calls[call], 20 * KAFKA_TIMEOUT_MS / 1000)
        assert isinstance(error, OffsetStoreError), repr(error)
        assert took < 2 * KAFKA_TIMEOUT_MS / 1000 + 3
    finally:
        bounded(store.close, 10)


# -- issue #37 item 11: the group store bootstraps as createRDD does, within bootstrap.timeout.ms ---

SASL_SECRET = "S3cr3t-PW-37"


@pytest.mark.parametrize("call", ["load", "data_losses"])
def test_a_kafka_group_store_speaking_sasl_to_a_plaintext_listener_fails_as_create_rdd_within_bootstrap_timeout(
        kafka, unique, call):
    # timeout_ms stays at its 30 s default: the params' bootstrap.timeout.ms bounds the bootstrap.
    store = OffsetStores.kafka({
        "bootstrap.servers": kafka.bootstrap_servers, "bootstrap.timeout.ms": "2000",
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                            f'username="u" password="{SASL_SECRET}";'})
    group = unique("g")
    try:
        took, error, _ = bounded(lambda: getattr(store, call)(group), 30)
        assert isinstance(error, OffsetStoreError), repr(error)
        text = str(error)
        # createRDD's words (client/param_checks.bootstrap_failure): the servers, the protocol
        # in use and the fix, whether the broker refused the handshake or the bound ran out.
        assert f"Could not reach any Kafka broker at bootstrap.servers={kafka.bootstrap_servers}" in text
        assert "security.protocol=SASL_PLAINTEXT" in text
        assert "set security.protocol to the listener's protocol" in text
        assert SASL_SECRET not in text
        assert took < 2.0 + 2.5, took  # one bootstrap.timeout.ms, not timeout_ms (was 32 s)
    finally:
        bounded(store.close, 10)
