"""The Kafka output's settings checks (dstream_kafka.write.settings), without a broker: topic
names and Java's ranges of numeric producer settings."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.write.settings import PRODUCER_RANGES, OutputSettings

SERVERS = {"bootstrap.servers": "broker1:9092"}


def _settings(params: dict[str, Any] | None = None, topic: Any = "out") -> OutputSettings:
    return OutputSettings.of({**SERVERS, **(params or {})}, topic, "at-least-once",
                             "kafka-python")


@pytest.mark.parametrize("topic, match", [
    ("bad topic!", "'bad topic!' is not a legal Kafka topic name"),
    ("", "'' is not a legal Kafka topic name"), ("..", "not a legal Kafka topic name"),
    ("t" * 250, "not a legal Kafka topic name: use 1 to 249 characters"),
    (5, "must be a topic name \\(str\\), got int 5")])
def test_an_illegal_output_topic_is_refused_naming_the_option(topic: Any, match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as caught:
        _settings(topic=topic)
    assert str(caught.value).startswith("the Kafka output's topic")


@pytest.mark.parametrize("params, match", [
    ({"linger.ms": -1}, "linger.ms is below its minimum 0: it takes 0 or more"),
    ({"batch.size": "-1"}, "batch.size is below its minimum 0"),
    ({"delivery.timeout.ms": -5}, "delivery.timeout.ms is below its minimum 0"),
    ({"request.timeout.ms": 2**31}, "request.timeout.ms is above its maximum 2147483647"),
    ({"max.in.flight.requests.per.connection": 0}, "is below its minimum 1: it takes 1 to 5"),
    ({"max.in.flight.requests.per.connection": 6},
     "above its maximum 5 \\(the output's producer is idempotent"),
    ({"retries": -1}, "retries is below its minimum 0"),
    ({"send.buffer.bytes": -2}, "send.buffer.bytes is below its minimum -1")])
def test_a_numeric_producer_setting_outside_javas_range_is_refused(params: dict[str, Any],
                                                                  match: str) -> None:
    with pytest.raises(ConfigurationError, match=match) as caught:
        _settings(params)
    assert "fix or remove" in str(caught.value)


@pytest.mark.parametrize("name", sorted(PRODUCER_RANGES))
def test_every_range_bound_itself_is_accepted(name: str) -> None:
    low, high = PRODUCER_RANGES[name]
    java = name.replace("_", ".")
    for value in {low, min(high, 2**31 - 1)}:
        assert _settings({java: value}).producer[name] == value


def test_a_range_error_does_not_quote_the_value() -> None:
    with pytest.raises(ConfigurationError) as caught:
        _settings({"linger.ms": -987654})
    assert "987654" not in str(caught.value)


@pytest.mark.parametrize("params, found", [
    ({"linger.ms": 900001}, '"queue.buffering.max.ms" value 900001 is outside allowed range'),
    ({"batch.size": 0}, '"batch.size" value 0 is outside allowed range 1..'),
    ({"request.timeout.ms": 5}, '"socket.timeout.ms" value 5 is outside allowed range 10..')])
def test_settings_librdkafka_refuses_are_refused_on_the_driver_for_the_confluent_backend(
        params: dict[str, Any], found: str) -> None:
    pytest.importorskip("confluent_kafka")
    with pytest.raises(ConfigurationError) as caught:
        OutputSettings.of({**SERVERS, **params}, "out", "at-least-once", "confluent-kafka")
    text = str(caught.value)
    assert text.startswith("the confluent-kafka backend (librdkafka) refuses the output's "
                           "producer settings") and found in text
    # kafka-python takes what Java takes
    assert OutputSettings.of({**SERVERS, **params}, "out", "at-least-once", "kafka-python")
