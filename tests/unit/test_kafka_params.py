"""Unit tests for Kafka parameter translation, the executor fixes and redaction."""

from __future__ import annotations

import logging
import pickle
import threading
import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka  # noqa: F401  (kafka-python warns on import under some Python versions)

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.client.configs import (
    ClientConfigs,
    bootstrap_errors,
    driver_consumer_config,
    params_fingerprint,
    store_client_config,
    stream_driver_config,
)
from dstream_kafka.client.kafka_params import (
    JAVA_RECONNECT_BACKOFF_MAX_MS,
    REDACTED,
    consumer_config,
    fix_kafka_params,
    redact,
    utf8_decoder,
    validate_deserializer,
)
from dstream_kafka.client.librdkafka import librdkafka_config

#: what consumer_config adds to every translation (Java's default, not kafka-python's)
JAVA = {"reconnect_backoff_max_ms": JAVA_RECONNECT_BACKOFF_MAX_MS}

SER = "org.apache.kafka.common.serialization."
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="alice" password="s3cr3t-pw";'
)


def test_java_names_become_kafka_python_keyword_arguments():
    config = consumer_config(
        {
            "bootstrap.servers": "h:9092",
            "group.id": "g",
            "max.poll.records": "100",
            "isolation.level": "read_committed",
        }
    )
    assert config == {
        "bootstrap_servers": "h:9092",
        "group_id": "g",
        "max_poll_records": 100,
        "isolation_level": "read_committed",
        **JAVA,
    }


def test_kafka_python_names_pass_through_and_may_be_mixed_with_java_names():
    config = consumer_config({"bootstrap_servers": "h:9092", "fetch.min.bytes": 10})
    assert config == {"bootstrap_servers": "h:9092", "fetch_min_bytes": 10, **JAVA}


def test_string_booleans_and_numbers_are_converted():
    config = consumer_config(
        {"enable.auto.commit": "FALSE", "check.crcs": "true", "receive.buffer.bytes": "131072"}
    )
    assert config == {
        "enable_auto_commit": False,
        "check_crcs": True,
        "receive_buffer_bytes": 131072,
        **JAVA,
    }


def test_clients_retry_a_down_broker_within_java_s_reconnect_backoff_unless_told_otherwise():
    assert consumer_config({"bootstrap.servers": "h:1"})["reconnect_backoff_max_ms"] == 1000
    given = {"bootstrap.servers": "h:1", "reconnect.backoff.max.ms": "30000"}
    assert consumer_config(given)["reconnect_backoff_max_ms"] == 30000
    given = {"bootstrap.servers": "h:1", "reconnect_backoff_max_ms": 5000}
    assert consumer_config(given)["reconnect_backoff_max_ms"] == 5000


def test_badly_typed_value_names_the_parameter():
    with pytest.raises(ConfigurationError, match="max.poll.records must be a whole number"):
        consumer_config({"max.poll.records": "many"})


def test_unknown_parameter_is_rejected_with_the_closest_name():
    with pytest.raises(
        ConfigurationError,
        match="Unknown Kafka consumer parameter 'bootstrap.server'; did you mean bootstrap.servers",
    ):
        consumer_config({"bootstrap.server": "h:9092"})


def test_metadata_broker_list_from_kafka_08_programs_means_bootstrap_servers():
    assert consumer_config({"metadata.broker.list": "h:9092"}) == {"bootstrap_servers": "h:9092", **JAVA}


def test_java_only_parameters_are_dropped_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="dstream_kafka.client.kafka_params"):
        config = consumer_config({"default.api.timeout.ms": "1000", "bootstrap.servers": "h:1"})
    assert config == {"bootstrap_servers": "h:1", **JAVA}
    assert "default.api.timeout.ms" in caplog.text


def test_interceptor_classes_are_refused_with_the_reason():
    with pytest.raises(
        ConfigurationError,
        match="interceptor.classes is not supported: consumer interceptors are Java",
    ):
        consumer_config({"interceptor.classes": "com.example.Interceptor"})


