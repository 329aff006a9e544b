"""Progress JSON lines and Prometheus /metrics of a real direct stream."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
from dstream_kafka import config
from dstream_kafka.ui import metrics
from dstream_kafka.plan.progress import BatchProgress

from support import wait_until

BATCH = 0.5


@pytest.fixture
def conf_keys(sc: Any) -> Iterator[dict[str, str]]:
    """Keys set on the session SparkContext's conf for this test only, removed afterwards."""
    keys: dict[str, str] = {}
    yield keys
    for key in keys:
        sc._conf._jconf.remove(key)


def _parse(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    port = metrics.serving_port()
    assert port is not None
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        return _parse(reply.read().decode())


def test_a_stream_writes_progress_json_lines_and_serves_metrics_that_match_its_progress(
        kafka: Any, sc: Any, make_ssc: Any, unique: Any, conf_keys: dict[str, str],
        tmp_path: Path) -> None:
    topic = unique("progress")
    kafka.create_topic(topic, partitions=2)
    kafka.send_messages(topic, {chr(ord("a") + i): 5 for i in range(8)})  # 40 records
    path = tmp_path / "progress.jsonl"
    conf_keys.update({config.PROGRESS_JSON_PATH: str(path),
                      config.METRICS_PROMETHEUS_PORT: "0"})
    for key, value in conf_keys.items():
        sc._conf.set(key, value)
    context = make_ssc(BATCH)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))
    stream.foreachRDD(lambda rdd: rdd.count())
    # /metrics as served right after each batch (listeners run after the metrics are set, on
    # the batches' thread): the stop removes the stream's series.
    scrapes: list[tuple[int, Any]] = []
    stream.addProgressListener(lambda p: scrapes.append((p.batchId, _scrape())))
    context.start()
    wait_until(lambda: sum(p.numRecords for p in stream.recentProgress) >= 40, what="40 records")
    wait_until(lambda: len(stream.recentProgress) >= 2, what="two batches")
    context.stop(stopSparkContext=False, stopGraceFully=True)
    progress = list(stream.recentProgress)
    assert sum(p.numRecords for p in progress) == 40

    lines = path.read_text(encoding="utf-8").splitlines()
    assert [BatchProgress.fromJson(line) for line in lines] == [
        BatchProgress.fromJson(p.json()) for p in progress]
    assert [json.loads(line)["batchId"] for line in lines] == list(range(len(progress)))

    last_id, samples = scrapes[-1]
    assert last_id == progress[-1].batchId
    s = metrics.stream_label(context, stream.id)
    assert samples[("dstream_kafka_records_total", (("stream", s), ("topic", topic)))] == 40
    last = progress[-1]
    for r in last.ranges:
        labels = (("partition", str(r.partition)), ("stream", s), ("topic", topic))
        assert samples[("dstream_kafka_committed_offset", labels)] == r.untilOffset
        assert samples[("dstream_kafka_offsets_behind_latest", labels)] == \
            last.offsetsBehindLatest[r.topicPartition()]
    assert sum(r.untilOffset for r in last.ranges) == 40
    # The label is this context's own: no other test's stream counted into these series.
    def added(name: str) -> float:
        return samples[(name, (("stream", s),))]

    batches = added("dstream_kafka_batches_completed_total")
    assert batches == len(progress)
    assert added("dstream_kafka_offset_commit_seconds_count") == batches
    assert added("dstream_kafka_offset_commit_seconds_sum") == \
        pytest.approx(sum(p.commitMs for p in progress) / 1000.0)
    assert added("dstream_kafka_batch_processing_seconds_sum") == \
        pytest.approx(sum(p.processingDelay or 0 for p in progress) / 1000.0)
    assert added("dstream_kafka_batch_processing_seconds_count") == batches


def _labels(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> set[str]:
    return {dict(labels)["stream"] for _, labels in samples if "stream" in dict(labels)}


def _run_one_stream(kafka: Any, make_ssc: Any, unique: Any) -> tuple[str, set[str]]:
    """Run a stream with its lag timer until its batch and lag series are on /metrics, stop it;
    return its label and the names of its series before the stop."""
    topic = unique("series")
    kafka.create_topic(topic, partitions=1)
    kafka.send_messages(topic, {"a": 5})
    context = make_ssc(BATCH)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))
    stream.foreachRDD(lambda rdd: rdd.count())
    context.start()
    label = metrics.stream_label(context, stream.id)
    names: set[str] = set()

    def both_on_metrics() -> bool:
        names.clear()
        names.update(name for name, labels in _scrape() if ("stream", label) in labels)
        return {"dstream_kafka_records_total", "dstream_kafka_lag_offsets"} <= names
    wait_until(both_on_metrics, what="the stream's batch and lag series on /metrics")
    context.stop(stopSparkContext=False)
    return label, names


def test_a_stopped_streams_series_are_gone_from_metrics(
        kafka: Any, make_ssc: Any, unique: Any, sc: Any, conf_keys: dict[str, str]) -> None:
    conf_keys.update({config.METRICS_PROMETHEUS_PORT: "0", config.LAG_INTERVAL: "300ms"})
    for key, value in conf_keys.items():
        sc._conf.set(key, value)

    label, names = _run_one_stream(kafka, make_ssc, unique)

    assert {"dstream_kafka_committed_offset", "dstream_kafka_lag_status",
            "dstream_kafka_batch_duration_seconds_count"} <= names
    assert label not in _labels(_scrape())  # no frozen gauge left for sum by (stream)


def test_the_streams_of_two_contexts_of_one_process_get_distinct_labels(
        kafka: Any, make_ssc: Any, unique: Any, sc: Any, conf_keys: dict[str, str]) -> None:
    conf_keys.update({config.METRICS_PROMETHEUS_PORT: "0", config.LAG_INTERVAL: "300ms"})
    for key, value in conf_keys.items():
        sc._conf.set(key, value)

    first, _ = _run_one_stream(kafka, make_ssc, unique)
    second, _ = _run_one_stream(kafka, make_ssc, unique)

    # both are stream 0 of their context; the contexts' numbers tell them apart
    assert first != second and first.endswith("-0") and second.endswith("-0")
    assert int(second.split("-")[0]) > int(first.split("-")[0])
