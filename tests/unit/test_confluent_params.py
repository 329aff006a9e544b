"""Unit tests for the confluent-kafka backend: librdkafka settings, driver checks, records."""

from __future__ import annotations

import builtins
import logging
import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401  (kafka-python warns on import under some Python versions)

from dstream_kafka.read.backends import LIBRDKAFKA_KEY, check_backend, create_backend, record_decoder
from dstream_kafka.client.librdkafka import librdkafka_config
from dstream_kafka.read.consumer_cache import CacheKey, acquire, cached_consumer, clear
from dstream_kafka.errors import ConfigurationError, MissingDependencyError
from dstream_kafka.client.configs import ClientConfigs
from dstream_kafka.client.kafka_params import fix_kafka_params, utf8_decoder
from dstream_kafka.read.kafka_rdd import read_settings

SER = "org.apache.kafka.common.serialization."
BACKEND = "spark.streaming.kafka.consumer.backend"
JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="alice" password="s3cr3t-pw";'
)


def _fixed(**extra: Any) -> dict[str, Any]:
    return fix_kafka_params({"bootstrap.servers": "h1:9092,h2:9092", "group.id": "app", **extra})


def test_executor_rules_are_forced_in_librdkafka_terms():
    conf = librdkafka_config(
        _fixed(**{"enable.auto.commit": "true", "auto.offset.reset": "earliest"})
    )
    assert conf["bootstrap.servers"] == "h1:9092,h2:9092"
    assert conf["group.id"] == "spark-executor-app"
    assert conf["enable.auto.commit"] is False and conf["enable.auto.offset.store"] is False
    assert conf["auto.offset.reset"] == "error"  # Spark's "none": never a silent jump
    assert conf["enable.partition.eof"] is True
    assert conf["socket.receive.buffer.bytes"] == 65536  # KAFKA-3135, as for kafka-python


def test_prefetch_queue_backs_off_ten_ms_and_holds_four_partition_fetches():
    conf = librdkafka_config(_fixed())
    assert conf["fetch.queue.backoff.ms"] == 10  # librdkafka's 1000 ms stalls a seek
    assert conf["queued.max.messages.kbytes"] == 4 * 1024  # 4 x 1 MiB, not 64 MiB per idle consumer
    bigger = librdkafka_config(_fixed(**{"max.partition.fetch.bytes": str(4 * 1048576)}))
    assert bigger["queued.max.messages.kbytes"] == 16 * 1024


def test_isolation_level_defaults_to_read_uncommitted_unlike_librdkafka():
    assert librdkafka_config(_fixed())["isolation.level"] == "read_uncommitted"
    committed = librdkafka_config(_fixed(**{"isolation.level": "read_committed"}))
    assert committed["isolation.level"] == "read_committed"


def test_fetch_and_client_settings_keep_their_librdkafka_names():
    conf = librdkafka_config(
        _fixed(
            **{
                "fetch.min.bytes": "10",
                "fetch.max.wait.ms": "200",
                "fetch.max.bytes": "1048576",
                "max.partition.fetch.bytes": "524288",
                "client.id": "me",
                "client.rack": "r1",
                "request.timeout.ms": "40000",
                "check.crcs": "false",
                "max.poll.records": "2000",
            }
        )
    )
    shown = ("fetch.min", "fetch.max", "fetch.wait", "max.", "client", "socket.t")
    assert {k: conf[k] for k in conf if k.startswith(shown)} == {
        "fetch.min.bytes": 10,
        "fetch.wait.max.ms": 200,
        "fetch.max.bytes": 1048576,
        "max.partition.fetch.bytes": 524288,
        "client.id": "me",
        "client.rack": "r1",
        "socket.timeout.ms": 40000,
    }
    assert conf["check.crcs"] is False
    assert "max.poll.records" not in conf  # the batch size of consume(), not a librdkafka key


def test_security_settings_are_translated():
    conf = librdkafka_config(
        _fixed(
            **{
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": JAAS,
                "ssl.cafile": "/ca.pem",
                "ssl.certfile": "/cert.pem",
                "ssl.keyfile": "/key.pem",
                "ssl.key.password": "k3y-pw",
                "ssl.endpoint.identification.algorithm": "",
            }
        )
    )
    assert conf["security.protocol"] == "sasl_ssl"
    assert (conf["sasl.mechanism"], conf["sasl.username"], conf["sasl.password"]) == (
        "SCRAM-SHA-512",
        "alice",
        "s3cr3t-pw",
    )
    assert (conf["ssl.ca.location"], conf["ssl.certificate.location"]) == ("/ca.pem", "/cert.pem")
    assert (conf["ssl.key.location"], conf["ssl.key.password"]) == ("/key.pem", "k3y-pw")
    assert conf["ssl.endpoint.identification.algorithm"] == "none"


