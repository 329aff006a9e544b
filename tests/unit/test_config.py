"""Unit tests for the configuration keys, defaults and the strict SparkConfReader."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dstream_kafka import config
from dstream_kafka.config import DEFAULTS, SparkConfReader, parse_time_string, true_or_false
from dstream_kafka.errors import ConfigurationError

PROPERTY = settings(max_examples=200, deadline=None)


def test_every_default_matches_spark() -> None:
    r = SparkConfReader(None)
    assert r.consumer_cache_enabled is True
    assert r.poll_timeout_ms == 120_000
    assert (r.cache_initial_capacity, r.cache_max_capacity, r.cache_load_factor) == (16, 64, 0.75)
    assert (r.max_rate_per_partition, r.min_rate_per_partition) == (0, 1)
    assert r.allow_non_consecutive_offsets is False
    assert r.max_retries == 1
    assert r.backpressure_enabled is False
    assert r.backpressure_initial_rate == 0
    assert r.rate_estimator == "pid"
    assert (r.pid_proportional, r.pid_integral, r.pid_derived, r.pid_min_rate) == (
        1.0,
        0.2,
        0.0,
        100.0,
    )
    assert r.stop_gracefully_on_shutdown is False
    assert r.concurrent_jobs == 1
    assert r.consumer_backend == "kafka-python"


def test_key_constants_are_sparks_names() -> None:
    assert config.CONSUMER_CACHE_ENABLED == "spark.streaming.kafka.consumer.cache.enabled"
    assert config.CONSUMER_POLL_MS == "spark.streaming.kafka.consumer.poll.ms"
    assert (
        config.CONSUMER_CACHE_INITIAL_CAPACITY
        == "spark.streaming.kafka.consumer.cache.initialCapacity"
    )
    assert config.CONSUMER_CACHE_MAX_CAPACITY == "spark.streaming.kafka.consumer.cache.maxCapacity"
    assert config.CONSUMER_CACHE_LOAD_FACTOR == "spark.streaming.kafka.consumer.cache.loadFactor"
    assert config.MAX_RATE_PER_PARTITION == "spark.streaming.kafka.maxRatePerPartition"
    assert config.MIN_RATE_PER_PARTITION == "spark.streaming.kafka.minRatePerPartition"
    assert (
        config.ALLOW_NON_CONSECUTIVE_OFFSETS == "spark.streaming.kafka.allowNonConsecutiveOffsets"
    )
    assert config.BACKPRESSURE_ENABLED == "spark.streaming.backpressure.enabled"
    assert config.BACKPRESSURE_INITIAL_RATE == "spark.streaming.backpressure.initialRate"
    assert config.RATE_ESTIMATOR == "spark.streaming.backpressure.rateEstimator"
    assert config.PID_DERIVED == "spark.streaming.backpressure.pid.derived"
    assert config.NETWORK_TIMEOUT == "spark.network.timeout"
    assert config.CONSUMER_BACKEND == "spark.streaming.kafka.consumer.backend"


def test_every_key_constant_has_a_default_entry() -> None:
    keys = {
        getattr(config, name)
        for name in config.__all__
        if name.isupper() and name not in ("DEFAULTS", "CONSUMER_BACKENDS")
    }
    assert keys == set(DEFAULTS)


def test_reader_reads_string_values_from_a_dict() -> None:
    r = SparkConfReader(
        {
            "spark.streaming.kafka.consumer.cache.enabled": "FALSE",
            "spark.streaming.kafka.maxRatePerPartition": " 250 ",
            "spark.streaming.backpressure.pid.integral": "1e-1",
        }
    )
    assert r.consumer_cache_enabled is False
    assert r.max_rate_per_partition == 250
    assert r.pid_integral == 0.1


def test_reader_accepts_python_typed_values() -> None:
    r = SparkConfReader(
        {
            "spark.streaming.backpressure.enabled": True,
            "spark.streaming.kafka.minRatePerPartition": 5,
            "spark.streaming.kafka.consumer.cache.loadFactor": 1,
        }
    )
    assert (r.backpressure_enabled, r.min_rate_per_partition, r.cache_load_factor) == (True, 5, 1.0)


def test_reader_uses_get_with_a_default_like_spark_conf() -> None:
    class ConfLike:
        def get(self, key: str, defaultValue: str | None = None) -> str | None:
            return {"spark.streaming.concurrentJobs": "4"}.get(key, defaultValue)

    assert SparkConfReader(ConfLike()).concurrent_jobs == 4


def test_reader_takes_the_conf_of_a_spark_context_like_object() -> None:
    class ContextLike:
        def getConf(self) -> dict[str, str]:
            return {"spark.streaming.kafka.maxRatePerPartition": "9"}

    assert SparkConfReader(ContextLike()).max_rate_per_partition == 9


def test_reader_rejects_an_object_without_get() -> None:
    with pytest.raises(ConfigurationError, match="Expected a SparkConf"):
        SparkConfReader(42)


def test_reader_reads_a_real_pyspark_spark_conf_without_a_jvm() -> None:
    pyspark = pytest.importorskip("pyspark")
    conf = pyspark.SparkConf(loadDefaults=False).set(
        "spark.streaming.kafka.consumer.poll.ms", "10000"
    )
    assert SparkConfReader(conf).poll_timeout_ms == 10_000


def test_reader_sees_later_changes_to_the_conf() -> None:
    conf: dict[str, str] = {}
    r = SparkConfReader(conf)
    conf["spark.streaming.kafka.maxRatePerPartition"] = "3"
    assert r.max_rate_per_partition == 3


# -- strict parsing --------------------------------------------------------------------------


@given(st.sampled_from(["true", "false"]), st.text(" \t"), st.text(" \t"), st.data())
def test_true_or_false_reads_true_and_false_in_any_case_with_spaces_around(
        word: str, before: str, after: str, data: st.DataObject) -> None:
    cased = "".join(c.upper() if data.draw(st.booleans()) else c for c in word)
    assert true_or_false(before + cased + after) is (word == "true")


@pytest.mark.parametrize("value", [True, False])
def test_true_or_false_returns_a_bool_as_it_is(value: bool) -> None:
    assert true_or_false(value) is value


@given(st.one_of(st.text().filter(lambda t: t.strip().lower() not in ("true", "false")),
                 st.integers(), st.none()))
def test_true_or_false_gives_none_for_anything_else(value: object) -> None:
    assert true_or_false(value) is None


@pytest.mark.parametrize("bad", ["yes", "1", "", "truee", 1])
def test_bad_boolean_names_the_key_value_and_an_example(bad: object) -> None:
    key = "spark.streaming.backpressure.enabled"
    with pytest.raises(ConfigurationError) as info:
        _ = SparkConfReader({key: bad}).backpressure_enabled
    message = str(info.value)
    assert key in message and repr(bad) in message and f"e.g. {key}=true" in message


@pytest.mark.parametrize("bad", ["1.5", "ten", "", "1e3", 2.0, True, str(2**63)])
def test_bad_integer_names_the_key_value_and_an_example(bad: object) -> None:
    key = "spark.streaming.kafka.maxRatePerPartition"
    with pytest.raises(ConfigurationError) as info:
        _ = SparkConfReader({key: bad}).max_rate_per_partition
    message = str(info.value)
    assert key in message and repr(bad) in message and f"e.g. {key}=0" in message


@pytest.mark.parametrize("bad", ["fast", "nan", "inf", "", True])
def test_bad_float_names_the_key_value_and_an_example(bad: object) -> None:
    key = "spark.streaming.backpressure.pid.proportional"
    with pytest.raises(ConfigurationError) as info:
        _ = SparkConfReader({key: bad}).pid_proportional
    message = str(info.value)
    assert key in message and repr(bad) in message and f"e.g. {key}=1.0" in message


@pytest.mark.parametrize(
    ("key", "bad"),
    [
        ("spark.streaming.concurrentJobs", "0"),
        ("spark.streaming.kafka.consumer.cache.maxCapacity", "-1"),
        ("spark.streaming.kafka.consumer.cache.initialCapacity", "-1"),
        ("spark.streaming.kafka.consumer.cache.loadFactor", "0"),
        ("spark.streaming.kafka.maxRetries", "-1"),
    ],
)
def test_out_of_range_values_are_rejected(key: str, bad: str) -> None:
    attribute = {
        "spark.streaming.concurrentJobs": "concurrent_jobs",
        "spark.streaming.kafka.consumer.cache.maxCapacity": "cache_max_capacity",
        "spark.streaming.kafka.consumer.cache.initialCapacity": "cache_initial_capacity",
        "spark.streaming.kafka.consumer.cache.loadFactor": "cache_load_factor",
        "spark.streaming.kafka.maxRetries": "max_retries",
    }[key]
    with pytest.raises(ConfigurationError, match=key):
        getattr(SparkConfReader({key: bad}), attribute)


def test_initial_rate_is_read_as_a_long_like_get_long() -> None:
    r = SparkConfReader({"spark.streaming.backpressure.initialRate": "1000"})
    assert r.backpressure_initial_rate == 1000


# -- time strings and the poll timeout -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("120s", 120_000),
        ("500ms", 500),
        ("2min", 120_000),
        ("2m", 120_000),
        ("1h", 3_600_000),
        ("1d", 86_400_000),
        ("1500us", 1),
        (" 10S ", 10_000),
        ("250", 250),
        ("-5s", -5000),
    ],
)
def test_parse_time_string_follows_spark_suffixes(text: str, ms: int) -> None:
    assert parse_time_string(text, "ms") == ms


def test_parse_time_string_truncates_to_the_requested_unit() -> None:
    assert parse_time_string("1500ms", "s") == 1
    assert parse_time_string("90", "s") == 90


@pytest.mark.parametrize("bad", ["", "s", "10 s", "1.5s", "10sec", "10x", "ten"])
def test_parse_time_string_rejects_malformed_text_with_an_example(bad: str) -> None:
    with pytest.raises(ConfigurationError, match=r"e\.g\. my\.key=120s") as info:
        parse_time_string(bad, key="my.key")
    assert repr(bad) in str(info.value)


def test_poll_timeout_prefers_poll_ms() -> None:
    r = SparkConfReader(
        {"spark.streaming.kafka.consumer.poll.ms": "10000", "spark.network.timeout": "5s"}
    )
    assert r.poll_timeout_ms == 10_000


def test_poll_timeout_falls_back_to_network_timeout_in_whole_seconds() -> None:
    assert SparkConfReader({"spark.network.timeout": "30s"}).poll_timeout_ms == 30_000
    assert SparkConfReader({"spark.network.timeout": "2min"}).poll_timeout_ms == 120_000
    assert SparkConfReader({"spark.network.timeout": "1500ms"}).poll_timeout_ms == 1_000
    assert SparkConfReader({"spark.network.timeout": "45"}).poll_timeout_ms == 45_000


def test_poll_ms_also_accepts_a_suffixed_time() -> None:
    assert (
        SparkConfReader({"spark.streaming.kafka.consumer.poll.ms": "10s"}).poll_timeout_ms == 10_000
    )


def test_a_negative_poll_timeout_is_rejected() -> None:
    with pytest.raises(ConfigurationError, match="spark.streaming.kafka.consumer.poll.ms"):
        _ = SparkConfReader({"spark.streaming.kafka.consumer.poll.ms": "-1"}).poll_timeout_ms


def test_a_bad_network_timeout_names_that_key() -> None:
    with pytest.raises(ConfigurationError, match="spark.network.timeout"):
        _ = SparkConfReader({"spark.network.timeout": "soon"}).poll_timeout_ms


@PROPERTY
@given(st.integers(0, 10**9), st.sampled_from(["ms", "s", "min", "h"]))
def test_time_strings_convert_consistently_between_units(n: int, suffix: str) -> None:
    factor = {"ms": 1, "s": 1000, "min": 60_000, "h": 3_600_000}[suffix]
    assert parse_time_string(f"{n}{suffix}", "ms") == n * factor
    assert parse_time_string(f"{n}{suffix}", "s") == n * factor // 1000


# -- consumer backend ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("kafka-python", "kafka-python"), ("Confluent-Kafka", "confluent-kafka")],
)
def test_consumer_backend_accepts_the_two_clients(value: str, expected: str) -> None:
    assert (
        SparkConfReader({"spark.streaming.kafka.consumer.backend": value}).consumer_backend
        == expected
    )


def test_consumer_backend_rejects_other_clients_listing_the_choices() -> None:
    with pytest.raises(ConfigurationError, match="one of kafka-python, confluent-kafka") as info:
        _ = SparkConfReader({"spark.streaming.kafka.consumer.backend": "aiokafka"}).consumer_backend
    assert "'aiokafka'" in str(info.value)


def test_a_reader_built_from_a_reader_reads_the_same_configuration() -> None:
    first = SparkConfReader({"spark.streaming.kafka.maxRetries": "3"})
    second = SparkConfReader(first)
    assert second.conf is first.conf and second.max_retries == 3
