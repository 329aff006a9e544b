"""The bounds of a direct stream's waits for the broker: their keys, defaults and bad values."""

from __future__ import annotations

import pytest

from dstream_kafka.config import SparkConfReader
from dstream_kafka.errors import ConfigurationError


def test_the_retry_backoff_defaults_to_200_ms() -> None:
    assert SparkConfReader({}).retry_backoff_ms == 200


def test_the_lookup_timeout_defaults_to_30_s() -> None:
    assert SparkConfReader({}).lookup_timeout_ms == 30_000


def test_the_assignment_timeout_defaults_to_60_s() -> None:
    assert SparkConfReader({}).assignment_timeout_ms == 60_000


@pytest.mark.parametrize("key, attribute, value, expected", [
    ("spark.streaming.kafka.retryBackoff", "retry_backoff_ms", "2s", 2000),
    ("spark.streaming.kafka.lookupTimeout", "lookup_timeout_ms", "1500", 1500),
    ("spark.streaming.kafka.assignmentTimeout", "assignment_timeout_ms", "2min", 120_000),
])
def test_a_bound_is_read_as_a_spark_time_string(key, attribute, value, expected) -> None:
    assert getattr(SparkConfReader({key: value}), attribute) == expected


@pytest.mark.parametrize("key, attribute, value", [
    ("spark.streaming.kafka.retryBackoff", "retry_backoff_ms", "-1s"),
    ("spark.streaming.kafka.lookupTimeout", "lookup_timeout_ms", "0"),
    ("spark.streaming.kafka.assignmentTimeout", "assignment_timeout_ms", "0s"),
    ("spark.streaming.kafka.assignmentTimeout", "assignment_timeout_ms", "soon"),
])
def test_a_bound_that_is_not_a_usable_time_is_refused_naming_the_key_and_value(key, attribute, value) -> None:
    with pytest.raises(ConfigurationError) as caught:
        getattr(SparkConfReader({key: value}), attribute)
    assert key in str(caught.value) and repr(value) in str(caught.value)
