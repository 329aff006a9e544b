"""Deserializers: Kafka's Java deserializer class names and their Python equivalents.

``kafkaParams`` may name a deserializer as Spark programs do
(``"org.apache.kafka.common.serialization.StringDeserializer"``) or pass a Python callable
``bytes -> object``; :func:`validate_deserializer` turns either into what executors apply.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from dstream_kafka.errors import ConfigurationError

__all__ = [
    "DESERIALIZER_CLASSES",
    "check_picklable",
    "deserializer_name",
    "qualified_name",
    "utf8_decoder",
    "validate_deserializer",
]


def utf8_decoder(data: bytes | None) -> str | None:
    """Decode UTF-8 bytes, passing ``None`` through (Kafka's ``StringDeserializer``)."""
    return None if data is None else data.decode("utf-8")


def _decode_int(data: bytes | None) -> int | None:
    return None if data is None else _INT.unpack(data)[0]


def _decode_long(data: bytes | None) -> int | None:
    return None if data is None else _LONG.unpack(data)[0]


def _decode_short(data: bytes | None) -> int | None:
    return None if data is None else _SHORT.unpack(data)[0]


def _decode_float(data: bytes | None) -> float | None:
    return None if data is None else _FLOAT.unpack(data)[0]


def _decode_double(data: bytes | None) -> float | None:
    return None if data is None else _DOUBLE.unpack(data)[0]


def _uuid_decoder(data: bytes | None) -> str | None:
    # Java's UUIDDeserializer reads the UTF-8 string form.
    return None if data is None else str(uuid.UUID(data.decode("utf-8")))


def _void_decoder(data: bytes | None) -> None:
    return None


# Java serializers write numbers big-endian.
_INT, _LONG, _SHORT, _FLOAT, _DOUBLE = (struct.Struct(f) for f in (">i", ">q", ">h", ">f", ">d"))

_KAFKA_SER = "org.apache.kafka.common.serialization."
#: Java deserializer class names and their Python equivalents (``None`` keeps raw bytes).
DESERIALIZER_CLASSES: Mapping[str, Callable[[bytes | None], Any] | None] = {
    _KAFKA_SER + "ByteArrayDeserializer": None,
    _KAFKA_SER + "BytesDeserializer": None,
    _KAFKA_SER + "ByteBufferDeserializer": None,
    _KAFKA_SER + "StringDeserializer": utf8_decoder,
    _KAFKA_SER + "IntegerDeserializer": _decode_int,
    _KAFKA_SER + "LongDeserializer": _decode_long,
    _KAFKA_SER + "ShortDeserializer": _decode_short,
    _KAFKA_SER + "FloatDeserializer": _decode_float,
    _KAFKA_SER + "DoubleDeserializer": _decode_double,
    _KAFKA_SER + "UUIDDeserializer": _uuid_decoder,
    _KAFKA_SER + "VoidDeserializer": _void_decoder,
}

def deserializer_name(value: Any) -> str:
    """Return a name for deserializer ``value`` fit for an error message.

    The Java class's short name (``IntegerDeserializer``) for the Python equivalents of
    :data:`DESERIALIZER_CLASSES`, else the callable's qualified name (or its type's).
    """
    for java_name, decode in DESERIALIZER_CLASSES.items():
        if decode is not None and decode is value:
            return java_name.rsplit(".", 1)[1]
    return qualified_name(value)


def qualified_name(value: Any) -> str:
    """Return ``module.qualname`` of a function or class ``value``, else of its type.

    Two lambdas of one scope share it; callers that must tell them apart add their code's digest.
    """
    target = value if hasattr(value, "__qualname__") else type(value)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"


def validate_deserializer(name: str, value: Any) -> Any:
    """Return the Python deserializer for parameter ``name`` or raise.

    Accepts ``None`` (raw bytes), a Java class name from :data:`DESERIALIZER_CLASSES`, a
    callable ``bytes -> object`` or a ``kafka.serializer.Deserializer`` instance. Callables
    must pickle with cloudpickle, because executors receive them inside the task.

    Raises
    ------
    ConfigurationError
        For an unknown class name, a non-callable value, or one that cannot be pickled.
    """
    if value is None:
        return None
    if isinstance(value, str):
        if value in DESERIALIZER_CLASSES:
            return DESERIALIZER_CLASSES[value]
        raise ConfigurationError(
            f"{name} {value!r} is not a deserializer dstream_kafka knows; use one of "
            f"{', '.join(sorted(c.rsplit('.', 1)[1] for c in DESERIALIZER_CLASSES))} "
            f"(as org.apache.kafka.common.serialization.<Name>) or pass a Python callable "
            "bytes -> object"
        )
    from kafka.serializer import Deserializer

    if not callable(value) and not isinstance(value, Deserializer):
        raise ConfigurationError(
            f"{name} must be a callable bytes -> object, a kafka.serializer.Deserializer or a "
            f"Java class name, got {type(value).__name__}"
        )
    return check_picklable(name, value)


def check_picklable(name: str, value: Any) -> Any:
    """Return ``value`` (of parameter ``name``) once it pickles for executors, or raise
    :class:`~dstream_kafka.errors.ConfigurationError` naming the parameter."""
    from pyspark import cloudpickle

    try:
        cloudpickle.dumps(value)  # type: ignore[no-untyped-call]  # PySpark ships no hints here
    except Exception as exc:  # anything the pickler raises means executors cannot get it
        raise ConfigurationError(
            f"{name} cannot be serialized for executors ({type(exc).__name__}: {exc}); use a "
            "module-level function or a lambda that does not capture locks, sockets or clients"
        ) from None
    return value
