"""The filter that keeps secret values out of the Kafka client libraries' log lines."""

from __future__ import annotations

import logging

import pytest

from dstream_kafka.client.log_redaction import protect_client_logs, redact_text
from dstream_kafka.client.param_checks import REDACTED


@pytest.mark.parametrize("text", [
    "config: {'sasl_plain_password': 'pw-1', 'group_id': 'g'}",
    "SaslAuthenticateRequest(version=2, auth_bytes=b'alice\\x00alice\\x00pw-1')",
    'sasl.jaas.config=PlainLoginModule required username="alice" password="pw-1";',
    "{'ssl_password': \"pw-1\"}",
    "sasl.password=pw-1, sasl.username=alice",
])
def test_redact_text_removes_every_secret_value_and_keeps_the_rest(text: str) -> None:
    cleaned = redact_text(text)
    assert "pw-1" not in cleaned and REDACTED in cleaned


def test_a_line_without_secrets_is_left_as_it_is() -> None:
    text = "Starting KafkaAdminClient with configuration: {'group_id': 'g', 'client_id': 'c'}"
    assert redact_text(text) == text


def test_a_kafka_python_config_dump_is_redacted_on_its_own_logger(
        caplog: pytest.LogCaptureFixture) -> None:
    protect_client_logs()
    config = {"bootstrap_servers": "h:1", "sasl_plain_password": "pw-1", "ssl_password": "pw-2"}
    with caplog.at_level(logging.DEBUG, logger="kafka.admin.client"):
        logging.getLogger("kafka.admin.client").debug("Starting with configuration: %s", config)
    (record,) = [r for r in caplog.records if r.name == "kafka.admin.client"]
    assert "pw-1" not in record.getMessage() and "pw-2" not in record.getMessage()
    assert "'bootstrap_servers': 'h:1'" in record.getMessage()


def test_a_registered_secret_is_redacted_anywhere_in_a_line_even_inside_raw_bytes() -> None:
    protect_client_logs(["s3cr\u00e9t-pw"])
    raw = repr(bytearray(b"\x00$\x00\x02alice\x00alice\x00" + "s3cr\u00e9t-pw".encode()))
    for text in (f"Send: {raw}", "login s3cr\u00e9t-pw failed"):
        cleaned = redact_text(text)
        assert "s3cr" not in cleaned and REDACTED in cleaned


def test_a_registered_value_too_short_to_be_told_from_words_leaves_other_lines_readable() -> None:
    protect_client_logs(["s", "pw"])
    text = "Sending request 3 MetadataRequest(version=13, topics=[])"
    assert redact_text(text) == text
    assert "'pw'" not in redact_text("{'sasl_plain_password': 'pw'}")  # by key