def test_jaas_config_gives_the_sasl_username_and_password():
    config = consumer_config({"sasl.jaas.config": JAAS, "sasl.mechanism": "PLAIN"})
    assert config["sasl_plain_username"] == "alice"
    assert config["sasl_plain_password"] == "s3cr3t-pw"


def test_malformed_jaas_config_error_does_not_quote_the_secret():
    with pytest.raises(ConfigurationError) as info:
        consumer_config({"sasl.jaas.config": 'PlainLoginModule required password="s3cr3t-pw";'})
    assert "s3cr3t-pw" not in str(info.value)


# -- fix_kafka_params ----------------------------------------------------------------------


def test_executor_params_disable_auto_commit_and_offset_reset():
    fixed = fix_kafka_params({"bootstrap.servers": "h:1", "group.id": "app"})
    assert fixed["enable_auto_commit"] is False
    assert fixed["auto_offset_reset"] == "none"


def test_executor_group_id_is_prefixed_with_spark_executor():
    assert fix_kafka_params({"group.id": "app"})["group_id"] == "spark-executor-app"


def test_executor_params_drop_the_drivers_group_instance_id():
    fixed = fix_kafka_params({"group.id": "app", "group.instance.id": "driver-1"})
    assert "group_instance_id" not in fixed


def test_missing_group_id_logs_a_warning_and_uses_spark_executor_none(caplog):
    with caplog.at_level(logging.WARNING, logger="dstream_kafka.client.kafka_params"):
        fixed = fix_kafka_params({"bootstrap.servers": "h:1"})
    assert fixed["group_id"] == "spark-executor-None"
    assert "group.id is null, you should probably set it" in caplog.text


def test_receive_buffer_is_raised_to_65536_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="dstream_kafka.client.kafka_params"):
        fixed = fix_kafka_params({"group.id": "g", "receive.buffer.bytes": 1024})
    assert fixed["receive_buffer_bytes"] == 65536
    assert "receive.buffer.bytes to 65536 (was 1024), see KAFKA-3135" in caplog.text


def test_receive_buffer_above_65536_is_kept():
    assert (
        fix_kafka_params({"group.id": "g", "receive.buffer.bytes": "1048576"})[
            "receive_buffer_bytes"
        ]
        == 1048576
    )


def test_contradicting_params_are_overridden_with_a_warning_and_the_reset_noted_at_info(caplog):
    with caplog.at_level(logging.INFO, logger="dstream_kafka.client.kafka_params"):
        fixed = fix_kafka_params(
            {"group.id": "g-noted", "enable.auto.commit": "true", "auto.offset.reset": "earliest"}
        )
    assert (fixed["enable_auto_commit"], fixed["auto_offset_reset"]) == (False, "none")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO
             and "auto.offset.reset" in r.getMessage()]
    assert [m.split(" (")[0] for m in warnings] == ["overriding enable.auto.commit to false for executor"]
    assert [m.split(" (")[0] for m in infos] == ["overriding auto.offset.reset to none for executor"]


def test_the_auto_offset_reset_override_is_told_once_per_group_and_value(caplog):
    params = {"group.id": "g-once", "auto.offset.reset": "earliest"}
    with caplog.at_level(logging.INFO, logger="dstream_kafka.client.kafka_params"):
        for _ in range(3):  # a stream translates its parameters more than once, and restarts
            fix_kafka_params(params)
        fix_kafka_params({**params, "auto.offset.reset": "latest"})
        fix_kafka_params({**params, "group.id": "g-other"})
    told = [r.getMessage() for r in caplog.records if "auto.offset.reset" in r.getMessage()]
    assert len(told) == 3
    assert all(r.levelno == logging.INFO for r in caplog.records if "auto.offset.reset" in r.getMessage())


def test_fixing_is_idempotent_and_silent_the_second_time(caplog):
    once = fix_kafka_params({"group.id": "g", "enable.auto.commit": True})
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="dstream_kafka.client.kafka_params"):
        twice = fix_kafka_params(once)
    assert twice == once
    assert caplog.records == []


