"""Issue #18 (bad input): client/param_checks.py's pure checks (imported through kafka_params),
behind the integration tests in tests/integration/test_param_checks.py."""

from __future__ import annotations

import pytest

from dstream_kafka.errors import BrokerTimeoutError, ConfigurationError
from dstream_kafka.client.kafka_params import (
    REDACTED,
    bootstrap_failure,
    check_bootstrap_servers,
    consumer_config,
    show_value,
)

SECRET = "S3cr3t-PW-123"


@pytest.mark.parametrize("servers", ["h:9092", "h1:1,h2:65535", " h:9092 , [::1]:9092 ",
                                     ["10.0.0.1:9092", "h-2.example.com:9093"]])
def test_host_port_lists_pass_the_bootstrap_servers_check(servers: object) -> None:
    assert check_bootstrap_servers(servers) == servers


@pytest.mark.parametrize("servers", ["h", "h:0", "h:65536", "h:-1", "::1:9092", "h:9092/x",
                                     None, 9092, [b"h:1"]])
def test_anything_else_fails_the_bootstrap_servers_check(servers: object) -> None:
    with pytest.raises(ConfigurationError, match="bootstrap.servers"):
        check_bootstrap_servers(servers)


def test_a_secret_key_value_is_redacted() -> None:
    assert show_value("sasl.plain.password", SECRET) == REDACTED


def test_a_value_of_a_key_not_known_to_be_safe_shows_only_its_length() -> None:
    assert show_value("check.crcs", SECRET) == "<13 characters, not shown>"


def test_a_value_of_a_known_safe_key_is_quoted() -> None:
    assert show_value("group.id", "app") == "'app'"


@pytest.mark.parametrize("key,given,expected", [
    ("security.protocol", "sasl_ssl", "SASL_SSL"),
    ("isolation.level", "READ_COMMITTED", "read_committed"),
    ("auto.offset.reset", "Earliest", "earliest"),
])
def test_few_word_settings_are_read_case_insensitively_as_java_does(
        key: str, given: str, expected: str) -> None:
    name = key.replace(".", "_")
    assert consumer_config({"bootstrap.servers": "h:1", key: given})[name] == expected


def test_a_bootstrap_timeout_is_explained_with_its_bound_and_servers() -> None:
    from kafka.errors import KafkaTimeoutError

    error = bootstrap_failure({"bootstrap_servers": "h:1", "bootstrap_timeout_ms": 2000},
                              KafkaTimeoutError("Unable to bootstrap from h:1"))
    assert isinstance(error, BrokerTimeoutError)
    assert "h:1" in str(error) and "bootstrap.timeout.ms=2000" in str(error)


def test_another_kafka_timeout_is_not_taken_for_a_bootstrap_failure() -> None:
    from kafka.errors import KafkaTimeoutError

    assert bootstrap_failure({"bootstrap_servers": "h:1"},
                             KafkaTimeoutError("Failed to get offsets by timestamps")) is None


def test_a_partition_above_the_java_int_range_is_refused_as_a_topic_partition() -> None:
    from dstream_kafka.offsets import as_topic_partition

    with pytest.raises(ConfigurationError, match="at most 2147483647"):
        as_topic_partition(("t", 2**31))


def test_a_refused_sasl_handshake_is_named_instead_of_the_bootstrap_bound() -> None:
    from kafka.errors import KafkaTimeoutError

    error = bootstrap_failure({"bootstrap_servers": "h:1", "security_protocol": "SASL_PLAINTEXT"},
                              KafkaTimeoutError("Unable to bootstrap from h:1"), sasl_refused=True)
    assert error is not None
    text = str(error)
    assert "h:1" in text and "refused the SASL handshake" in text
    assert "security.protocol=SASL_PLAINTEXT against a PLAINTEXT listener" in text
    assert "bootstrap.timeout.ms" not in text  # the handshake, not the bound, ended the wait
