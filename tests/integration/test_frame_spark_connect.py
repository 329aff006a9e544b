"""Kafka DataFrames on a Spark Connect session, against the tests' local Connect server.

The client runs in a child process (connect_probe.py); the server is the session-wide
``connect_server`` fixture (tests/support/connect.py), whose executors import the dstream_kafka
under test. Spark's own Kafka source runs on the same server, to compare with.
"""

from __future__ import annotations

import json
import os
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


def _edge_probe(spec: dict[str, Any], folder: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    path = folder / "spec.json"
    path.write_text(json.dumps(spec))
    return subprocess.Popen([sys.executable, str(Path(__file__).with_name("connect_edge_probe.py")),
                             str(path)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)


def test_a_connect_url_with_nothing_listening_fails_the_first_call_fast_naming_the_url(tmp_path):
    from dstream_kafka.operate.services.environment import free_port

    url = f"sc://127.0.0.1:{free_port()}"
    probe = _edge_probe({"case": "unreachable"}, tmp_path, {
        **os.environ, "SPARK_REMOTE": url,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
    out, err = probe.communicate(timeout=300)
    assert probe.returncode == 0, err[-4000:]
    calls = json.loads(out.strip().splitlines()[-1])
    for call, result in calls.items():
        name, message = result["error"]
        assert name == "SparkConnectUnreachableError", (call, result)
        assert url in message and "start-connect-server.sh" in message, (call, message)
        assert result["seconds"] < 30, (call, result)  # PySpark alone retries for minutes


def test_a_dataframe_stream_stops_within_its_bound_when_the_connect_server_dies_in_func(
        kafka, unique, tmp_path):
    from tests.support.connect import ConnectServer

    topic = unique("t")
    kafka.create_topic(topic)
    kafka.produce(topic, [f"v{i}" for i in range(3)])
    server = ConnectServer(cores=1)  # its own: the test kills it
    server.start()
    killed = tmp_path / "killed"
    try:
        probe = _edge_probe({"case": "dies-in-func", "bootstrap": kafka.bootstrap_servers,
                             "topic": topic, "store": f"sqlite:///{tmp_path}/o.db",
                             "killed": str(killed)}, tmp_path, connect_env(server))
        assert probe.stdout is not None
        for line in probe.stdout:
            if line.strip() == "in-func":
                break
        else:
            pytest.fail("the probe ended before func ran: " + probe.stderr.read()[-4000:])
    finally:
        server.stop()
    killed.touch()
    out, err = probe.communicate(timeout=300)
    assert probe.returncode == 0, err[-4000:]
    stopped = json.loads(out.strip().splitlines()[-1])
    assert stopped["error"] is None
    assert stopped["stopTimeout"] == 5.0  # 10 intervals of 0.5 s
    assert stopped["seconds"] < stopped["stopTimeout"] + 5
    assert stopped["stored"] == {}  # the abandoned batch is not committed
