"""Avro, Protobuf and JSON Schema records through a Schema Registry, decoded on executors.

Records written by Confluent's registry serializers carry their writer schema's id (a 5-byte
prefix, or a schema-id header); these decoders fetch each writer schema once per executor process
and return Python values; :func:`decode_frame` decodes a Kafka DataFrame's columns into Spark
types. Needs the ``registry`` extra (``pip install dstream_kafka[registry]``),
imported only when a decoder first runs. See docs/guide/schema-registry.rst.
"""

from dstream_kafka.formats.avro import AvroDecoder
from dstream_kafka.formats.decoder import RegistryDecoder
from dstream_kafka.formats.frames import DecodedFrame, decode_frame, subject_decoder, subject_schema
from dstream_kafka.formats.json_schema import JsonSchemaDecoder
from dstream_kafka.formats.protobuf import ProtobufDecoder
from dstream_kafka.formats.records import (
    DecodedRecords,
    RecordDecoder,
    SkippedRecord,
    SkippedRecords,
    decode_records,
)
from dstream_kafka.formats.registry import RegistrySettings

__all__ = [
    "AvroDecoder",
    "DecodedFrame",
    "DecodedRecords",
    "JsonSchemaDecoder",
    "ProtobufDecoder",
    "RecordDecoder",
    "RegistryDecoder",
    "RegistrySettings",
    "SkippedRecord",
    "SkippedRecords",
    "decode_frame",
    "decode_records",
    "subject_decoder",
    "subject_schema",
]