def test_group_and_commit_settings_are_dropped_and_unmapped_ones_warned_by_name(caplog):
    from dstream_kafka.client import librdkafka

    librdkafka._warned.discard("api_version")
    params = _fixed(**{"session.timeout.ms": "10000", "api.version": "2.8"})
    with caplog.at_level(logging.WARNING, logger="dstream_kafka.read.backends.confluent"):
        conf = librdkafka_config(params)
    assert "session.timeout.ms" not in conf and "api.version" not in conf
    assert "Ignoring Kafka parameter api_version for the confluent-kafka backend" in caplog.text
    assert "session_timeout_ms" not in caplog.text


def test_settings_librdkafka_cannot_honour_are_refused():
    with pytest.raises(ConfigurationError, match="proxy_url is not supported by the confluent"):
        librdkafka_config({**_fixed(), "proxy_url": "http://proxy:3128"})
    with pytest.raises(ConfigurationError, match="ssl_context is not supported"):
        librdkafka_config({**_fixed(), "ssl_context": object()})


def test_secrets_never_reach_logs_or_errors(caplog):
    params = _fixed(
        **{"sasl.jaas.config": JAAS, "ssl.key.password": "k3y-pw", "security.protocol": "SSL"}
    )
    params["sasl_oauth_token_provider"] = None  # unset: fine
    params["metric_reporters"] = ["s3cr3t-pw"]
    with caplog.at_level(logging.DEBUG):
        librdkafka_config(params)
        with pytest.raises(ConfigurationError) as info:
            librdkafka_config({**params, "sasl_plain_password": ["s3cr3t-pw"]})
    assert "s3cr3t-pw" not in str(info.value) and "redacted" in str(info.value)
    assert "s3cr3t-pw" not in caplog.text and "k3y-pw" not in caplog.text


def test_missing_bootstrap_servers_is_refused():
    with pytest.raises(ConfigurationError, match="bootstrap.servers"):
        librdkafka_config({"group_id": "spark-executor-g"})


def test_deserializers_are_the_same_python_callables():
    from kafka.serializer import Deserializer

    class Upper(Deserializer):
        def deserialize(self, topic, headers, data):
            return (topic, data.upper())

    assert record_decoder(utf8_decoder, "value", "t", 0)(b"caf\xc3\xa9", None, 0) == "café"
    assert record_decoder(utf8_decoder, "value", "t", 0)(None, None, 0) is None
    assert record_decoder(Upper(), "value", "t", 0)(b"ab", [], 0) == ("t", b"AB")
    assert record_decoder(None, "value", "t", 0) is None


def test_read_settings_carry_the_backend_and_default_to_kafka_python():
    params = _fixed()
    assert read_settings({}, params).backend == "kafka-python"
    assert read_settings({BACKEND: "Confluent-Kafka"}, params).backend == "confluent-kafka"


def test_the_drivers_librdkafka_translation_travels_in_the_read_settings():
    configs = ClientConfigs.of({"bootstrap.servers": "h1:9092", "group.id": "app"})
    settings = read_settings({BACKEND: "confluent-kafka"}, configs)
    assert settings.librdkafka == librdkafka_config(configs.executor)
    assert settings.fingerprint == configs.fingerprint
    assert read_settings({}, configs).librdkafka is None


def test_an_executor_client_takes_the_drivers_translation_without_translating_again(monkeypatch):
    from dstream_kafka.read.backends import confluent

    shipped = librdkafka_config(_fixed())
    monkeypatch.setattr(confluent, "librdkafka_config", lambda params: pytest.fail("translated again"))
    backend = create_backend("confluent-kafka", "t", 0, {**_fixed(), LIBRDKAFKA_KEY: shipped})
    try:
        assert "logger" not in shipped  # the client's callbacks went into a copy
    finally:
        backend.close()


def test_a_cached_consumer_of_another_backend_is_replaced():
    clear()
    key = CacheKey("spark-executor-g", "t", 0)
    params = _fixed()
    try:
        with acquire(key, params, attempt_number=0) as first:
            pass
        with acquire(key, params, attempt_number=0, backend="confluent-kafka") as second:
            assert second.internal is not first.internal and first.internal.closed
            assert second.internal.backend == "confluent-kafka"
        assert cached_consumer(key) is second.internal
    finally:
        clear()


def test_missing_confluent_kafka_fails_on_the_driver_naming_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_confluent(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "confluent_kafka" or name.startswith("confluent_kafka."):
            raise ImportError("No module named 'confluent_kafka'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_confluent)
    with pytest.raises(MissingDependencyError, match=r"pip install dstream_kafka\[fast\]"):
        read_settings({BACKEND: "confluent-kafka"}, _fixed())
    with pytest.raises(MissingDependencyError, match=r"dstream_kafka\[fast\]"):
        create_backend("confluent-kafka", "t", 0, _fixed())
    read_settings({}, _fixed())  # the default backend needs nothing more


def test_unknown_backend_is_refused():
    with pytest.raises(ConfigurationError, match="kafka-python, confluent-kafka"):
        check_backend("aiokafka")


def test_timestamp_types_map_to_kafkas_codes():
    from dstream_kafka.read.backends import confluent

    # NOT_AVAILABLE -> none, CREATE_TIME -> CreateTime, LOG_APPEND_TIME -> LogAppendTime
    assert confluent._TIMESTAMP_TYPES == {0: -1, 1: 0, 2: 1}
