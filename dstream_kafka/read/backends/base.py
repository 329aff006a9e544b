"""What every executor consumer backend shares: the backend names, the executor-config key of
the librdkafka translation, the fetch error, the deserializer wrapper and the backend protocol.

Its own module so that the two backends (:mod:`.kafka_python`, :mod:`.confluent`) import it,
not the package, whose :func:`~dstream_kafka.read.backends.create_backend` imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from dstream_kafka.client.deserializers import deserializer_name
from dstream_kafka.errors import KafkaReadError
from dstream_kafka.record import ConsumerRecord

__all__ = [
    "BACKENDS",
    "CONFLUENT",
    "DEFAULT_BACKEND",
    "KAFKA_PYTHON",
    "LIBRDKAFKA_KEY",
    "ConsumerBackend",
    "OffsetOutOfRange",
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
