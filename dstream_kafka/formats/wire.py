"""The Schema Registry wire format: where a record says which schema wrote it.

Confluent's serializers put a 5-byte prefix before the body: magic byte 0, then the schema id
as a 4-byte big-endian integer. Since confluent-kafka 2.10.1 the id may instead travel in a
``__value_schema_id`` (or ``__key_schema_id``) header as magic byte 1 plus a 16-byte GUID; the
default deserializer looks at that header first, then at the prefix, and so does
:func:`split_schema_id`. Protobuf bodies start with the path of message indexes of the writer
message inside its file, as zigzag varints: a count, then the indexes (count 0 means ``[0]``).
"""

from __future__ import annotations

import uuid
from typing import NamedTuple, Sequence

__all__ = ["SchemaRef", "split_schema_id", "read_message_indexes", "MAGIC_ID", "MAGIC_GUID"]

#: First byte of a prefixed body: a 4-byte schema id follows.
MAGIC_ID = 0
#: First byte of a schema-id header: a 16-byte GUID follows.
MAGIC_GUID = 1
_HEADERS = {False: "__value_schema_id", True: "__key_schema_id"}


class SchemaRef(NamedTuple):
    """Which schema wrote a body: a registry id (an int) or a GUID (a str), and the body."""

    schema_id: int | str
    body: bytes


class WireFormatError(ValueError):
    """The bytes do not follow the wire format (the decoder adds where the record came from)."""


def split_schema_id(data: bytes, headers: Sequence[tuple[str, bytes | None]] = (),
                    is_key: bool = False) -> SchemaRef:
    """Return the writer schema's id (or GUID) and the body of a serialized key or value.

    Raises
    ------
    WireFormatError
        When the header or the prefix is malformed, or the value has neither.
    """
    wanted = _HEADERS[is_key]
    for name, raw in reversed(tuple(headers or ())):  # the last header of a name wins, as in Java
        if name == wanted and raw is not None:
            if len(raw) != 17 or raw[0] != MAGIC_GUID:
                raise WireFormatError(
                    f"header {wanted} holds {len(raw)} bytes starting {raw[:1].hex() or 'empty'}; "
                    "expected magic byte 01 and a 16-byte GUID")
            return SchemaRef(str(uuid.UUID(bytes=bytes(raw[1:]))), bytes(data))
    if len(data) < 5:
        raise WireFormatError(f"{len(data)} bytes are too short for the 5-byte schema-id prefix")
    if data[0] != MAGIC_ID:
        raise WireFormatError(
            f"first byte is {data[0]:#04x}, not the magic byte 0x00 of the Schema Registry "
            "wire format (was it written without a registry serializer?)")
    return SchemaRef(int.from_bytes(data[1:5], "big"), bytes(data[5:]))


def _read_zigzag(data: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if pos >= len(data):
            raise WireFormatError("the Protobuf message-index path ends inside a varint")
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift > 63:
            raise WireFormatError("a Protobuf message-index varint is longer than 10 bytes")
    return (raw >> 1) ^ -(raw & 1), pos


def read_message_indexes(body: bytes) -> tuple[list[int], bytes]:
    """Return the Protobuf message-index path at the start of ``body`` and the message bytes."""
    count, pos = _read_zigzag(body, 0)
    if count < 0 or count > len(body):
        raise WireFormatError(f"the Protobuf message-index count {count} is impossible")
    if count == 0:
        return [0], body[pos:]
    indexes = []
    for _ in range(count):
        index, pos = _read_zigzag(body, pos)
        if index < 0:
            raise WireFormatError(f"negative Protobuf message index {index}")
        indexes.append(index)
    return indexes, body[pos:]
