"""Avro schemas mapped to Spark and Arrow types (formats/spark_types.py), and decode_frame's checks."""

from __future__ import annotations

import datetime
import decimal
import inspect
import io
import itertools
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql.pandas.types import to_arrow_type

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.formats import AvroDecoder, JsonSchemaDecoder, ProtobufDecoder, RegistrySettings, decode_frame
from dstream_kafka.formats.spark_types import avro_types, json_schema_types, protobuf_types

# PySpark 4.0 makes timestamps UTC by default (timestamp_utc=True); 4.1 on, it is timezone="UTC"
UTC = {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_type).parameters else {}
REGISTRY = RegistrySettings("http://127.0.0.1:1/apis/ccompat/v7")


@pytest.mark.parametrize("schema, spark", [
    ("null", "void"), ("boolean", "boolean"), ("int", "int"), ("long", "bigint"),
    ("float", "float"), ("double", "double"), ("bytes", "binary"), ("string", "string"),
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, "string"),
    ({"type": "fixed", "name": "F", "size": 4}, "binary"),
    ({"type": "int", "logicalType": "date"}, "date"),
    ({"type": "long", "logicalType": "timestamp-millis"}, "timestamp"),
    ({"type": "long", "logicalType": "timestamp-micros"}, "timestamp"),
    ({"type": "long", "logicalType": "local-timestamp-micros"}, "timestamp_ntz"),
    ({"type": "int", "logicalType": "time-millis"}, "int"),
    ({"type": "long", "logicalType": "time-micros"}, "bigint"),
    ({"type": "string", "logicalType": "uuid"}, "string"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}, "decimal(9,2)"),
    ({"type": "fixed", "name": "D", "size": 8, "logicalType": "decimal", "precision": 18},
     "decimal(18,0)"),
    ({"type": "string", "logicalType": "not-an-avro-type"}, "string"),
    ({"type": "array", "items": "long"}, "array<bigint>"),
    ({"type": "map", "values": ["null", "string"]}, "map<string,string>"),
])
def test_each_avro_type_maps_to_the_spark_type_from_avro_gives(schema, spark):
    assert avro_types(schema).spark.simpleString() == spark


def test_only_a_union_with_null_is_nullable_and_fields_keep_their_order():
    column = avro_types({"type": "record", "name": "R", "fields": [
        {"name": "b", "type": ["null", "int"]}, {"name": "a", "type": "int"}]})

    assert [(f.name, f.nullable) for f in column.spark.fields] == [("b", True), ("a", False)]
    assert not column.nullable