def test_fix_does_not_modify_its_input():
    params = {"group.id": "g", "enable.auto.commit": "true"}
    fix_kafka_params(params)
    assert params == {"group.id": "g", "enable.auto.commit": "true"}


def test_fix_never_logs_secret_values(caplog):
    with caplog.at_level(logging.DEBUG):
        fix_kafka_params(
            {"sasl.jaas.config": JAAS, "sasl.mechanism": "PLAIN", "receive.buffer.bytes": 1}
        )
    assert "s3cr3t-pw" not in caplog.text


# -- deserializers ---------------------------------------------------------------------------


def test_string_deserializer_class_name_decodes_utf8():
    decode = consumer_config({"value.deserializer": SER + "StringDeserializer"})[
        "value_deserializer"
    ]
    assert decode is utf8_decoder
    assert decode("é".encode()) == "é" and decode(None) is None


def test_byte_array_deserializer_keeps_raw_bytes():
    assert (
        consumer_config({"key.deserializer": SER + "ByteArrayDeserializer"})["key_deserializer"]
        is None
    )


@pytest.mark.parametrize(
    ("name", "data", "expected"),
    [
        ("IntegerDeserializer", b"\xff\xff\xff\xfe", -2),
        ("LongDeserializer", b"\x00" * 7 + b"\x05", 5),
        ("ShortDeserializer", b"\x01\x00", 256),
        ("DoubleDeserializer", b"\x3f\xf8" + b"\x00" * 6, 1.5),
    ],
)
def test_java_number_deserializers_read_big_endian(name, data, expected):
    assert validate_deserializer("value.deserializer", SER + name)(data) == expected


def test_built_in_deserializers_pickle_by_reference():
    decode = validate_deserializer("key.deserializer", SER + "LongDeserializer")
    assert pickle.loads(pickle.dumps(decode)) is decode


def test_unknown_deserializer_class_is_rejected_naming_the_parameter():
    with pytest.raises(
        ConfigurationError,
        match="value.deserializer 'com.example.AvroDeserializer' is not a deserializer",
    ):
        consumer_config({"value.deserializer": "com.example.AvroDeserializer"})


def test_non_serializable_deserializer_is_rejected_naming_the_parameter():
    lock = threading.Lock()

    def decode(data):
        with lock:
            return data

    with pytest.raises(
        ConfigurationError, match="key.deserializer cannot be serialized for executors"
    ):
        consumer_config({"key.deserializer": decode})


def test_non_callable_deserializer_is_rejected():
    with pytest.raises(ConfigurationError, match="value_deserializer must be a callable"):
        consumer_config({"value_deserializer": 42})


def test_lambda_deserializer_is_accepted():
    assert (
        consumer_config({"value.deserializer": lambda b: b[::-1]})["value_deserializer"](b"ab")
        == b"ba"
    )


# -- redaction, driver params, fingerprints ----------------------------------------------------


def test_redact_hides_every_secret_spelling_and_keeps_the_rest():
    shown = redact(
        {
            "sasl.jaas.config": JAAS,
            "sasl_plain_password": "p",
            "ssl.key.password": "k",
            "bootstrap.servers": "h:1",
            "sasl_oauth_token_provider": object(),
        }
    )
    assert shown["bootstrap.servers"] == "h:1"
    assert {shown[k] for k in shown if k != "bootstrap.servers"} == {REDACTED}


def test_driver_consumer_joins_no_group_and_decodes_nothing():
    config = driver_consumer_config(
        {
            "bootstrap.servers": "h:1",
            "group.id": "g",
            "isolation.level": "read_committed",
            "value.deserializer": SER + "StringDeserializer",
        }
    )
    assert config["group_id"] is None
    assert "value_deserializer" not in config
    assert config["isolation_level"] == "read_committed"
    assert config["allow_auto_create_topics"] is False


