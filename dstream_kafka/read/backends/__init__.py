"""Executor consumer backends: the client calls that differ between Kafka client libraries.

:class:`~dstream_kafka.read.internal_consumer.InternalKafkaConsumer` holds the read logic once
(buffering, strict and gap-skipping iteration, Spark's error texts, counters); a backend only
fetches, seeks, reports its position and the log bounds, and closes. Two backends exist,
selected with ``spark.streaming.kafka.consumer.backend``:

* ``kafka-python`` (the default): :mod:`dstream_kafka.read.backends.kafka_python`;
* ``confluent-kafka`` (``pip install dstream_kafka[fast]``):
  :mod:`dstream_kafka.read.backends.confluent`, librdkafka underneath, several times faster.

Both take the executor parameters of :func:`~dstream_kafka.client.kafka_params.fix_kafka_params`
(kafka-python keyword names); the confluent backend takes them in librdkafka's names too
(:func:`~dstream_kafka.client.librdkafka.librdkafka_config`, translated on the driver).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.read.backends.base import (
    BACKENDS,
    CONFLUENT,
    DEFAULT_BACKEND,
    KAFKA_PYTHON,
    LIBRDKAFKA_KEY,
    ConsumerBackend,
    OffsetOutOfRange,
    record_decoder,
)

if TYPE_CHECKING:  # the executor's read path imports this module: it stays light
    from dstream_kafka.client.configs import ClientConfigs

__all__ = [
    "BACKENDS",
    "CONFLUENT",
    "DEFAULT_BACKEND",
    "KAFKA_PYTHON",
    "LIBRDKAFKA_KEY",
    "ConsumerBackend",
    "OffsetOutOfRange",
    "check_backend",
    "create_backend",
    "record_decoder",
]


def check_backend(
    name: str, executor_params: Mapping[str, Any] | ClientConfigs | None = None
) -> dict[str, Any] | None:
    """Fail on the driver, before any job, when backend ``name`` cannot run.

    Returns the confluent-kafka backend's librdkafka settings for ``executor_params`` (the
    executor consumer's settings, or their ClientConfigs, whose
    :attr:`~dstream_kafka.client.configs.ClientConfigs.librdkafka` it returns), so executors
    need not translate them again; None for kafka-python.

    Raises
    ------
    ConfigurationError
        For an unknown backend, or parameters the backend cannot translate.
    MissingDependencyError
        When the confluent-kafka backend is selected and the package is missing.
    """
    if name == KAFKA_PYTHON:
        return None
    if name != CONFLUENT:
        raise ConfigurationError(
            f"Unknown consumer backend {name!r}; spark.streaming.kafka.consumer.backend must be "
            f"one of {', '.join(BACKENDS)}"
        )
    from dstream_kafka.client.configs import ClientConfigs
    from dstream_kafka.client.librdkafka import librdkafka_config, require_confluent

    require_confluent()
    if isinstance(executor_params, ClientConfigs):
        return executor_params.librdkafka  # translated once, kept with the other clients'
    return None if executor_params is None else librdkafka_config(executor_params)


def create_backend(
    name: str, topic: str, partition: int, config: Mapping[str, Any]
) -> ConsumerBackend:
    """Create backend ``name``'s client for ``topic``-``partition`` (executor side).

    For confluent-kafka, ``config`` may carry the driver's librdkafka translation under
    :data:`LIBRDKAFKA_KEY` (:func:`check_backend`); without it the backend translates.
    """
    if name == CONFLUENT:
        from dstream_kafka.read.backends.confluent import ConfluentBackend

        return ConfluentBackend(topic, partition, config)
    if name == KAFKA_PYTHON:
        from dstream_kafka.read.backends.kafka_python import KafkaPythonBackend

        return KafkaPythonBackend(topic, partition, config)
    raise ConfigurationError(f"Unknown consumer backend {name!r}; use one of {', '.join(BACKENDS)}")

