"""The exactly-once Kafka output when its transaction is fenced, on the real broker, per
backend: by the broker, because the transaction outlived ``transaction.timeout.ms``, or by a
second driver of the same application. Either way the driver fails with the project's error
(chained from the client's raw one), saying which it was and what to do, and nothing of the
fenced transaction is visible to ``read_committed`` readers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import pytest
from kafka import KafkaConsumer, TopicPartition

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka.errors import KafkaWriteError, OutputFencedError
from dstream_kafka.write import KafkaOutput

from support import wait_until

# Every test runs once per client backend: the output follows the consumers' backend.
pytestmark = pytest.mark.usefixtures("backend")

RECORDS = 10
HALF = 5
PROBE = Path(__file__).with_name("eos_driver_probe.py")


def _pause_half_way(started: str, go: str) -> Callable[[Any], Any]:
    """A map function that, at input offset ``HALF``, creates ``started`` and waits (at most
    3 minutes) for ``go``: records 0..4 are then sent inside the task's open transaction."""

    def pause(record: Any) -> Any:
        # Runs on an executor, which cannot import this module: everything it needs is here.
        import os
        import time

        if record.offset == HALF and not os.path.exists(go):
            open(started, "w").close()
            deadline = time.monotonic() + 180
            while not os.path.exists(go) and time.monotonic() < deadline:
                time.sleep(0.05)
        return (record.key, record.value)

    return pause


def _ends(kafka: Any, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of ``topic``-0: equal when no transaction is open."""
    tp = TopicPartition(topic, 0)
    out = []
    for isolation in ("read_committed", "read_uncommitted"):
        consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers,
                                 isolation_level=isolation)
        try:
            out.append(int(consumer.end_offsets([tp])[tp]))
        finally:
            consumer.close()
    return out[0], out[1]


def _read_committed(kafka: Any, topic: str) -> Counter[bytes]:
    stable, _ = _ends(kafka, topic)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=None,
                             enable_auto_commit=False, isolation_level="read_committed",
                             auto_offset_reset="earliest")
    tp = TopicPartition(topic, 0)
    values: Counter[bytes] = Counter()
    try:
        consumer.assign([tp])
        deadline = time.monotonic() + 60
        while consumer.position(tp) < stable:
            assert time.monotonic() < deadline, f"reading {topic} did not reach {stable}"
            for records in consumer.poll(timeout_ms=500).values():
                values.update(r.value for r in records)
    finally:
        consumer.close(autocommit=False)
    return values


def _group_offset(kafka: Any, group: str, topic: str) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, isolation_level="read_committed")
    try:
        return consumer.committed(TopicPartition(topic, 0))
    finally:
        consumer.close(autocommit=False)


def _topics(kafka: Any, unique: Any) -> tuple[str, str, str]:
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source)
    kafka.create_topic(target)
    kafka.produce(source, [(f"k{i}", f"v{i}") for i in range(RECORDS)], partition=0)
    return source, target, group


def _raw_fenced_error_in(error: BaseException) -> bool:
    """Whether the chain of ``error`` quotes a client's own fencing error."""
    text = str(error.__cause__)
    return any(name in text for name in ("ProducerFencedError", "InvalidProducerEpochError",
                                         "_FENCED", "PRODUCER_FENCED"))


def test_a_transaction_that_outlives_transaction_timeout_ms_fails_saying_so_and_how_to_fix_it(
        kafka: Any, sc: Any, unique: Any, tmp_path: Path) -> None:
    source, target, group = _topics(kafka, unique)
    started, go = str(tmp_path / "started"), str(tmp_path / "go")
    rdd = KafkaUtils.createRDD(sc, {"bootstrap.servers": kafka.bootstrap_servers,
                                    "group.id": group}, [OffsetRange(source, 0, 0, RECORDS)],
                               LocationStrategies.PreferConsistent)
    output = KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers,
                          "transaction.timeout.ms": 2000}, topic=target,
                         guarantee="exactly-once")
    pool = ThreadPoolExecutor(max_workers=1)
    attempt = pool.submit(output.write, rdd.map(_pause_half_way(started, go)), source=rdd,
                          groupId=group)
    try:
        wait_until(lambda: os.path.exists(started), "the task to pause half way", timeout=120,
                   interval=0.05)
        wait_until(lambda: _ends(kafka, target)[1] >= HALF, "half the records in the log",
                   timeout=60, interval=0.2)
        # The broker aborts the transaction once it is older than 2 s (it looks every 10 s):
        # its abort marker makes the last stable offset the end of the log again.
        wait_until(lambda: (lambda e: e[0] == e[1])(_ends(kafka, target)),
                   "the broker to abort the timed-out transaction", timeout=60, interval=0.5)
    finally:
        open(go, "w").close()
        pool.shutdown(wait=False)
    error = attempt.exception(timeout=120)
    assert type(error) is KafkaWriteError, error
    assert "outlived transaction.timeout.ms=2000" in str(error)
    assert "Raise transaction.timeout.ms" in str(error) and "shorter" in str(error)
    assert _raw_fenced_error_in(error), error.__cause__
    assert not _read_committed(kafka, target) and _group_offset(kafka, group, source) is None
    # Short enough, the same output writes the range once.
    assert output.write(rdd.map(lambda r: (r.key, r.value)), source=rdd, groupId=group) == 10
    assert _read_committed(kafka, target) == {f"v{i}".encode(): 1 for i in range(RECORDS)}


def test_a_driver_fenced_by_a_second_driver_of_the_same_application_stops_with_output_fenced_error(  # noqa: E501
        kafka: Any, make_ssc: Any, unique: Any, tmp_path: Path, backend: str) -> None:
    """Driver A (this process) is inside its first batch's transaction when driver B (a
    subprocess: its own Spark) starts with the same group, hence the same transactional ids:
    B's start fences A's producer and aborts A's transaction, B copies the range and commits.
    A's task then fails, and A's streaming context stops with OutputFencedError chained from
    the client's raw error; the output holds every record once."""
    source, target, group = _topics(kafka, unique)
    started, go = str(tmp_path / "started"), str(tmp_path / "go")
    ssc = make_ssc(0.5)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
              "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
    # Assign: subscribed drivers of one group would also revoke each other's partitions.
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Assign([TopicPartition(source, 0)], params))
    # A long transaction timeout: A's transaction is fenced by B, not by the broker's clock.
    KafkaOutput({"bootstrap.servers": kafka.bootstrap_servers,
                 "transaction.timeout.ms": 600000}, topic=target,
                guarantee="exactly-once").writeStream(stream.map(_pause_half_way(started, go)))
    ssc.start()
    try:
        wait_until(lambda: os.path.exists(started), "driver A's task to pause half way",
                   timeout=120, interval=0.05)
        wait_until(lambda: _ends(kafka, target)[1] >= HALF, "A's first records in the log",
                   timeout=60, interval=0.2)
        second = subprocess.run(
            [sys.executable, str(PROBE), kafka.bootstrap_servers, source, target, group,
             str(RECORDS), backend], capture_output=True, text=True, timeout=300)
        assert second.returncode == 0 and "DONE" in second.stdout, second.stderr[-3000:]
    finally:
        open(go, "w").close()
    with pytest.raises(OutputFencedError, match="another driver of this application") as caught:
        ssc.awaitTermination(120)
    assert _raw_fenced_error_in(caught.value), caught.value.__cause__
    assert _read_committed(kafka, target) == {f"v{i}".encode(): 1 for i in range(RECORDS)}
    assert _group_offset(kafka, group, source) == RECORDS
