"""With real SASL and TLS passwords in use, nothing the project writes or shows contains one.

One stream reads through the secured broker's SASL_SSL listener (SCRAM-SHA-512, a JKS
truststore and a PKCS12 client keystore, each with its password) into a SQLite offset store,
with a checkpointing StreamingContext, a progress file and the metrics endpoint; then a
wrong password, a wrong store password and a failing read raise. Everything is gathered as
text and searched for every secret: log records at DEBUG (dstream_kafka and kafka-python),
exception messages and formatted tracebacks, progress JSON and the progress file, the
checkpoint and store files, ``dstream-kafka offsets describe`` output, the /metrics page,
Spark job descriptions and call sites, and the status tracker's stage names.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import traceback
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka import config
from dstream_kafka.ui import metrics
from dstream_kafka.stores import OffsetStores

from support import STRING_DESERIALIZER, wait_until

RECORDS = [f"r{i}" for i in range(20)]


class _Everything(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))  # message, arguments and any traceback


@pytest.fixture
def debug_logs():
    """Every record of dstream_kafka and kafka-python at DEBUG, formatted, for this test."""
    handler = _Everything()
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))
    loggers = [logging.getLogger(n) for n in ("dstream_kafka", "kafka", "py4j.clientserver")]
    levels = [lg.level for lg in loggers]
    logging.getLogger().addHandler(handler)
    for lg in loggers[:2]:
        lg.setLevel(logging.DEBUG)
    yield handler.lines
    logging.getLogger().removeHandler(handler)
    for lg, level in zip(loggers, levels):
        lg.setLevel(level)


@pytest.fixture
def spark_keys(sc):
    keys: dict[str, str] = {}
    yield keys
    for key in keys:
        sc._conf._jconf.remove(key)


def _files_text(*roots: Path) -> str:
    parts = []
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            parts.append(f"--- {path}\n" + path.read_bytes().decode("latin-1"))
    return "\n".join(parts)


def _raised(action) -> str:
    try:
        action()
    except Exception as exc:  # every failure, ours or Spark's, is shown to users
        return "".join(traceback.format_exception(exc))
    raise AssertionError("expected the action to fail")


@pytest.mark.slow  # a secured stream, failing reads, the CLI and a checkpoint: about 95 s
def test_no_secret_reaches_logs_errors_progress_stores_cli_metrics_or_job_descriptions(
        sc, secured_kafka, unique, make_ssc, tmp_path, debug_logs, spark_keys):
    security = secured_kafka.security
    secrets = [security.users["alice"], security.users["admin"], security.pki.password]
    topic = unique("secrets")
    secured_kafka.create_topic(topic, partitions=2)
    # both partitions get records: the createRDD below reads [0, 2) of partition 0, and records
    # without a key may all land in one partition
    secured_kafka.produce(topic, RECORDS[:10], partition=0)
    secured_kafka.produce(topic, RECORDS[10:], partition=1)
    group = unique("g")
    params = {**secured_kafka.client_params("SASL_SSL", mechanism="SCRAM-SHA-512",
                                            truststore_type="JKS"),
              "ssl.keystore.location": str(security.pki.client_keystore("PKCS12")),
              "ssl.keystore.password": security.pki.password,
              "ssl.key.password": security.pki.password,
              "group.id": group, "auto.offset.reset": "earliest",
              "value.deserializer": STRING_DESERIALIZER}
    progress_file = tmp_path / "progress.jsonl"
    for key, value in {config.PROGRESS_JSON_PATH: str(progress_file),
                       config.METRICS_PROMETHEUS_PORT: "0"}.items():
        spark_keys[key] = value
        sc._conf.set(key, value)
    store_uri = f"sqlite:///{tmp_path / 'offsets.db'}"
    seen: list[str] = []
    descriptions: list[str] = []

    def output(rdd: Any) -> None:
        for key in ("spark.job.description", "callSite.short", "callSite.long"):
            descriptions.append(str(sc.getLocalProperty(key)))
        seen.extend(rdd.map(lambda r: r.value).collect())

    ssc = make_ssc(0.3)
    ssc.checkpoint(str(tmp_path / "checkpoint"))
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe([topic], params),
        offsetStore=OffsetStores.sqlite(str(tmp_path / "offsets.db")))
    stream.foreachRDD(output)
    ssc.start()
    try:
        wait_until(lambda: len(seen) >= len(RECORDS), "the stream to read every record")
        wait_until(lambda: len(stream.recentProgress) >= 2, "two batches")
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics.serving_port()}/metrics",
                                    timeout=10) as reply:
            metrics_page = reply.read().decode()
    finally:
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
    assert sorted(seen) == sorted(RECORDS)

    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 2)],
                               LocationStrategies.PreferConsistent)
    shown = [repr(rdd), str(rdd.offsetRanges()), repr(stream), repr(rdd.readSettings)]
    wrong_password = {**params, "sasl.jaas.config": params["sasl.jaas.config"].replace(
        security.users["alice"], security.users["admin"])}  # another user's real password
    errors = [
        _raised(lambda: KafkaUtils.createRDD(sc, wrong_password, [OffsetRange(topic, 0, 0, 1)],
                                             LocationStrategies.PreferConsistent)),
        _raised(lambda: KafkaUtils.createRDD(
            sc, {**params, "ssl.truststore.password": security.users["admin"]},
            [OffsetRange(topic, 0, 0, 1)], LocationStrategies.PreferConsistent)),
        _raised(lambda: KafkaUtils.createRDD(
            sc, {**params, "ssl.enabled.protocols": "TLSv1.3"},
            [OffsetRange(topic, 0, 0, 1)], LocationStrategies.PreferConsistent)),
        _raised(lambda: KafkaUtils.createRDD(  # a task fails on the executor: a null value
            sc, {**params, "value.deserializer":
                 "org.apache.kafka.common.serialization.IntegerDeserializer"},
            [OffsetRange(topic, 0, 0, 1)], LocationStrategies.PreferConsistent).collect()),
    ]
    assert "KafkaAuthenticationError" in errors[0]
    assert "ssl.truststore.password" in errors[1]
    cli = subprocess.run(
        [sys.executable, "-m", "dstream_kafka.cli", "offsets", "describe", "--store", store_uri,
         "--group", group, "--bootstrap-servers", secured_kafka.bootstrap_servers,
         "--format", "json"], capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout)
    tracker = sc.statusTracker()
    stages = [str(tracker.getStageInfo(s).name) for j in tracker.getJobIdsForGroup()
              for s in (tracker.getJobInfo(j).stageIds if tracker.getJobInfo(j) else [])
              if tracker.getStageInfo(s) is not None]

    gathered = {
        "logs": "\n".join(debug_logs),
        "errors": "\n".join(errors),
        "progress": "\n".join(p.json() for p in stream.recentProgress)
                    + "\n".join(str(p) for p in stream.recentProgress),
        "files (progress, checkpoint, store)": _files_text(tmp_path),
        "cli": cli.stdout + cli.stderr,
        "metrics": metrics_page,
        "job descriptions": "\n".join(descriptions + stages),
        "reprs": "\n".join(shown),
    }
    # The search looks at real content: each source holds what it should.
    assert len(gathered["logs"]) > 10_000 and any(line.startswith("kafka.") and " DEBUG " in line
                                                  for line in debug_logs)
    assert topic in gathered["progress"] and topic in gathered["metrics"]
    assert group in gathered["cli"] and group in gathered["files (progress, checkpoint, store)"]
    assert "IntegerDeserializer" in gathered["errors"] and "Traceback" in gathered["errors"]
    assert progress_file.stat().st_size > 0 and any((tmp_path / "checkpoint").iterdir())
    leaks = [(where, secret[:4] + "...") for where, text in gathered.items() for secret in secrets
             if secret in text]
    assert leaks == []
