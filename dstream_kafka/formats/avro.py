"""Avro keys and values from the Schema Registry, with an optional reader schema for evolution."""

from __future__ import annotations

import io
import json
from typing import Any, Hashable

from dstream_kafka.errors import ConfigurationError, MissingDependencyError
from dstream_kafka.formats.decoder import RegistryDecoder
from dstream_kafka.formats.registry import RegistrySettings

__all__ = ["AvroDecoder"]


def _fastavro() -> Any:
    try:
        import fastavro
    except ImportError:
        raise MissingDependencyError(
            "Avro decoding needs fastavro; install it with `pip install dstream_kafka[registry]`") from None
    return fastavro


class AvroDecoder(RegistryDecoder):
    """Decode Avro written by a registry serializer into dicts, lists and scalars.

    Parameters
    ----------
    registry : RegistrySettings
        The registry holding the writer schemas.
    reader_schema : str or dict, optional
        The schema to read into (Avro schema resolution): fields the writer lacks take their
        defaults, fields the reader lacks are dropped. Without it each record is read with
        its writer's schema.
    return_record_name : bool
        Decode a union of records as ``(record name, value)`` tuples, as fastavro does.

    Raises
    ------
    ConfigurationError
        When ``reader_schema`` is not a valid Avro schema (checked here, on the driver).
    """

    format_name = "Avro"
    schema_type = "AVRO"

    def __init__(self, registry: RegistrySettings, reader_schema: str | dict[str, Any] | None = None,
                 return_record_name: bool = False) -> None:
        super().__init__(registry)
        self.reader_schema = reader_schema
        self.return_record_name = return_record_name
        if reader_schema is not None:
            self._parse(reader_schema, "reader_schema")

    @staticmethod
    def _parse(schema: str | dict[str, Any], what: str) -> Any:
        fastavro = _fastavro()
        try:
            loaded = json.loads(schema) if isinstance(schema, str) else schema
            return fastavro.parse_schema(loaded)
        except Exception as exc:
            raise ConfigurationError(f"AvroDecoder {what} is not a valid Avro schema: {exc}") from None

    def _variant(self) -> Hashable:
        # the parsed reader schema is kept with each writer schema: the pair is the cache entry
        reader = self.reader_schema
        return reader if reader is None or isinstance(reader, str) else json.dumps(reader, sort_keys=True)

    def _parse_writer(self, schema: Any) -> Any:
        # schema references are not resolved: a schema that names another subject's type fails here
        writer = _fastavro().parse_schema(json.loads(schema.schema_str))
        reader = None if self.reader_schema is None else self._parse(self.reader_schema, "reader_schema")
        return writer, reader

    def _decode_body(self, writer: Any, body: bytes) -> Any:
        writer_schema, reader_schema = writer
        stream = io.BytesIO(body)
        value = _fastavro().schemaless_reader(stream, writer_schema, reader_schema,
                                              return_record_name=self.return_record_name)
        if stream.tell() != len(body):
            raise ValueError(f"{len(body) - stream.tell()} bytes left after the Avro value")
        return value
