"""Unit tests for client/configs.py and client/librdkafka.py: every Kafka client this package
opens (kafka-python consumers, admin clients and producers, librdkafka consumers and producers)
takes its settings from one translation made in client/."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

from dstream_kafka.client import kafka_params, librdkafka
from dstream_kafka.client.configs import (
    ClientConfigs,
    driver_consumer_config,
    params_fingerprint,
    store_client_config,
    stream_driver_config,
)
from dstream_kafka.client.kafka_params import fix_kafka_params
from dstream_kafka.client.librdkafka import librdkafka_config, librdkafka_producer_config
from dstream_kafka.plan.consumer_strategy import Subscribe
from dstream_kafka.read.backends import check_backend
from dstream_kafka.stores.kafka_group import GroupCommitter, KafkaGroupOffsetStore
from dstream_kafka.write.settings import OutputSettings

SER = "org.apache.kafka.common.serialization."
PARAMS = {"bootstrap.servers": "127.0.0.1:1", "group.id": "app", "enable.auto.commit": "true",
          "max.poll.records": "7", "client.id": "mine", "value.deserializer": SER + "StringDeserializer"}


@pytest.fixture
def translations(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every call of the one kafkaParams translation (client/configs.py calls it through its module)."""
    calls: list[Any] = []
    translate = kafka_params.consumer_config
    monkeypatch.setattr(kafka_params, "consumer_config", lambda p: calls.append(p) or translate(p))
    return calls


def test_every_consumer_and_admin_client_takes_its_settings_from_the_one_translation(
        translations: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    configs = ClientConfigs.of(PARAMS)
    derived = {
        "executor": configs.executor,
        "driver": driver_consumer_config(configs),
        "librdkafka": configs.librdkafka,
        "fingerprint": configs.fingerprint,
        "stream driver": stream_driver_config(configs),
        "store consumer": store_client_config(configs),
        "store producer": store_client_config(configs, "producer"),
        "store admin": store_client_config(configs, "admin"),
    }
    assert len(translations) == 1
    monkeypatch.undo()
    # the same settings as each client's own translation of the user's params
    executor = fix_kafka_params(PARAMS)
    assert derived == {
        "executor": executor,
        "driver": driver_consumer_config(PARAMS),
        "librdkafka": librdkafka_config(executor),
        "fingerprint": params_fingerprint(executor),
        "stream driver": stream_driver_config(PARAMS),
        "store consumer": store_client_config(PARAMS),
        "store producer": store_client_config(PARAMS, "producer"),
        "store admin": store_client_config(PARAMS, "admin"),
    }
    assert derived["stream driver"]["enable_auto_commit"] is False
    assert derived["store admin"]["client_id"] == "mine"
    assert "max_poll_records" not in derived["store admin"]


def test_the_librdkafka_settings_are_translated_once_and_kept_for_the_backend_check(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from dstream_kafka.client import configs as configs_module

    calls: list[Any] = []
    translate = configs_module.librdkafka_config
    monkeypatch.setattr(configs_module, "librdkafka_config",
                        lambda p: calls.append(p) or translate(p))
    configs = ClientConfigs.of(PARAMS)
    shipped = check_backend("confluent-kafka", configs)
    assert check_backend("confluent-kafka", configs) is shipped is configs.librdkafka
    assert calls == [configs.executor]
    assert check_backend("kafka-python", configs) is None


def test_the_stream_driver_consumer_takes_the_translation_its_executors_take(
        translations: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[dict[str, Any]] = []

    class Recorder:
        DEFAULT_CONFIG = kafka.KafkaConsumer.DEFAULT_CONFIG

        def __init__(self, **config: Any) -> None:
            opened.append(config)

    monkeypatch.setattr(kafka, "KafkaConsumer", Recorder)
    strategy = Subscribe(["t"], PARAMS)
    strategy._new_consumer()
    assert strategy.client_configs.executor["group_id"] == "spark-executor-app"
    assert len(translations) == 1
    monkeypatch.undo()
    assert opened == [stream_driver_config(PARAMS)]


def test_the_group_store_translates_its_params_once_for_every_client_it_opens(
        translations: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from dstream_kafka.stores import kafka_group

    opened: list[tuple[str, dict[str, Any]]] = []

    class Client:
        def commit(self, offsets: Any, timeout_ms: int) -> None:
            pass

    def bootstrapped(factory: Any, config: dict[str, Any]) -> Client:
        opened.append((factory.__name__, config))
        return Client()

    monkeypatch.setattr(kafka_group, "bootstrapped_client", bootstrapped)
    KafkaGroupOffsetStore(PARAMS, timeout_ms=1000)
    committer = GroupCommitter(PARAMS, timeout_ms=1000)
    committer.commit("g1", {}, 1000)
    committer.commit("g2", {}, 1000)
    assert len(translations) == 2  # one per store object, none per client
    monkeypatch.undo()
    assert opened == [("KafkaConsumer", store_client_config(
        PARAMS, defaults={"client_id": f"dstream-kafka-offsets-{group}", "bootstrap_timeout_ms": 1000},
        required={"group_id": group, "enable_auto_commit": False})) for group in ("g1", "g2")]


def test_the_outputs_librdkafka_producer_settings_come_from_client_librdkafka(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    translate = librdkafka.librdkafka_config
    monkeypatch.setattr(librdkafka, "librdkafka_config", lambda p: calls.append(p) or translate(p))
    settings = OutputSettings.of({"bootstrap.servers": "127.0.0.1:1", "linger.ms": "5"}, "t",
                                 "at-least-once", "confluent-kafka")
    assert len(calls) == 1  # the consumer's client-setting translation, shared
    monkeypatch.undo()
    assert settings.librdkafka == librdkafka_producer_config(settings.producer)
    assert settings.librdkafka is not None and settings.librdkafka["linger.ms"] == 5
    assert "group.id" not in settings.librdkafka


def test_the_old_import_path_of_the_librdkafka_translation_still_imports_it() -> None:
    from dstream_kafka.read.backends import confluent

    assert confluent.librdkafka_config is librdkafka.librdkafka_config
    assert confluent.require_confluent is librdkafka.require_confluent


def test_client_configs_show_no_secret() -> None:
    jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="alice" password="s3cr3t-pw";')
    configs = ClientConfigs.of({**PARAMS, "security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas})
    assert configs.consumer["sasl_plain_password"] == "s3cr3t-pw"
    assert "s3cr3t-pw" not in repr(configs) and "alice" in repr(configs)


def test_a_strategy_giving_its_executors_other_params_keeps_the_driver_consumer_on_its_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[dict[str, Any]] = []

    class Recorder:
        DEFAULT_CONFIG = kafka.KafkaConsumer.DEFAULT_CONFIG

        def __init__(self, **config: Any) -> None:
            opened.append(config)

    class FasterExecutors(Subscribe):
        @property
        def executorKafkaParams(self) -> dict[str, Any]:
            return {**self.kafkaParams, "max.poll.records": "500"}

    monkeypatch.setattr(kafka, "KafkaConsumer", Recorder)
    strategy = FasterExecutors(["t"], PARAMS)
    strategy._new_consumer()
    assert strategy.client_configs.executor["max_poll_records"] == 500
    assert opened[0]["max_poll_records"] == 7
