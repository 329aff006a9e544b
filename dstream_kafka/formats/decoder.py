"""The shared part of the Schema Registry decoders: framing, schema look-ups and error reports.

A format decoder (:class:`~dstream_kafka.formats.avro.AvroDecoder`, ...) turns one serialized
key or value into a Python value. It holds only :class:`RegistrySettings` and its own options,
so it pickles to executors; there it fetches each writer schema once per process by the id the
record carries. Any failure of one record becomes a :class:`~dstream_kafka.errors.RecordDecodeError`
(:class:`~dstream_kafka.errors.UnknownSchemaError` for an id the registry does not know) naming
the topic, partition, offset and schema id; a registry that cannot be reached or refuses the
credentials raises :class:`~dstream_kafka.errors.SchemaRegistryError`, which is never a record's fault.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar, Hashable, Sequence

from dstream_kafka.errors import (
    ConfigurationError,
    MissingDependencyError,
    RecordDecodeError,
    SchemaRegistryError,
    UnknownSchemaError,
)
from dstream_kafka.formats.registry import (RegistrySettings, bounded_call, cached_schema, registry_client,
                                           registry_failure)
from dstream_kafka.formats.wire import WireFormatError, split_schema_id

__all__ = ["RegistryDecoder"]


class _UnknownId(Exception):
    """The registry answered 404 for a schema id (or GUID)."""


class RegistryDecoder(abc.ABC):
    """Decode keys or values written by a Schema Registry serializer (one format per class).

    Parameters
    ----------
    registry : RegistrySettings
        The registry that holds the writer schemas.
    """

    #: The format's name in messages (``Avro``, ``Protobuf``, ``JSON Schema``).
    format_name: ClassVar[str] = "?"
    #: The registry's schemaType this decoder reads.
    schema_type: ClassVar[str] = "?"

    def __init__(self, registry: RegistrySettings) -> None:
        if not isinstance(registry, RegistrySettings):
            raise ConfigurationError(
                f"{type(self).__name__} registry must be a RegistrySettings, got {type(registry).__name__}")
        self.registry = registry

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.registry!r})"

    @abc.abstractmethod
    def _parse_writer(self, schema: Any) -> Any:
        """Return the format's parsed form of a registry ``Schema`` (kept per process and id)."""

    @abc.abstractmethod
    def _decode_body(self, writer: Any, body: bytes) -> Any:
        """Return the Python value of ``body`` written with the parsed ``writer`` schema."""

    def _variant(self) -> Hashable:
        """The options that change what :meth:`_parse_writer` returns (part of the cache key)."""
        return ()

    def writer_schema(self, schema_id: int | str) -> Any:
        """Return the parsed writer schema of ``schema_id`` (an id, or a GUID as str), cached."""
        return cached_schema(self.registry, (type(self).__name__, self._variant()), schema_id,
                             lambda: self._parse_writer(self._fetch(schema_id)))

    def _fetch(self, schema_id: int | str) -> Any:
        client = registry_client(self.registry)
        try:
            from confluent_kafka.schema_registry.error import SchemaRegistryError as ClientError
        except ImportError:  # pragma: no cover - registry_client already needed it
            raise MissingDependencyError("install dstream_kafka[registry]") from None
        try:
            if isinstance(schema_id, str):
                schema = bounded_call(self.registry, lambda: client.get_schema_by_guid(schema_id))
            else:
                schema = bounded_call(self.registry, lambda: client.get_schema(schema_id))
        except ClientError as exc:
            if exc.http_status_code == 404:
                raise _UnknownId() from None
            raise registry_failure(self.registry, f"to return schema {schema_id}", exc) from None
        except Exception as exc:  # connection refused, TLS, timeouts: the registry's, not the record's
            raise registry_failure(self.registry, f"to return schema {schema_id}", exc) from None
        kind = (schema.schema_type or "AVRO").upper()
        if kind != self.schema_type:
            raise WireFormatError(f"schema {schema_id} is a {kind} schema, not {self.schema_type}")
        return schema

    def decode(self, data: bytes | None, headers: Sequence[tuple[str, bytes | None]] = (),
               is_key: bool = False, topic: str = "?", partition: int = -1,
               offset: int = -1) -> Any:
        """Return the Python value of one serialized key or value (``None`` stays ``None``).

        ``topic``, ``partition`` and ``offset`` only name the record in errors.

        Raises
        ------
        RecordDecodeError
            The bytes are not in the wire format or do not match their writer schema.
        UnknownSchemaError
            The registry has no schema with the record's id.
        SchemaRegistryError
            The registry failed, could not be reached or refused the credentials.
        ConfigurationError
            ``data`` is not bytes (records read with a ``key.deserializer`` or ``value.deserializer``).
        """
        if data is None:
            return None  # a tombstone has no schema
        field = "key" if is_key else "value"
        if not isinstance(data, (bytes, bytearray, memoryview)):
            # a program mistake, not a bad record: refused in skip mode too
            raise ConfigurationError(
                f"{type(self).__name__} needs the raw bytes of the {field}, got "
                f"{type(data).__name__} at topic {topic!r} partition {partition} offset {offset}: "
                f"read the records without a {field}.deserializer in kafkaParams")
        where = f"the {self.format_name} {field} of topic {topic!r} partition {partition} offset {offset}"
        schema_id: int | str | None = None
        try:
            schema_id, body = split_schema_id(data, headers, is_key)
            return self._decode_body(self.writer_schema(schema_id), body)
        except _UnknownId:
            raise UnknownSchemaError(
                f"cannot decode {where}: schema id {schema_id} is not in the Schema Registry at "
                f"{self.registry.display_url} (written against another registry, or deleted?)",
                topic, partition, offset, schema_id) from None
        except (SchemaRegistryError, MissingDependencyError, ConfigurationError):
            raise
        except Exception as exc:  # the record's bytes do not decode: name the record
            ident = f" (schema id {schema_id})" if schema_id is not None else ""
            raise RecordDecodeError(
                f"cannot decode {where}{ident}: {type(exc).__name__}: {self.registry.scrub(str(exc))}",
                topic, partition, offset, schema_id) from None
