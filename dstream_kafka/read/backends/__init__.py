"""Executor consumer backends: the client calls that differ between Kafka client libraries.

:class:`~dstream_kafka.read.internal_consumer.InternalKafkaConsumer` holds the read logic once
(buffering, strict and gap-skipping iteration, Spark's error texts, counters); a backend only
fetches, seeks, reports its position and the log bounds, and closes. Two backends exist,
selected with ``spark.streaming.kafka.consumer.backend``:

* ``kafka-python`` (the default): :mod:`dstream_kafka.read.backends.kafka_python`;
* ``confluent-kafka`` (``pip install dstream_kafka[fast]``):
  :mod:`dstream_kafka.read.backends.confluent`, librdkafka underneath, several times faster.

Both take the executor parameters of :func:`~dstream_kafka.client.kafka_params.fix_kafka_params`
(kafka-python keyword names); the confluent backend translates them to librdkafka settings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from dstream_kafka.client.deserializers import deserializer_name
from dstream_kafka.errors import ConfigurationError, KafkaReadError
from dstream_kafka.record import ConsumerRecord

if TYPE_CHECKING:  # the executor's read path imports this module: it stays light
    from dstream_kafka.client.configs import ClientConfigs

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "LIBRDKAFKA_KEY",
    "ConsumerBackend",
    "OffsetOutOfRange",
    "check_backend",
    "create_backend",
    "record_decoder",
]

#: Where an executor config carries the driver's librdkafka translation (confluent-kafka only;
#: dotted, so it is never a kafka-python setting).
LIBRDKAFKA_KEY = "dstream_kafka.librdkafka"

KAFKA_PYTHON = "kafka-python"
CONFLUENT = "confluent-kafka"
DEFAULT_BACKEND = KAFKA_PYTHON
BACKENDS = (KAFKA_PYTHON, CONFLUENT)


class OffsetOutOfRange(Exception):
    """A fetch found the requested offset outside the log (``auto.offset.reset=none``)."""


def record_decoder(
    deserializer: Any, field: str, topic: str, partition: int
) -> Callable[[bytes | None, Any, int], Any] | None:
    """Return ``decode(data, headers, offset)`` applying a kafka-python style deserializer.

    ``deserializer`` is a callable ``bytes -> object`` or a ``kafka.serializer.Deserializer``
    (``deserialize(topic, headers, data)`` or the older ``deserialize(topic, data)``); None
    (raw bytes) returns None. ``field`` is ``"key"`` or ``"value"``. Any exception the
    deserializer raises becomes a :class:`~dstream_kafka.errors.KafkaReadError` naming the
    parameter, the deserializer, the topic, partition and offset of the record, and its size.
    """
    if deserializer is None:
        return None
    deserialize = getattr(deserializer, "deserialize", None)

    def apply(data: bytes | None, headers: Any) -> Any:
        if deserialize is None:
            return deserializer(data)
        try:
            return deserialize(topic, headers, data)
        except TypeError:  # the older deserialize(topic, data) signature, as kafka-python allows
            return deserialize(topic, data)

    def decode(data: bytes | None, headers: Any, offset: int) -> Any:
        try:
            return apply(data, headers)
        except Exception as exc:
            size = "null" if data is None else f"{len(data)} bytes"
            raise KafkaReadError(
                f"{field}.deserializer {deserializer_name(deserializer)} failed on the record at "
                f"topic {topic} partition {partition} offset {offset} ({field} is {size}): "
                f"{type(exc).__name__}: {exc}. Set {field}.deserializer to match what the "
                "producer wrote (StringDeserializer for text, ByteArrayDeserializer for raw "
                "bytes)"
            ) from exc

    return decode


class ConsumerBackend(Protocol):
    """One client assigned to one topic partition; not thread-safe.

    The client is created by the constructor. Offsets are absolute. :meth:`fetch` returns
    the client's own record objects ("items"), in offset order; :attr:`offset_of` reads an
    item's offset (a C-level callable, so a whole batch can be checked at once) and
    :meth:`to_record` turns an item into a deserialized
    :class:`~dstream_kafka.record.ConsumerRecord` when it is handed out, so records are
    built one at a time rather than a batch at a time.
    """

    #: ``offset_of(item)``: the offset of an item returned by :meth:`fetch`.
    offset_of: Callable[[Any], int]

    def to_record(self, item: Any) -> ConsumerRecord:
        """Return ``item`` as a deserialized record."""

    def seek(self, offset: int) -> None:
        """Make the next :meth:`fetch` start at ``offset``, dropping prefetched data."""

    def fetch(self, timeout_ms: int, max_records: int | None = None) -> list[Any]:
        """Return the next items (waiting up to ``timeout_ms`` for the first one), or [].

        Only records, no error or end-of-partition events; at most ``max_records``
        (``None``: the backend's batch size, which ``max.poll.records`` caps when set); the
        rest stays in the client for the next call. Raises :class:`OffsetOutOfRange` when
        the fetch position is outside the log.
        """

    def position(self) -> int:
        """Return the offset after everything fetched so far, gaps included (-1: unknown).

        Past transaction markers, aborted and compacted records the client stepped over.
        """

    def watermarks(self, timeout_ms: int) -> tuple[int | None, int | None]:
        """Return the log's ``(earliest, end)`` offsets, ``None`` where unknown."""

    def close(self) -> None:
        """Close the client (best effort, may raise)."""


def check_backend(
    name: str, executor_params: Mapping[str, Any] | ClientConfigs | None = None
) -> dict[str, Any] | None:
    """Fail on the driver, before any job, when backend ``name`` cannot run.

    Returns the confluent-kafka backend's librdkafka settings for ``executor_params`` (the
    executor consumer's settings, or their ClientConfigs, whose translation is reused), so
    executors need not translate them again; None for kafka-python.

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
    from dstream_kafka.read.backends.confluent import librdkafka_config, require_confluent

    require_confluent()
    if isinstance(executor_params, ClientConfigs):
        if executor_params.librdkafka is not None:
            return executor_params.librdkafka
        executor_params = executor_params.executor
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

