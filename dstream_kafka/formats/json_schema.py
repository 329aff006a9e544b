"""JSON Schema keys and values from the Schema Registry, validated against the writer schema."""

from __future__ import annotations

import json
from typing import Any, Hashable

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.formats.decoder import RegistryDecoder
from dstream_kafka.formats.registry import RegistrySettings

__all__ = ["JsonSchemaDecoder"]


class JsonSchemaDecoder(RegistryDecoder):
    """Decode JSON written by a registry JSON Schema serializer into Python values.

    Parameters
    ----------
    registry : RegistrySettings
        The registry holding the writer schemas.
    validate : bool
        Check each value against its writer schema (``jsonschema``); a value that does not
        conform is a bad record.
    """

    format_name = "JSON Schema"
    schema_type = "JSON"

    def __init__(self, registry: RegistrySettings, validate: bool = True) -> None:
        super().__init__(registry)
        self.validate = validate

    def _variant(self) -> Hashable:
        return self.validate

    def _parse_writer(self, schema: Any) -> Any:
        if not self.validate:
            return None
        try:
            import jsonschema
        except ImportError:
            raise MissingDependencyError(
                "JSON Schema validation needs jsonschema; install it with "
                "`pip install dstream_kafka[registry]` or pass validate=False") from None
        loaded = json.loads(schema.schema_str)
        cls = jsonschema.validators.validator_for(loaded)
        cls.check_schema(loaded)
        return cls(loaded)

    def _decode_body(self, writer: Any, body: bytes) -> Any:
        value = json.loads(body)
        if writer is not None:
            error = next(iter(writer.iter_errors(value)), None)
            if error is not None:
                path = "/".join(str(p) for p in error.absolute_path) or "(root)"
                raise ValueError(f"the value does not conform to its schema at {path}: {error.message}")
        return value