def test_fingerprint_tells_different_settings_apart():
    base = fix_kafka_params({"bootstrap.servers": "h:1", "group.id": "g"})
    assert params_fingerprint(base) == params_fingerprint(dict(base))
    assert params_fingerprint(base) != params_fingerprint(
        {**base, "isolation_level": "read_committed"}
    )
    assert params_fingerprint({**base, "value_deserializer": lambda b: b}) != params_fingerprint(
        {**base, "value_deserializer": lambda b: b[::-1]}
    )


def test_client_configs_hold_every_client_config_of_one_translation(monkeypatch):
    from dstream_kafka.client import kafka_params

    params = {"bootstrap.servers": "h:1", "group.id": "g", "value.deserializer": SER + "StringDeserializer"}
    translations = []
    translate = kafka_params.consumer_config
    monkeypatch.setattr(kafka_params, "consumer_config",
                        lambda p: translations.append(p) or translate(p))
    configs = ClientConfigs.of(params)
    assert driver_consumer_config(configs) == configs.driver
    with bootstrap_errors(configs):
        pass
    assert configs.librdkafka is configs.librdkafka  # translated on first use, then kept
    assert len(translations) == 1
    monkeypatch.undo()
    assert configs.librdkafka == librdkafka_config(fix_kafka_params(params))
    assert configs.executor == fix_kafka_params(params)
    assert configs.driver == driver_consumer_config(params)
    assert configs.fingerprint == params_fingerprint(configs.executor)


class _UpperDeserializer(kafka.serializer.Deserializer):
    def deserialize(self, topic, bytes_):
        return bytes_.upper()


class _LowerDeserializer(kafka.serializer.Deserializer):
    def deserialize(self, topic, bytes_):
        return bytes_.lower()


def test_fingerprint_tells_two_deserializer_classes_apart():
    base = fix_kafka_params({"bootstrap.servers": "h:1", "group.id": "g"})
    assert params_fingerprint({**base, "value_deserializer": _UpperDeserializer}) != params_fingerprint(
        {**base, "value_deserializer": _LowerDeserializer}
    )


def test_fingerprint_and_error_messages_name_a_callable_alike():
    from dstream_kafka.client.deserializers import deserializer_name, qualified_name

    assert deserializer_name(_UpperDeserializer()) == qualified_name(_UpperDeserializer()) == (
        f"{__name__}._UpperDeserializer"
    )


def test_the_stream_driver_stays_in_the_group_commits_only_explicitly_and_decodes_nothing(caplog):
    with caplog.at_level(logging.WARNING, logger="dstream_kafka.client.kafka_params"):
        config = stream_driver_config(
            {
                "bootstrap.servers": "h:1",
                "group.id": "g",
                "enable.auto.commit": "true",
                "key.deserializer": SER + "StringDeserializer",
            }
        )
    assert config["group_id"] == "g" and config["enable_auto_commit"] is False
    assert "key_deserializer" not in config
    assert "enable.auto.commit=true is ignored by the driver" in caplog.text


def test_store_clients_get_only_the_settings_their_client_takes():
    params = {"bootstrap.servers": "h:1", "group.id": "g", "max.poll.records": 5,
              "value.deserializer": SER + "StringDeserializer"}
    assert store_client_config(params)["max_poll_records"] == 5
    producer = store_client_config(params, "producer")
    assert "max_poll_records" not in producer and "group_id" not in producer
    assert "value_deserializer" not in store_client_config(params)


def test_a_store_default_gives_way_to_the_users_setting_of_the_same_name():
    params = {"bootstrap.servers": "h:1", "client.id": "mine", "request.timeout.ms": "5000"}
    config = store_client_config(params, "admin", defaults={"client_id": "store", "request_timeout_ms": 30000})
    assert (config["client_id"], config["request_timeout_ms"]) == ("mine", 5000)


def test_a_setting_the_store_requires_replaces_the_users_setting_of_the_same_name():
    params = {"bootstrap.servers": "h:1", "group.id": "theirs", "enable.auto.commit": "true"}
    config = store_client_config(params, required={"group_id": "ours", "enable_auto_commit": False})
    assert (config["group_id"], config["enable_auto_commit"]) == ("ours", False)
