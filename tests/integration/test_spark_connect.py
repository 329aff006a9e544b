"""Kafka DataFrames on a Spark Connect session, against the tests' local Connect server.

The client runs in a child process (connect_probe.py); the server is the session-wide
``connect_server`` fixture (tests/support/connect.py), whose executors import the dstream_kafka
under test. Spark's own Kafka source runs on the same server, to compare with.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.connect import ROOT, connect_env

from test_docs_examples import events, python_blocks  # noqa: F401 (a fixture)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def probed(kafka: Any, connect_server: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    topic = f"connect-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [("k0", "v0"), (None, "v1")], partition=0)
    kafka.produce(topic, [("k2", "v2")], partition=0, headers=[("h", b"x")])
    kafka.produce(topic, [f"p1-{i}" for i in range(3)], partition=1)
    spec = tmp_path_factory.mktemp("connect") / "cases.json"
    spec.write_text(json.dumps({"bootstrap": kafka.bootstrap_servers, "topic": topic,
                                "ranges": [[topic, 0, 1, 3], [topic, 1, 0, 3]]}))
    out = subprocess.run([sys.executable, str(Path(__file__).with_name("connect_probe.py")),
                          str(spec)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env=connect_env(connect_server))
    assert out.returncode == 0, out.stderr[-4000:] + "\nserver log:\n" + connect_server.log_tail()
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_client_runs_a_spark_connect_session(probed):
    assert probed["session"].startswith("pyspark.sql.connect")


@pytest.mark.service_check
def test_create_dataframe_on_connect_has_sparks_schema_and_rows_with_headers(probed):
    assert probed["ours"]["schema"] == probed["spark"]["schema"]
    assert len(probed["spark"]["rows"]) == 5
    assert probed["ours"]["rows"] == probed["spark"]["rows"]


def test_create_dataframe_on_connect_reads_one_spark_partition_per_range(probed):
    assert probed["ours"]["partitions"] == 2
    assert [r[1:] for r in probed["ours"]["offsetRanges"]] == [[0, 1, 3], [1, 0, 3]]


def test_create_dataframe_from_options_on_connect_reads_every_partition(probed):
    rows = probed["options"]["rows"]
    assert [(r[3], r[4]) for r in rows] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert rows[2][7] == [["h", "78"]] and rows[0][7] is None


@pytest.mark.parametrize("call, instead", [
    ("createRDD", "KafkaUtils.createDataFrame"),
    ("createRDDFromOptions", "KafkaUtils.createDataFrameFromOptions"),
    ("StreamingContext", "dstream_kafka.sql.createDataFrameStream"),
    ("createDirectStream", "dstream_kafka.sql.createDataFrameStream"),
])
def test_rdd_only_calls_on_a_connect_session_name_the_dataframe_alternative(probed, call, instead):
    name, message = probed["refused"][call]
    assert name == "SparkConnectNotSupportedError"
    assert "Spark Connect has no RDDs" in message and instead in message


CONNECT_EXAMPLES = [p for p in python_blocks() if p.id.startswith("docs/guide/connect.rst")]


@pytest.mark.parametrize("code", CONNECT_EXAMPLES)
def test_the_connect_guide_examples_run_on_a_connect_session(code, kafka, events, connect_server,
                                                             tmp_path):
    check = "\nassert type(spark).__module__.startswith('pyspark.sql.connect'), type(spark)\n"
    out = subprocess.run([sys.executable, "-c", code + check], cwd=tmp_path, capture_output=True,
                         text=True, timeout=600, env={**connect_env(connect_server),
                                                      "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers})
    assert out.returncode == 0, out.stderr[-4000:]