def test_a_named_type_is_reused_by_its_short_or_full_name():
    schema = {"type": "record", "name": "Pair", "namespace": "ns", "fields": [
        {"name": "first", "type": {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "second", "type": "Point"}, {"name": "third", "type": "ns.Point"}]}

    assert avro_types(schema).spark.simpleString() == (
        "struct<first:struct<x:int>,second:struct<x:int>,third:struct<x:int>>")


def test_a_union_of_two_types_is_refused_naming_the_field_and_the_fix():
    schema = {"type": "record", "name": "R", "fields": [
        {"name": "inner", "type": {"type": "record", "name": "I", "fields": [
            {"name": "either", "type": ["null", "int", "string"]}]}}]}

    with pytest.raises(ConfigurationError, match=r"value field 'inner.either': a union of 2 .*decode_records"):
        avro_types(schema)


def test_a_recursive_record_is_refused_naming_the_field():
    schema = {"type": "record", "name": "Node", "fields": [
        {"name": "next", "type": ["null", "Node"]}]}

    with pytest.raises(ConfigurationError, match=r"key field 'next'.*Node contains itself"):
        avro_types(schema, "key")


def test_a_decimal_wider_than_spark_allows_is_refused():
    with pytest.raises(ConfigurationError, match="precision 39 is over Spark's maximum of 38"):
        avro_types({"type": "record", "name": "R", "fields": [{"name": "d", "type": {
            "type": "bytes", "logicalType": "decimal", "precision": 39}}]})


def test_an_unknown_type_name_is_refused():
    with pytest.raises(ConfigurationError, match="unknown type name 'Missing'"):
        avro_types({"type": "array", "items": "Missing"})


# --- generated schemas: the Arrow type is the Spark type, and decoded values fit it ----------

_names = itertools.count()

_leaf = st.sampled_from([
    "boolean", "int", "long", "double", "string", "bytes",
    {"type": "int", "logicalType": "date"},
    {"type": "long", "logicalType": "timestamp-micros"},
    {"type": "int", "logicalType": "time-millis"},
    {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3},
])


def _record(fields: list[Any]) -> dict[str, Any]:
    return {"type": "record", "name": f"R{next(_names)}",
            "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(fields)]}


_schemas = st.recursive(_leaf, lambda inner: st.one_of(
    st.builds(lambda t: {"type": "array", "items": t}, inner),
    st.builds(lambda t: {"type": "map", "values": t}, inner),
    st.builds(lambda t: ["null", t], inner.filter(lambda t: not isinstance(t, list))),
    st.builds(_record, st.lists(inner, min_size=1, max_size=3))), max_leaves=6)


def _values(schema: Any) -> st.SearchStrategy[Any]:
    if isinstance(schema, list):
        return st.one_of(st.none(), _values(schema[1]))
    kind = schema["type"] if isinstance(schema, dict) else schema
    logical = schema.get("logicalType") if isinstance(schema, dict) else None
    if logical == "date":
        return st.dates()
    if logical == "timestamp-micros":
        return st.datetimes(timezones=st.just(datetime.timezone.utc),
                            min_value=datetime.datetime(1900, 1, 1), max_value=datetime.datetime(2200, 1, 1))
    if logical == "time-millis":
        return st.times().map(lambda t: t.replace(microsecond=t.microsecond // 1000 * 1000))
    if logical == "decimal":
        return st.decimals(min_value=-10**6, max_value=10**6, places=3, allow_nan=False)
    simple: dict[str, st.SearchStrategy[Any]] = {
        "boolean": st.booleans(), "int": st.integers(-2**31, 2**31 - 1),
        "long": st.integers(-2**63, 2**63 - 1), "double": st.floats(allow_nan=False),
        "string": st.text(max_size=5), "bytes": st.binary(max_size=5)}
    if kind in simple:
        return simple[kind]
    if kind == "array":
        return st.lists(_values(schema["items"]), max_size=3)
    if kind == "map":
        return st.dictionaries(st.text(max_size=3), _values(schema["values"]), max_size=3)
    return st.fixed_dictionaries({f["name"]: _values(f["type"]) for f in schema["fields"]})


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_decoded_values_of_any_schema_build_the_arrow_type_that_is_the_spark_type(data):
    schema = _record([data.draw(_schemas)])
    column = avro_types(schema)
    written = data.draw(_values(schema))
    buffer = io.BytesIO()
    parsed = fastavro.parse_schema(schema)
    fastavro.schemaless_writer(buffer, parsed, written)
    decoded = fastavro.schemaless_reader(io.BytesIO(buffer.getvalue()), parsed, None)

    values = [column.convert(decoded) if column.convert else decoded]
    array = pa.array(values, column.arrow)

    # Spark to Arrow, the direction Spark converts our batches in: PySpark 4.0's from_arrow_type
    # drops list and map element nullability, so the reverse cannot be compared on every version
    assert to_arrow_type(column.spark, **UTC) == column.arrow
    assert array.type == column.arrow
    assert len(array) == 1 and array.null_count == 0


def test_times_become_milliseconds_and_uuids_strings_as_from_avro_has_them():
    import uuid

    schema = _record([{"type": "int", "logicalType": "time-millis"},
                      ["null", {"type": "string", "logicalType": "uuid"}]])
    column = avro_types(schema)
    ident = uuid.uuid4()

    converted = column.convert({"f0": datetime.time(1, 0, 0, 5000), "f1": ident})  # type: ignore[misc]

    assert converted == {"f0": 3_600_005, "f1": str(ident)}
    assert pa.array([converted], column.arrow).to_pylist() == [converted]


def test_decimals_keep_their_digits_in_arrow():
    column = avro_types({"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 3})

    assert pa.array([decimal.Decimal("-12.345")], column.arrow).to_pylist() == [decimal.Decimal("-12.345")]


# --- decode_frame refuses what it cannot do, before touching the DataFrame ----------------------

def test_decode_frame_refuses_an_avro_decoder_without_a_reader_schema_naming_the_fix():
    with pytest.raises(ConfigurationError, match=r"reader schema.*subject_decoder\(registry, subject\)"):
        decode_frame(None, value=AvroDecoder(REGISTRY))


def test_decode_frame_refuses_a_json_schema_decoder_without_its_column_schema():
    with pytest.raises(ConfigurationError, match=r"needs value_schema for a JsonSchemaDecoder.*subject_schema"):
        decode_frame(None, value=JsonSchemaDecoder(REGISTRY))


def test_decode_frame_refuses_a_protobuf_decoder_without_its_message():
    with pytest.raises(ConfigurationError, match=r"needs value_schema for a ProtobufDecoder.*generated class"):
        decode_frame(None, value=ProtobufDecoder(REGISTRY))


def test_decode_frame_refuses_an_unknown_on_error():
    with pytest.raises(ConfigurationError, match="on_error must be 'fail' or 'skip'"):
        decode_frame(None, value=AvroDecoder(REGISTRY, reader_schema='"string"'), on_error="null")


# --- JSON Schema -----------------------------------------------------------------------------

def test_a_json_object_is_a_struct_of_nullable_properties_in_their_order():
    column = json_schema_types({"type": "object", "required": ["n"], "properties": {
        "n": {"type": "integer"}, "x": {"type": "number"}, "s": {"type": ["string", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "inner": {"properties": {"ok": {"type": "boolean"}}}}})

    assert column.spark.simpleString() == (
        "struct<n:bigint,x:double,s:string,tags:array<string>,counts:map<string,bigint>,"
        "inner:struct<ok:boolean>>")
    assert all(f.nullable for f in column.spark.fields)
    assert to_arrow_type(column.spark, **UTC) == column.arrow


def test_json_values_with_absent_properties_build_the_struct_with_nulls():
    column = json_schema_types('{"type": "object", "properties": {"n": {"type": "integer"}, '
                               '"x": {"type": "number"}}}')

    assert pa.array([{"n": 1, "x": 2}, {"n": 2}], column.arrow).to_pylist() == [
        {"n": 1, "x": 2.0}, {"n": 2, "x": None}]


@pytest.mark.parametrize("sub, problem", [
    ({"oneOf": [{"type": "string"}, {"type": "integer"}]}, "oneOf"),
    ({"$ref": "#/definitions/x"}, r"\$ref"),
    ({"type": ["string", "integer"]}, "is not one type"),
    ({"type": "object"}, "without properties"),
    ({"type": "array"}, "without properties, additionalProperties or items"),
])
def test_json_schemas_without_one_spark_type_are_refused_naming_the_field(sub, problem):
    with pytest.raises(ConfigurationError, match=rf"key field 'outer.f': .*{problem}.*decode_records"):
        json_schema_types({"type": "object", "properties": {"outer": {
            "type": "object", "properties": {"f": sub}}}}, "key")


# --- Protobuf --------------------------------------------------------------------------------

def _message(fields: list[tuple[str, int, int]], name: str = "M", maps: bool = False) -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name=f"t/{name}.proto", package="t", syntax="proto3")
    message = proto.message_type.add(name=name)
    kind = descriptor_pb2.FieldDescriptorProto
    for number, (field, field_type, label) in enumerate(fields, 1):
        entry = message.field.add(name=field, number=number, type=field_type, label=label)
        if field_type == kind.TYPE_MESSAGE:
            entry.type_name = f".t.{name}"
        if field_type == kind.TYPE_ENUM:
            entry.type_name = f".t.{name}.Color"
    color = message.enum_type.add(name="Color")
    color.value.add(name="RED", number=0)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"t.{name}"))


def test_protobuf_scalars_repeated_and_enums_map_as_from_protobuf_with_uint64_as_decimal():
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

    one, many = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    cls = _message([("i", F.TYPE_INT32, one), ("u", F.TYPE_UINT32, one), ("big", F.TYPE_UINT64, one),
                    ("s", F.TYPE_STRING, many), ("b", F.TYPE_BYTES, one), ("c", F.TYPE_ENUM, one)])
    column = protobuf_types(cls)

    assert column.spark.simpleString() == (
        "struct<i:int,u:bigint,big:decimal(20,0),s:array<string>,b:binary,c:string>")
    value = column.convert({"i": 1, "u": 2, "big": 2**64 - 1, "s": ["x"], "b": b"", "c": 7})  # type: ignore[misc]
    assert pa.array([value], column.arrow).to_pylist()[0]["big"] == decimal.Decimal(2**64 - 1)
    assert value["c"] == "7"


def test_a_recursive_protobuf_message_is_refused_naming_the_field():
    from google.protobuf.descriptor_pb2 import FieldDescriptorProto as F

    cls = _message([("child", F.TYPE_MESSAGE, F.LABEL_OPTIONAL)], name="Tree")

    with pytest.raises(ConfigurationError, match=r"value field 'child': message t.Tree contains itself"):
        protobuf_types(cls)
