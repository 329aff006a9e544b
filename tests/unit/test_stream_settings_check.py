"""SparkConfReader.check_stream_settings and check_offset_store: every stream key checked at
once, and an offsetStore that is not a store refused with the accepted forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from dstream_kafka.config import DEFAULTS, SparkConfReader
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.stores.base import check_offset_store
from dstream_kafka.stores import OffsetStores


def test_the_defaults_pass_the_stream_settings_check() -> None:
    SparkConfReader({k: v for k, v in DEFAULTS.items() if v is not None}).check_stream_settings()
    SparkConfReader(None).check_stream_settings()


@pytest.mark.parametrize("key, value", [
    ("spark.streaming.kafka.consumer.poll.ms", "soon"),
    ("spark.streaming.kafka.consumer.poll.ms", "-5"),
    ("spark.streaming.kafka.consumer.backend", "rust-kafka"),
    ("spark.streaming.kafka.consumer.cache.loadFactor", "0"),
    ("spark.streaming.kafka.consumer.cache.prePosition", "maybe"),
    ("spark.streaming.kafka.maxRatePerPartition", "-1"),
    ("spark.streaming.kafka.allowNonConsecutiveOffsets", "1"),
    ("spark.streaming.kafka.maxRetries", "1.5"),
    ("spark.streaming.kafka.retryBackoff", "later"),
    ("spark.streaming.kafka.lookupTimeout", "0"),
    ("spark.streaming.kafka.assignmentTimeout", "soon"),
    ("spark.streaming.kafka.metrics.prometheus.port", "-1"),
    ("spark.streaming.kafka.ui.port", "http"),
    ("spark.streaming.kafka.ui.retainedBatches", "0"),
    ("spark.streaming.backpressure.rateEstimator", "linear"),
    ("spark.streaming.backpressure.pid.integral", "nan"),
    ("spark.streaming.concurrentJobs", "0"),
    ("spark.streaming.gracefulStopTimeout", "-1s"),
    ("spark.streaming.kafka.producer.cache.enabled", "yes"),
])
def test_each_bad_stream_setting_is_refused_naming_its_key(key: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=f"for {key}: expected"):
        SparkConfReader({key: value}).check_stream_settings()


def test_an_unknown_stream_key_is_only_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("WARNING", logger="dstream_kafka.config"):
        SparkConfReader({"spark.streaming.kafka.consumer.pol.ms": "1"}).check_stream_settings()
    assert "did you mean spark.streaming.kafka.consumer.poll.ms?" in caplog.text


@pytest.mark.parametrize("value", ["x.db", b"x.db", Path("x.db"), "sqlite:///x.db"])
def test_a_path_or_uri_as_offset_store_is_refused_naming_the_factories_and_open_store(
        value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"is a \w+, not a store.*open_store\(uri\)"):
        check_offset_store(value)


def test_any_other_object_as_offset_store_is_refused_naming_its_type() -> None:
    with pytest.raises(ConfigurationError, match="offsetStore must be an offset store.*got a dict"):
        check_offset_store({"path": "x.db"})


def test_a_store_or_none_passes_the_offset_store_check(tmp_path: Path) -> None:
    check_offset_store(None)
    check_offset_store(OffsetStores.sqlite(tmp_path / "o.db"))
