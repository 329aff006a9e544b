"""``KafkaUtils.createDataFrame`` gives the schema and rows of Spark's own ``spark.read.format("kafka")``
on the same ranges: plain, with headers, compacted and transactional topics, on both backends.

One subprocess (kafka_dataframe_probe.py, which has the connector jars) reads every case with
both readers; each test checks one case of its answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = ("kafka-python", "confluent-kafka")


def _compacted(kafka: Any) -> str:
    """Keys a a b c c b b (values 1 2 1 1 2 2 3) then z: compacted, offsets 1, 4, 6, 7 remain."""
    name = f"df-compact-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name, config={"cleanup.policy": "compact", "segment.ms": 100,
                                     "min.cleanable.dirty.ratio": 0.01, "delete.retention.ms": 100,
                                     "min.compaction.lag.ms": 0})
    kafka.produce(name, [("a", "1"), ("a", "2"), ("b", "1"), ("c", "1"), ("c", "2"), ("b", "2"),
                         ("b", "3")])
    time.sleep(0.3)  # the segment must be older than segment.ms to roll on the next write
    kafka.produce(name, [("z", "roll")])
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, enable_auto_commit=False)
    tp = TopicPartition(name, 0)
    consumer.assign([tp])
    deadline = time.monotonic() + 90
    try:
        while True:
            consumer.seek(tp, 0)
            offsets = [r.offset for r in consumer.poll(timeout_ms=1000).get(tp, [])]
            if offsets[:3] == [1, 4, 6]:
                return name
            assert time.monotonic() < deadline, f"the log cleaner did not compact {name}: {offsets}"
            time.sleep(0.5)
    finally:
        consumer.close()


def _transactional(kafka: Any) -> str:
    """c0 c1 c2 | marker 3 | aborted a0 a1 a2 | marker 7 | d0 d1 | marker 10; end 11."""
    name = f"df-tx-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(name)
    producer = KafkaProducer(bootstrap_servers=kafka.bootstrap_servers,
                             transactional_id=f"tx-{uuid.uuid4().hex}")
    try:
        producer.init_transactions()
        for commit, values in ((True, "c0 c1 c2"), (False, "a0 a1 a2"), (True, "d0 d1")):
            producer.begin_transaction()
            for value in values.split():
                producer.send(name, value=value.encode(), partition=0)
            producer.flush()
            producer.commit_transaction() if commit else producer.abort_transaction()
    finally:
        producer.close()
    deadline = time.monotonic() + 30
    while kafka.end_offsets(name) != {0: 11}:  # the coordinator writes the last marker after
        assert time.monotonic() < deadline, f"the markers of {name} never reached offset 11"
        time.sleep(0.05)
    return name


@pytest.fixture(scope="module")
def compared(kafka: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Every case read by Spark's Kafka source and by createDataFrame on both backends."""
    plain = f"df-plain-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(plain, partitions=2)
    kafka.produce(plain, [("k0", "v0"), (None, "v1"), ("k2", None)], partition=0)
    kafka.produce(plain, [("k3", "v3")], partition=0, headers=[("h1", b"x"), ("h2", b"")])
    kafka.produce(plain, [("k4", "v4"), ("k5", "")], partition=0, headers=[("h1", b"")])
    kafka.produce(plain, [f"p1-{i}" for i in range(5)], partition=1)
    compacted, transactional = _compacted(kafka), _transactional(kafka)
    cases = {
        "plain": {"ranges": [[plain, 0, 1, 6], [plain, 1, 0, 5]], "includeHeaders": False,
                  "params": {}},
        "headers": {"ranges": [[plain, 0, 0, 6], [plain, 1, 2, 4]], "includeHeaders": True,
                    "params": {}},
        "compacted": {"ranges": [[compacted, 0, 0, 8]], "includeHeaders": False, "params": {}},
        "transactional": {"ranges": [[transactional, 0, 0, 11]], "includeHeaders": False,
                          "params": {"isolation.level": "read_committed"}},
    }
    spec = tmp_path_factory.mktemp("df-probe") / "cases.json"
    spec.write_text(json.dumps({"bootstrap": kafka.bootstrap_servers, "cases": cases}))
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("kafka_dataframe_probe.py")),
                          str(spec)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_schema_is_structured_streamings_kafka_schema(compared, backend):
    assert compared["plain"][backend]["schema"] == compared["plain"]["spark"]["schema"]
    assert [f["name"] for f in json.loads(compared["plain"][backend]["schema"])["fields"]] == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_rows_of_plain_ranges_equal_sparks_with_null_keys_and_values(compared, backend):
    ours, spark = compared["plain"][backend]["rows"], compared["plain"]["spark"]["rows"]
    assert len(spark) == 10 and [None, "7631"] == spark[0][:2]  # offset 1: null key, value v1
    assert ours == spark


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_spark_partition_reads_each_range(compared, backend):
    assert compared["plain"][backend]["partitions"] == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_headers_column_and_rows_equal_sparks_null_when_a_record_has_none(compared, backend):
    case = compared["headers"]
    assert case[backend]["schema"] == case["spark"]["schema"]
    spark = case["spark"]["rows"]
    assert spark[0][7] is None and spark[3][7] == [["h1", "78"], ["h2", ""]]  # structs as lists
    assert case[backend]["rows"] == spark


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_compacted_topic_gives_sparks_rows(compared, backend):
    spark = compared["compacted"]["spark"]["rows"]
    assert [row[4] for row in spark] == [1, 4, 6, 7]
    assert compared["compacted"][backend]["rows"] == spark


@pytest.mark.parametrize("backend", BACKENDS)
def test_aborted_records_are_absent_from_both_under_read_committed(compared, backend):
    spark = compared["transactional"]["spark"]["rows"]
    assert [(row[4], bytes.fromhex(row[1]).decode()) for row in spark] == [
        (0, "c0"), (1, "c1"), (2, "c2"), (8, "d0"), (9, "d1")]
    assert compared["transactional"][backend]["rows"] == spark
