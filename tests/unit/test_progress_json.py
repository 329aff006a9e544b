"""BatchProgress as JSON with Structured Streaming's field names; outputs of ProgressTracker."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dstream_kafka import config
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.plan.progress import BatchProgress, ProgressTracker, iso_timestamp, quiet_kafka_logger


def _progress(**changes: object) -> BatchProgress:
    base = BatchProgress(
        batchTime=1_700_000_000_123,
        ranges=(OffsetRange("events", 1, 50, 60), OffsetRange("events", 0, 20, 23)),
        numRecords=13, inputRate=6.5, processingRate=130.0, schedulingDelay=4,
        processingDelay=100, offsetsBehindLatest={TopicPartition("events", 0): 0,
                                                  TopicPartition("events", 1): 7},
        planMs=2.5, commitMs=1.25, id="id-1", runId="run-1", batchId=3,
        description="Kafka 0.10 direct stream [0]")
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_json_uses_structured_streaming_field_names_and_offset_json() -> None:
    data = json.loads(_progress().json())
    assert data["id"] == "id-1" and data["runId"] == "run-1" and data["batchId"] == 3
    assert data["timestamp"] == "2023-11-14T22:13:20.123Z"
    assert data["numInputRows"] == 13
    assert data["inputRowsPerSecond"] == 6.5
    assert data["processedRowsPerSecond"] == 130.0
    assert data["durationMs"] == {"planBatch": 2.5, "schedulingDelay": 4, "addBatch": 100,
                                  "commitOffsets": 1.25, "triggerExecution": 103.75}
    (source,) = data["sources"]
    assert source["description"] == "Kafka 0.10 direct stream [0]"
    assert source["startOffset"] == {"events": {"0": 20, "1": 50}}
    assert source["endOffset"] == {"events": {"0": 23, "1": 60}}
    assert source["latestOffset"] == {"events": {"0": 23, "1": 67}}
    assert source["numInputRows"] == 13
    assert source["metrics"] == {"minOffsetsBehindLatest": "0", "maxOffsetsBehindLatest": "7",
                                 "avgOffsetsBehindLatest": "3.5"}
    assert data["offsetsBehindLatest"] == {"events": {"0": 0, "1": 7}}


def test_pretty_json_holds_the_same_values_as_json() -> None:
    p = _progress()
    assert json.loads(p.prettyJson()) == json.loads(p.json())
    assert "\n" in p.prettyJson() and "\n" not in p.json()


def test_unknown_delays_are_left_out_of_duration_ms() -> None:
    data = json.loads(_progress(schedulingDelay=None, processingDelay=None).json())
    assert data["durationMs"] == {"planBatch": 2.5, "commitOffsets": 1.25}


def test_processed_rows_per_second_counts_a_batch_whose_jobs_took_no_millisecond() -> None:
    tracker = ProgressTracker()
    progress = tracker.record(1_000, [OffsetRange("t", 0, 0, 40)], {}, 1.0, processing=0,
                              scheduling=1, plan_ms=1.5, commit_ms=0.5)
    # Structured Streaming's rate: rows over triggerExecution (plan + jobs + commit) = 2 ms
    assert progress.processingRate == 20_000.0
    assert progress.jsonValue()["durationMs"]["triggerExecution"] == 2.0


def test_iso_timestamp_is_utc_with_milliseconds() -> None:
    assert iso_timestamp(0) == "1970-01-01T00:00:00.000Z"
    assert iso_timestamp(1_000_000_000_007) == "2001-09-09T01:46:40.007Z"


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz._-0123456789", min_size=1, max_size=12)
offsets = st.integers(min_value=0, max_value=2**62)
durations = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


@st.composite
def progresses(draw: st.DrawFn) -> BatchProgress:
    parts = draw(st.lists(st.tuples(names, st.integers(0, 10_000)), unique=True, max_size=6))
    ranges = []
    behind = {}
    for topic, partition in parts:
        start = draw(offsets)
        ranges.append(OffsetRange(topic, partition, start, start + draw(st.integers(0, 10**6))))
        behind[TopicPartition(topic, partition)] = draw(st.integers(0, 10**9))
    delay = st.none() | st.integers(0, 10**9)
    return BatchProgress(
        batchTime=draw(st.integers(0, 2**45)), ranges=tuple(ranges),
        numRecords=sum(r.count() for r in ranges), inputRate=draw(durations),
        processingRate=draw(durations), schedulingDelay=draw(delay),
        processingDelay=draw(delay), offsetsBehindLatest=behind, planMs=draw(durations),
        commitMs=draw(durations), id=draw(st.uuids()).hex, runId=draw(st.uuids()).hex,
        batchId=draw(st.integers(0, 2**40)), description=draw(st.text(max_size=30)))


@given(progresses())
def test_from_json_gives_back_the_progress_with_ranges_in_topic_partition_order(
        p: BatchProgress) -> None:
    expected = dataclasses.replace(
        p, ranges=tuple(sorted(p.ranges, key=lambda r: (r.topic, r.partition))))
    assert BatchProgress.fromJson(p.json()) == expected
    assert BatchProgress.fromJson(p.prettyJson()) == expected
    assert BatchProgress.fromJson(json.loads(p.json())) == expected


def test_summary_is_one_line_with_batch_records_ranges_and_durations() -> None:
    line = _progress().summary()
    assert "\n" not in line
    assert "batch 3" in line and "13 records from 2 ranges" in line
    assert "plan 2 ms" in line and "processing 100 ms" in line and "commit 1 ms" in line


def test_tracker_numbers_batches_from_zero_each_run_with_a_new_run_id(tmp_path: Path) -> None:
    tracker = ProgressTracker()
    tracker.start({}, "d", "group/0", 0)
    first_run = tracker.runId
    a = tracker.record(1000, [OffsetRange("t", 0, 0, 5)], {}, 1.0, 10, 0, 1.0, 1.0)
    b = tracker.record(2000, [OffsetRange("t", 0, 5, 5)], {}, 1.0, 10, 0, 1.0, 1.0)
    assert (a.batchId, b.batchId) == (0, 1)
    assert a.runId == first_run and a.id == tracker.id and a.description == "d"
    stable_id = tracker.id
    tracker.start({}, "d", "group/0", 0)
    c = tracker.record(3000, [], {}, 1.0, 10, 0, 1.0, 1.0)
    assert c.batchId == 0 and c.runId != first_run and c.id == stable_id


def test_the_json_path_key_appends_one_json_line_per_batch(tmp_path: Path) -> None:
    path = tmp_path / "progress.jsonl"
    tracker = ProgressTracker()
    tracker.start({config.PROGRESS_JSON_PATH: str(path)}, "d", "g/0", 0)
    for t in (1000, 2000):
        tracker.notify(tracker.record(t, [OffsetRange("t", 0, 0, 5)], {}, 1.0, 10, 0, 1.0, 1.0))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["batchId"] for line in lines] == [0, 1]
    assert BatchProgress.fromJson(lines[1]) == tracker.recent[1]


def test_each_batch_logs_one_info_line_from_the_library(caplog: pytest.LogCaptureFixture) -> None:
    tracker = ProgressTracker()
    tracker.start({}, "d", "g/0", 0)
    with caplog.at_level(logging.INFO, logger="dstream_kafka.plan.progress"):
        tracker.notify(tracker.record(1000, [OffsetRange("t", 0, 0, 5)], {}, 1.0, 10, 0, 1.0, 1.0))
    lines = [r for r in caplog.records if r.name == "dstream_kafka.plan.progress"]
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    assert "made progress" in lines[0].getMessage()


def test_the_kafka_logger_goes_to_warning_only_when_the_user_left_it_alone() -> None:
    kafka_logger = logging.getLogger("kafka")
    saved, saved_handlers = kafka_logger.level, kafka_logger.handlers[:]
    try:
        kafka_logger.handlers.clear()
        kafka_logger.setLevel(logging.NOTSET)
        assert quiet_kafka_logger() is True
        assert kafka_logger.level == logging.WARNING
        kafka_logger.setLevel(logging.DEBUG)
        assert quiet_kafka_logger() is False
        assert kafka_logger.level == logging.DEBUG
        kafka_logger.setLevel(logging.NOTSET)
        kafka_logger.addHandler(logging.NullHandler())
        assert quiet_kafka_logger() is False
        assert kafka_logger.level == logging.NOTSET
    finally:
        kafka_logger.setLevel(saved)
        kafka_logger.handlers[:] = saved_handlers


def test_progress_json_holds_no_kafka_parameters() -> None:
    fields = {f.name for f in dataclasses.fields(BatchProgress)}
    assert not fields & {"kafkaParams", "params", "sasl.password", "ssl.key.password"}
    assert "password" not in _progress().prettyJson()


@pytest.mark.parametrize("port", ["-1", "65536", "ninety"])
def test_a_metrics_port_that_is_not_a_tcp_port_fails_the_start_naming_the_key(port: str) -> None:
    from dstream_kafka.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match="spark.streaming.kafka.metrics.prometheus.port"):
        ProgressTracker().start({config.METRICS_PROMETHEUS_PORT: port}, "d", "g/0", 0)


def test_the_lag_of_a_progress_is_in_its_json_and_read_back() -> None:
    lag = {"timestamp": "2023-11-14T22:13:20.123Z", "lagOffsets": 7, "maxLagSeconds": 1.5,
           "lookupError": None,
           "partitions": {"events": {"1": {"logEndOffset": 67, "committedOffset": 60,
                                           "lagOffsets": 7, "lagSeconds": 1.5}}},
           "status": "WARN", "cause": "input above processing: ...", "evidence": []}
    p = _progress(lag=lag)
    assert json.loads(p.json())["lag"] == lag
    assert BatchProgress.fromJson(p.json()) == dataclasses.replace(
        p, ranges=tuple(sorted(p.ranges, key=lambda r: (r.topic, r.partition))))
    assert "lag" not in json.loads(_progress().json())  # no timer, no key
