"""Kafka faults under a running stream, on a three-broker KRaft cluster.

The ``kafka3`` cluster has replication factor 3 and ``min.insync.replicas=2``; the producer
sends with ``acks=all``. Each test runs a direct stream with the SQLite store whose output
writes every record's ``(partition, offset, value)`` into the store's transaction, so the
results table is exactly what was committed. A test passes when, for every partition, the
table holds each offset of ``[0, log end)`` exactly once (nothing lost, nothing doubled) and
every value the producer had acknowledged is in it. The PreferBrokers test instead runs a
driver program (``tests/cluster/driver.py``) on the standalone cluster, whose executors share
hosts with two of the brokers, and checks where each partition's tasks ran.

Every test leaves all three brokers running (the cluster is shared by the session).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetStores
from dstream_kafka.operate.services.kafka import KafkaCluster
from dstream_kafka.streaming import StreamingContext

from support import STRING_DESERIALIZER, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.cluster]

PARTITIONS = 4
BATCH = 0.5  # seconds
#: The outage test's batches: the stream generates every batch time of the outage once the
#: brokers return (as Spark's timer does), and on two loaded cores each job of that backlog
#: takes about as long as a 0.5 s interval, so the catch-up would never end.
OUTAGE_BATCH = 2.0  # seconds


class AckedProducer:
    """Sends numbered values with ``acks=all`` from a thread until stopped; keeps the acked ones."""

    def __init__(self, cluster: KafkaCluster, topic: str, per_second: int = 200) -> None:
        from kafka import KafkaProducer

        self._producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, acks="all",
                                       retries=2**31 - 1, request_timeout_ms=15000,
                                       max_block_ms=120000, linger_ms=5)
        self._topic = topic
        self._pause = 1.0 / per_second
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.acked: set[str] = set()
        self.failed = 0
        self._thread = threading.Thread(target=self._run, name="acked-producer", daemon=True)

    def start(self) -> "AckedProducer":
        self._thread.start()
        return self

    def _run(self) -> None:
        number = 0
        while not self._stop.is_set():
            value = str(number)
            number += 1
            future = self._producer.send(self._topic, value=value.encode())
            future.add_callback(lambda _meta, v=value: self._ack(v))
            future.add_errback(lambda _error: self._fail())
            time.sleep(self._pause)

    def _ack(self, value: str) -> None:
        with self._lock:
            self.acked.add(value)

    def _fail(self) -> None:
        with self._lock:
            self.failed += 1

    def count(self) -> int:
        with self._lock:
            return len(self.acked)

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(timeout=120)
        self._producer.close(timeout=30)


class RecordingStream:
    """A direct stream with the SQLite store that commits each record into ``seen``."""

    def __init__(self, ssc: StreamingContext, cluster: KafkaCluster, topic: str, group: str,
                 db: Path, location: Any = LocationStrategies.PreferConsistent) -> None:
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS seen "
                         "(part INTEGER NOT NULL, off INTEGER NOT NULL, value TEXT NOT NULL)")
        conn.close()
        self.db = db
        self.group = group
        self.store = OffsetStores.sqlite(str(db))
        params = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
                  "auto.offset.reset": "earliest", "value.deserializer": STRING_DESERIALIZER}
        self.stream = KafkaUtils.createDirectStream(
            ssc, location, ConsumerStrategies.Subscribe([topic], params),
            offsetStore=self.store)
        self.batches_with_records = 0
        self.stream.foreachRDD(self._save)

    def _save(self, batch_time: Any, rdd: Any) -> None:
        rows = rdd.map(lambda r: (r.partition, r.offset, r.value)).collect()
        with self.stream.transaction(batch_time) as tx:
            tx.executemany("INSERT INTO seen VALUES (?, ?, ?)", rows)
        if rows:
            self.batches_with_records += 1

    def committed(self) -> dict[int, int]:
        return {tp.partition: offset for tp, offset in self.store.load(self.group).items()}

    def rows(self) -> list[tuple[int, int, str]]:
        with sqlite3.connect(self.db) as conn:
            return [tuple(row) for row in conn.execute("SELECT part, off, value FROM seen")]


def leader_of(cluster: KafkaCluster, topic: str, partition: int) -> int:
    """The node id leading ``topic``/``partition`` now (-1 while there is none or no answer)."""
    return cluster.leaders(topic).get(partition, -1)


def start_all(cluster: KafkaCluster) -> None:
    """Start every stopped node at once: a KRaft quorum needs two voters up to elect anyone."""
    errors: list[BaseException] = []

    def start(node_id: int) -> None:
        try:
            cluster.start_broker(node_id, timeout=180)
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [threading.Thread(target=start, args=(n,)) for n in cluster.node_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


@pytest.fixture
def cluster(kafka3: KafkaCluster) -> Iterator[KafkaCluster]:
    """The shared three-broker cluster, every node running again after the test."""
    yield kafka3
    start_all(kafka3)


@pytest.fixture
def producing(cluster: KafkaCluster) -> Iterator[Callable[[str], AckedProducer]]:
    """Return ``start(topic)``: a started AckedProducer, stopped after the test if still running
    (a failed test must not leave one writing into the shared cluster for the rest of the run)."""
    started: list[AckedProducer] = []

    def start(topic: str) -> AckedProducer:
        started.append(AckedProducer(cluster, topic).start())
        return started[-1]

    yield start
    for producer in started:
        producer.stop()


@pytest.fixture
def topic(cluster: KafkaCluster, unique: Callable[[str], str]) -> str:
    name = unique("faults")
    cluster.create_topic(name, partitions=PARTITIONS, replication_factor=3)
    return name


def finish_and_check(cluster: KafkaCluster, producer: AckedProducer,
                     recording: RecordingStream, ssc: StreamingContext, topic: str,
                     acked_before: frozenset[str] = frozenset()) -> None:
    """Stop producing, wait for the stream to commit the log ends, check exactly once."""
    producer.stop()
    # Every partition's end: a partition between leaders is missing from a look-up.
    ends: dict[int, int] = {}
    wait_until(lambda: len(ends.update(cluster.end_offsets(topic)) or ends) == PARTITIONS,
               f"the end offsets of all {PARTITIONS} partitions", timeout=60, interval=0.5)
    assert sum(ends.values()) >= producer.count() > 0
    try:
        wait_until(lambda: recording.committed() == ends,
                   f"the stream to commit the log end offsets {ends}", timeout=180, interval=0.2)
    except AssertionError as error:
        raise AssertionError(f"{error}; committed {recording.committed()}, batches with records "
                             f"{recording.batches_with_records}, state {ssc.getState()}, last batch "
                             f"{recording.stream.lastProgress}") from None
    ssc.stop(stopSparkContext=False, stopGraceFully=True)
    rows = recording.rows()
    per_offset = Counter((part, off) for part, off, _ in rows)
    doubled = {key: n for key, n in per_offset.items() if n > 1}
    assert not doubled, f"records committed more than once: {sorted(doubled)[:10]}"
    for part, end in ends.items():
        have = {off for p, off in per_offset if p == part}
        assert have == set(range(end)), f"partition {part}: missing {sorted(set(range(end)) - have)[:10]}"
    assert producer.acked | acked_before <= {value for _, _, value in rows}


def test_a_stream_keeps_going_when_partition_leaders_stop_and_come_back(
        cluster: KafkaCluster, topic: str, make_ssc: Callable[..., StreamingContext],
        unique: Callable[[str], str], producing: Callable[[str], AckedProducer],
        tmp_path: Path) -> None:
    """Killing the leader of partition 0 mid-stream, then starting it again, loses and
    doubles nothing; PreferBrokers plans every batch through the leader elections."""
    ssc = make_ssc(BATCH)
    recording = RecordingStream(ssc, cluster, topic, unique("g"), tmp_path / "leaders.db",
                                LocationStrategies.PreferBrokers)
    producer = producing(topic)
    ssc.start()
    wait_until(lambda: recording.batches_with_records >= 2, "two batches with records")
    leader = leader_of(cluster, topic, 0)
    assert leader in cluster.node_ids
    cluster.stop_broker(leader, kill=True)
    wait_until(lambda: leader_of(cluster, topic, 0) not in (-1, leader),
               "a new leader of partition 0", timeout=60, interval=0.5)
    seen = recording.batches_with_records
    wait_until(lambda: recording.batches_with_records >= seen + 3,
               "three more batches with records after the election", timeout=120)
    cluster.start_broker(leader, timeout=180)
    seen = recording.batches_with_records
    wait_until(lambda: recording.batches_with_records >= seen + 3,
               "three more batches with records after the old leader returned", timeout=120)
    assert ssc.getState() == "ACTIVE"
    finish_and_check(cluster, producer, recording, ssc, topic)


def test_a_stream_keeps_going_after_one_broker_stops_for_good(
        cluster: KafkaCluster, topic: str, make_ssc: Callable[..., StreamingContext],
        unique: Callable[[str], str], producing: Callable[[str], AckedProducer],
        tmp_path: Path) -> None:
    """With one of three brokers gone for the rest of the run, acks=all still succeeds
    (two in-sync replicas) and the stream reads and commits every record exactly once."""
    ssc = make_ssc(BATCH)
    recording = RecordingStream(ssc, cluster, topic, unique("g"), tmp_path / "one-down.db")
    producer = producing(topic)
    ssc.start()
    wait_until(lambda: recording.batches_with_records >= 2, "two batches with records")
    gone = leader_of(cluster, topic, 1)
    cluster.stop_broker(gone)
    seen = recording.batches_with_records
    wait_until(lambda: recording.batches_with_records >= seen + 5,
               "five more batches with records with a broker gone", timeout=120)
    finish_and_check(cluster, producer, recording, ssc, topic)


@pytest.mark.slow  # a 15 s outage, the brokers' restart and the backlog: 60-130 s
def test_a_stream_rides_out_an_outage_of_the_whole_cluster_longer_than_one_lookup_within_its_bounds(  # noqa: E501
        cluster: KafkaCluster, topic: str, make_ssc: Callable[..., StreamingContext],
        unique: Callable[[str], str], producing: Callable[[str], AckedProducer],
        tmp_path: Path, spark_conf: Callable[[str, str], None]) -> None:
    """Every broker down for 15 s, longer than one look-up (lookupTimeout 10 s): the running
    stream retries its latest-offset look-up (bounded by (maxRetries + 1) x lookupTimeout,
    here 9 x 10 s) and, once the brokers are back, reads on from where it was, with nothing
    lost or doubled."""
    # The executors' poll timeout at 60 s instead of the suite's 10 s (Spark's default is
    # 120 s): the first reads after the restart wait for reconnections and leader elections,
    # which on two loaded cores took more than 10 s, and a local[2] task is not retried.
    spark_conf("spark.streaming.kafka.maxRetries", "8")
    spark_conf("spark.streaming.kafka.lookupTimeout", "10s")
    spark_conf("spark.streaming.kafka.consumer.poll.ms", "60000")
    ssc = make_ssc(OUTAGE_BATCH)
    recording = RecordingStream(ssc, cluster, topic, unique("g"), tmp_path / "outage.db")
    producer = producing(topic)
    ssc.start()
    wait_until(lambda: recording.batches_with_records >= 2, "two batches with records")
    producer.stop()  # no producer can write through a dead cluster; acked values are kept
    acked_before = frozenset(producer.acked)
    # Everything read and committed first: the outage then meets the stream in its look-up.
    # (A batch whose records are still being read when the brokers go fails its task after
    # the executor poll timeout instead, as a range that cannot be fetched does.)
    before = cluster.end_offsets(topic)
    wait_until(lambda: recording.committed() == before,
               f"the stream to commit {before} before the outage", timeout=120, interval=0.2)
    for node_id in cluster.node_ids:
        cluster.stop_broker(node_id)
    time.sleep(15)
    start_all(cluster)
    producer = producing(topic)
    seen = recording.batches_with_records
    wait_until(lambda: recording.batches_with_records >= seen + 3,
               "three batches with records after the outage", timeout=180)
    assert ssc.getState() == "ACTIVE"
    finish_and_check(cluster, producer, recording, ssc, topic, acked_before)


DRIVER = Path(__file__).resolve().parents[1] / "cluster" / "driver.py"


def _replicas(cluster: KafkaCluster, topic: str) -> dict[int, list[int]]:
    """Each partition's replica list, in Kafka's order (the order leader elections follow)."""
    [described] = cluster.admin().describe_topics([topic])
    return {p["partition_index"]: list(p["replica_nodes"]) for p in described["partitions"]}


@pytest.mark.slow  # a driver program on the standalone cluster through an election: 90-330 s
def test_prefer_brokers_moves_a_partition_to_the_executor_on_its_new_leader_s_host(
        cluster: KafkaCluster, spark_cluster: Any, topic: str, unique: Callable[[str], str],
        tmp_path: Path) -> None:
    """The brokers listen on 127.0.0.1, .2 and .3, the two executors on .2 and .3: each batch
    runs every partition on the executor of its leader's host. After the leader of one
    partition stops, the batches planned after the election run it on the executor of its new
    leader's host."""
    import json
    import subprocess
    import sys

    hosts = {node: cluster.host_of(node) for node in cluster.node_ids}
    executors = set(spark_cluster.worker_hosts)
    replicas = _replicas(cluster, topic)
    leaders = cluster.leaders(topic)
    # A partition led from an executor's host whose next replica is on the other executor's
    # host: stopping its leader moves it there (elections take the first in-sync replica).
    moving = next((p for p, nodes in sorted(replicas.items())
                   if hosts[leaders[p]] in executors and len(nodes) > 1
                   and hosts[[n for n in nodes if n != leaders[p]][0]] in executors), None)
    assert moving is not None, f"no partition to move: replicas {replicas}, leaders {leaders}"
    old, new = leaders[moving], [n for n in replicas[moving] if n != leaders[moving]][0]
    config = {"master": spark_cluster.master_url, "bootstrap": cluster.bootstrap_servers,
              "topic": topic, "partitions": PARTITIONS, "group": unique("g"), "seconds": 40,
              "per_batch": 20, "locality_wait": "60s"}
    path = tmp_path / "brokers.json"
    path.write_text(json.dumps(config))
    driver = subprocess.Popen([sys.executable, str(DRIVER), "brokers", str(path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=str(tmp_path))
    try:
        assert driver.stdout is not None
        lines: list[str] = []
        for line in driver.stdout:
            lines.append(line)
            if line.startswith("BATCH 2"):
                break
        stopped = time.time()
        cluster.stop_broker(old, kill=True)
        wait_until(lambda: leader_of(cluster, topic, moving) == new,
                   f"node {new} to lead partition {moving}", timeout=60, interval=0.5)
        elected = time.time()
        out, err = driver.communicate(timeout=300)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    lines += out.splitlines()
    results = [line for line in lines if line.startswith("RESULT ")]
    assert driver.returncode == 0 and results, f"driver exited {driver.returncode}:\n{err[-4000:]}"
    result = json.loads(results[-1][len("RESULT "):])
    assert sorted(result["executor_hosts"]) == sorted(executors)
    batches = result["batches"]
    timeline = [(round(b["batch_time"] - elected, 1), b["preferred"], b["ran"]) for b in batches]
    # Spark placed every task on the executor the stream preferred (60 s locality wait).
    assert all(b["ran"] == b["preferred"] for b in batches), timeline
    # Output began before the stop: planned with the old leader.
    before = [b for b in batches if b["started"] < stopped]
    # Planned (at or after its batch time) 2 s after the election: the driver's metadata has
    # the new leader, refreshed when its latest-offset look-up met the stopped broker.
    after = [b for b in batches if b["batch_time"] > elected + 2]
    assert len(before) >= 2 and len(after) >= 2, timeline
    key = str(moving)
    assert {b["ran"].get(key) for b in before} == {hosts[old]}, timeline
    assert {b["ran"].get(key) for b in after} == {hosts[new]}, timeline
    for b in after:  # and every other partition led from an executor's host runs there
        for part, host in b["ran"].items():
            lead = new if int(part) == moving else leaders[int(part)]
            if hosts[lead] in executors and lead != old:
                assert host == hosts[lead], timeline
