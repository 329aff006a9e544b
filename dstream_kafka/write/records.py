"""The records a Kafka output accepts, as Structured Streaming's Kafka sink accepts rows.

A record is a ``(key, value)`` pair or a dict with ``value`` (required; ``None`` writes a
tombstone) and optionally ``key``, ``headers``, ``topic`` and ``partition``. ``topic`` is
required unless the output was given one (a record's own ``topic`` wins, as with the sink's
``topic`` column). ``headers`` is a list of ``(str, bytes)`` pairs or a dict
``{str: bytes}`` (``str`` values are encoded as UTF-8). Anything else fails the task with an
error naming the field and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from dstream_kafka.errors import ConfigurationError

__all__ = ["Message", "message_builder"]

_FIELDS = frozenset({"key", "value", "headers", "topic", "partition"})


class Message(NamedTuple):
    """One record ready for a producer: serialized key and value, checked fields."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def _headers(headers: Any) -> list[tuple[str, bytes]]:
    if headers is None:
        return []
    pairs = list(headers.items()) if isinstance(headers, Mapping) else headers
    out = []
    try:
        for name, data in pairs:
            if not isinstance(name, str):
                raise TypeError
            if isinstance(data, str):
                data = data.encode("utf-8")
            elif data is not None and not isinstance(data, (bytes, bytearray)):
                raise TypeError
            out.append((name, b"" if data is None else bytes(data)))
    except (TypeError, ValueError):
        raise ConfigurationError(
            "a record's headers must be a list of (str, bytes) pairs or a dict {str: bytes}, "
            f"got {type(headers).__name__}") from None
    return out


def message_builder(topic: str | None, key_serializer: Callable[[Any], bytes | None],
                    value_serializer: Callable[[Any], bytes | None]
                    ) -> Callable[[Any], Message]:
    """Return ``build(record) -> Message`` for an output whose topic is ``topic``.

    Raises (from ``build``)
    -----------------------
    ConfigurationError
        For a record that is neither a pair nor a dict, a dict without ``value`` or with
        unknown fields, no topic, a bad partition or headers, or a key or value the
        serializers do not take.
    """
    def build(record: Any) -> Message:
        if isinstance(record, Mapping):
            unknown = set(record) - _FIELDS
            if unknown:
                raise ConfigurationError(
                    f"a record dict has unknown field(s) {', '.join(sorted(map(str, unknown)))};"
                    f" it may hold {', '.join(sorted(_FIELDS))}")
            if "value" not in record:
                raise ConfigurationError(
                    "a record dict needs 'value' (None writes a tombstone); e.g. "
                    "{'key': b'k', 'value': b'v'}")
            key, value = record.get("key"), record["value"]
            target = record.get("topic") or topic
            partition = record.get("partition")
            headers = _headers(record.get("headers"))
        elif isinstance(record, tuple) and len(record) == 2:
            key, value = record
            target, partition, headers = topic, None, []
        else:
            raise ConfigurationError(
                f"the Kafka output writes (key, value) pairs or dicts with key/value/headers/"
                f"topic/partition, got {type(record).__name__}; map the records to one of them "
                "first, e.g. stream.map(lambda r: (r.key, r.value))")
        if not target:
            raise ConfigurationError(
                "a record names no topic and the Kafka output has none: pass topic=... to the "
                "output or give each record dict a 'topic'")
        if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)
                                      or partition < 0):
            raise ConfigurationError(
                f"a record's partition must be a whole number >= 0 (or absent), got {partition!r}")
        return Message(str(target), partition, key_serializer(key), value_serializer(value),
                       headers)

    return build
