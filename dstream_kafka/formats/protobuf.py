"""Protobuf keys and values from the Schema Registry, without generated classes.

The writer's file descriptor comes from the registry (as confluent-kafka's serializer registers
it: a base64 ``FileDescriptorProto``), with the files it imports resolved through the schema's
references, and the well-known ``google/protobuf/*`` files from the protobuf package. Each
schema id gets its own descriptor pool in the worker, so two versions of one message never clash.
"""

from __future__ import annotations

import base64
import binascii
import importlib
from typing import Any, Hashable

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.formats.decoder import RegistryDecoder
from dstream_kafka.formats.registry import RegistrySettings, bounded_call, registry_client, registry_failure
from dstream_kafka.formats.wire import WireFormatError, read_message_indexes

__all__ = ["ProtobufDecoder", "message_to_python"]


def _protobuf() -> Any:
    try:
        from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
    except ImportError:
        raise MissingDependencyError(
            "Protobuf decoding needs protobuf; install it with `pip install dstream_kafka[registry]`") from None
    return descriptor_pb2, descriptor_pool, message_factory


class ProtobufDecoder(RegistryDecoder):
    """Decode Protobuf written by a registry serializer into dicts (or messages).

    Parameters
    ----------
    registry : RegistrySettings
        The registry holding the writer schemas.
    as_dict : bool
        Return a ``dict`` of every field by its ``.proto`` name (:func:`message_to_python`)
        rather than the message object, whose class is built at run time and does not pickle
        between Python processes.
    message_type : type, optional
        A generated message class to parse every body into, instead of the class built from the
        writer's descriptor (for schemas registered as ``.proto`` text).
    """

    format_name = "Protobuf"
    schema_type = "PROTOBUF"

    def __init__(self, registry: RegistrySettings, as_dict: bool = True,
                 message_type: type | None = None) -> None:
        super().__init__(registry)
        self.as_dict = as_dict
        self.message_type = message_type

    def _file_proto(self, schema_str: str) -> Any:
        descriptor_pb2 = _protobuf()[0]
        try:
            raw = base64.b64decode(schema_str, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(
                "the writer schema is .proto text, which this decoder does not parse; pass "
                "message_type=<generated class> to ProtobufDecoder") from None
        return descriptor_pb2.FileDescriptorProto.FromString(raw)

    def _add_file(self, pool: Any, schema: Any, seen: set[str]) -> Any:
        descriptor_pb2, _pool, _factory = _protobuf()
        for ref in schema.references or ():
            if ref.name in seen:
                continue
            seen.add(ref.name)
            try:
                client = registry_client(self.registry)
                subject, version = ref.subject, ref.version
                registered = bounded_call(self.registry,
                                          lambda: client.get_version(subject, version))
            except Exception as exc:
                raise registry_failure(self.registry, f"to return reference {ref.subject} v{ref.version}",
                                       exc) from None
            self._add_file(pool, registered.schema, seen)
        proto = self._file_proto(schema.schema_str)
        for dependency in proto.dependency:
            if dependency.startswith("google/protobuf/") and dependency not in seen:
                seen.add(dependency)
                # the well-known types, from the protobuf package itself (importing the module
                # puts its file into the default pool)
                importlib.import_module("google.protobuf." + dependency[len("google/protobuf/"):-len(".proto")]
                                        .replace("/", ".") + "_pb2")
                known = descriptor_pb2.FileDescriptorProto()
                _pool.Default().FindFileByName(dependency).CopyToProto(known)
                pool.Add(known)
        return pool.Add(proto)

    def _variant(self) -> Hashable:
        return self.message_type is not None

    def _parse_writer(self, schema: Any) -> Any:
        if self.message_type is not None:
            return None
        descriptor_pool = _protobuf()[1]
        pool = descriptor_pool.DescriptorPool()
        return self._add_file(pool, schema, set())

    def _message_class(self, file_descriptor: Any, indexes: list[int]) -> Any:
        factory = _protobuf()[2]
        # The indexes come from the record: a path the writer's file does not have is the
        # record's fault (a wire-format error naming it), not an IndexError.
        choices = list(file_descriptor.message_types_by_name.values())
        where = f"file {file_descriptor.name!r}"
        descriptor = None
        for depth, index in enumerate(indexes):
            if index >= len(choices):
                names = ", ".join(c.name for c in choices) or "none"
                raise WireFormatError(
                    f"Protobuf message index path {indexes} does not exist in the writer schema: "
                    f"index {index} (position {depth}) is past the {len(choices)} "
                    f"{'top-level' if depth == 0 else 'nested'} message types of {where} ({names})")
            descriptor = choices[index]
            choices = list(descriptor.nested_types)
            where = f"message {descriptor.full_name!r}"
        return factory.GetMessageClass(descriptor)

    def _decode_body(self, writer: Any, body: bytes) -> Any:
        indexes, payload = read_message_indexes(body)
        cls: Any = self.message_type or self._message_class(writer, indexes)
        message = cls.FromString(payload)
        if not self.as_dict:
            return message
        return message_to_python(message)


def _is_repeated(field: Any) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5.29; label is deprecated there
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


def _one(field: Any, value: Any) -> Any:
    if field.message_type is not None:
        return message_to_python(value)
    if field.enum_type is not None:
        known = field.enum_type.values_by_number.get(value)
        return known.name if known is not None else value  # an unknown number stays a number
    return value


def message_to_python(message: Any) -> dict[str, Any]:
    """Return every field of ``message`` by its ``.proto`` name: maps as dicts, repeated fields as
    lists, enums by name, unset message fields and unset oneof members as ``None``."""
    values: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            value_field = entry.fields_by_name["value"]
            values[field.name] = {k: _one(value_field, v) for k, v in value.items()}
        elif _is_repeated(field):
            values[field.name] = [_one(field, v) for v in value]
        elif (entry is not None or field.containing_oneof is not None) and not message.HasField(field.name):
            values[field.name] = None
        else:
            values[field.name] = _one(field, value)
    return values
