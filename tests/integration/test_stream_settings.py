"""Bad stream settings fail when the stream is created (createDirectStream), naming the key and
what it accepts, not when a batch first reads them; against the session's real Spark and broker."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
from dstream_kafka.errors import ConfigurationError


def _create(kafka: Any, make_ssc: Any, unique: Callable[[str], str], **kwargs: Any) -> Any:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g")}
    return KafkaUtils.createDirectStream(
        make_ssc(), LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([unique("t")], params), **kwargs)


@pytest.mark.parametrize("key, value, accepted", [
    ("spark.streaming.kafka.consumer.poll.ms", "soon", "a time such as 120s, 500ms or 2min"),
    ("spark.streaming.kafka.consumer.backend", "rust-kafka",
     "one of kafka-python, confluent-kafka"),
    ("spark.streaming.kafka.consumer.cache.maxCapacity", "lots", "a whole number"),
    ("spark.streaming.kafka.consumer.cache.enabled", "yes", "true or false"),
    ("spark.streaming.kafka.metrics.prometheus.port", "70000", "a TCP port from 0 to 65535"),
    ("spark.streaming.backpressure.rateEstimator", "linear", "one of pid"),
    # read by the Kafka output on the executors, yet checked here (issue #37 item 11)
    ("spark.streaming.kafka.producer.cache.enabled", "yes", "true or false"),
])
def test_a_bad_stream_setting_fails_at_create_direct_stream_naming_the_key_and_allowed_values(
        kafka: Any, make_ssc: Any, unique: Callable[[str], str], spark_conf: Any, key: str,
        value: str, accepted: str) -> None:
    spark_conf(key, value)
    with pytest.raises(ConfigurationError) as error:
        _create(kafka, make_ssc, unique)
    assert f"{value!r} for {key}: expected {accepted}" in str(error.value)


def test_a_file_name_as_offset_store_fails_at_create_direct_stream_naming_the_accepted_forms(
        kafka: Any, make_ssc: Any, unique: Callable[[str], str]) -> None:
    with pytest.raises(ConfigurationError) as error:
        _create(kafka, make_ssc, unique, offsetStore="x.db")
    message = str(error.value)
    assert "offsetStore='x.db' is a str, not a store" in message
    assert "OffsetStores.sqlite(path)" in message and "open_store(uri)" in message
    assert "sqlite:///PATH" in message


def test_an_unknown_stream_key_is_logged_with_the_closest_known_key(
        kafka: Any, make_ssc: Any, unique: Callable[[str], str], spark_conf: Any,
        caplog: pytest.LogCaptureFixture) -> None:
    spark_conf("spark.streaming.kafka.maxRatePerPartiton", "10")
    with caplog.at_level("WARNING", logger="dstream_kafka.config"):
        _create(kafka, make_ssc, unique)
    assert ("spark.streaming.kafka.maxRatePerPartiton is not a key dstream_kafka knows; it has "
            "no effect (did you mean spark.streaming.kafka.maxRatePerPartition?)") in caplog.text
