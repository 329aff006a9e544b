"""decode_frame: Kafka DataFrames of registry-encoded Avro decoded into Spark columns, against the
real registry (Apicurio's Confluent API) and broker, on the classic local[2] session.

Records are written by confluent-kafka's AvroSerializer; every decoded row is compared with the
Python value the RDD decoder (decode_records) gives for the same record.
"""

from __future__ import annotations

import datetime
import decimal
import json
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from dstream_kafka import KafkaUtils, OffsetRange
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.formats import (
    AvroDecoder,
    JsonSchemaDecoder,
    RegistrySettings,
    decode_frame,
    decode_records,
    subject_decoder,
    subject_schema,
)

pytestmark = pytest.mark.integration

pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

USER_V1 = {"type": "record", "name": "User", "namespace": "test",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"],
                                 {"name": "email", "type": ["null", "string"], "default": None}]}
ORDER = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
        {"name": "name", "type": "string"}, {"name": "vip", "type": "boolean"}]}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": "int"}]}}},
    {"name": "attributes", "type": {"type": "map", "values": "string"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "signature", "type": "bytes"},
]}


@pytest.fixture(scope="module")
def spark(sc: Any) -> Any:
    from pyspark.sql import SparkSession

    return SparkSession(sc)


@pytest.fixture
def topic(kafka: Any, unique: Any) -> str:
    """A one-partition topic of its own; the registry's subjects are named after it."""
    name = unique("srdf")
    kafka.create_topic(name)
    return name


@pytest.fixture
def registry(schema_registry: Any) -> RegistrySettings:
    return RegistrySettings(schema_registry.url)


@pytest.fixture
def client(registry: RegistrySettings) -> SchemaRegistryClient:
    """confluent-kafka's own client: the serializers register the writer schemas through it."""
    return SchemaRegistryClient(registry.client_conf())


def _serialize(client: Any, schema: dict, topic: str, values: list[Any], field: str = "value") -> list[bytes]:
    serializer = AvroSerializer(client, json.dumps(schema))
    context = SerializationContext(topic, MessageField.VALUE if field == "value" else MessageField.KEY)
    return [serializer(v, context) for v in values]


def _frame(spark: Any, kafka: Any, topic: str, unique: Any, until: int) -> Any:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g")}
    return KafkaUtils.createDataFrame(spark, params, [OffsetRange(topic, 0, 0, until)])


def _rdd_values(sc: Any, kafka: Any, topic: str, unique: Any, until: int, decoder: Any) -> list[Any]:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g")}
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, until)])
    return [r.value for r in decode_records(rdd, value=decoder).rdd.collect()]


def _as_spark_returns(value: Any, zone: ZoneInfo) -> Any:
    """A decoded Python value as Spark's collect() returns it (timestamps naive, session zone)."""
    if isinstance(value, dict):
        return {k: _as_spark_returns(v, zone) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_spark_returns(v, zone) for v in value]
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        return value.astimezone(zone).replace(tzinfo=None)
    return value


def _order(n: int) -> dict[str, Any]:
    return {"id": n, "status": "PAID" if n % 2 else "NEW",
            "placed": datetime.datetime(2024, 5, 1, 12, 0, n, 123000, tzinfo=datetime.timezone.utc),
            "day": datetime.date(2024, 5, 1 + n), "total": decimal.Decimal(f"{n}.25"),
            "customer": {"name": f"c{n}", "vip": n == 0},
            "lines": [{"sku": f"s{i}", "qty": i} for i in range(n)],
            "attributes": {"channel": "web"} if n else {}, "note": "gift" if n == 1 else None,
            "signature": bytes([n, 255])}


def test_avro_records_of_every_supported_type_decode_to_the_rdd_decoders_values_row_by_row(
        spark, sc, kafka, client, registry, topic, unique):
    kafka.produce(topic, _serialize(client, ORDER, topic, [_order(n) for n in range(4)]), partition=0)
    decoder = subject_decoder(registry, f"{topic}-value")

    decoded = decode_frame(_frame(spark, kafka, topic, unique, 4), value=decoder).df
    rows = decoded.orderBy("offset").collect()

    assert decoded.schema["value"].dataType.simpleString() == (
        "struct<id:bigint,status:string,placed:timestamp,day:date,total:decimal(9,2),"
        "customer:struct<name:string,vip:boolean>,lines:array<struct<sku:string,qty:int>>,"
        "attributes:map<string,string>,note:string,signature:binary>")
    zone = ZoneInfo(spark.conf.get("spark.sql.session.timeZone"))
    expected = _rdd_values(sc, kafka, topic, unique, 4, decoder)
    assert [r.value.asDict(recursive=True) for r in rows] == [_as_spark_returns(v, zone) for v in expected]
    assert [(r.topic, r.partition, r.offset) for r in rows] == [(topic, 0, n) for n in range(4)]
    assert decoded.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]


def test_v1_and_v2_records_both_read_into_the_latest_version_fetched_on_the_driver(
        spark, sc, kafka, client, registry, topic, unique):
    kafka.produce(topic, _serialize(client, USER_V1, topic, [{"name": "old", "age": 1}]), partition=0)
    kafka.produce(topic, _serialize(client, USER_V2, topic, [{"name": "new", "age": 2, "email": "n@x"}]),
                  partition=0)
    latest = subject_decoder(registry, f"{topic}-value")

    rows = decode_frame(_frame(spark, kafka, topic, unique, 2), value=latest).df.collect()

    assert [r.value.asDict() for r in rows] == _rdd_values(sc, kafka, topic, unique, 2, latest) == [
        {"name": "old", "age": 1, "email": None}, {"name": "new", "age": 2, "email": "n@x"}]


def test_a_pinned_older_version_drops_the_fields_newer_writers_added(
        spark, kafka, client, registry, topic, unique):
    kafka.produce(topic, _serialize(client, USER_V1, topic, [{"name": "old", "age": 1}]), partition=0)
    kafka.produce(topic, _serialize(client, USER_V2, topic, [{"name": "new", "age": 2, "email": "n@x"}]),
                  partition=0)

    decoded = decode_frame(_frame(spark, kafka, topic, unique, 2),
                           value=subject_decoder(registry, f"{topic}-value", version=1)).df

    assert decoded.schema["value"].dataType.simpleString() == "struct<name:string,age:int>"
    assert [r.value.asDict() for r in decoded.collect()] == [{"name": "old", "age": 1},
                                                             {"name": "new", "age": 2}]


def test_keys_decode_too_and_a_tombstone_value_stays_null(spark, kafka, client, registry, topic, unique):
    keys = _serialize(client, {"type": "record", "name": "K", "fields": [{"name": "id", "type": "int"}]},
                      topic, [{"id": 7}, {"id": 8}], field="key")
    values = _serialize(client, USER_V1, topic, [{"name": "a", "age": 1}])
    kafka.produce(topic, [(keys[0], values[0]), (keys[1], None)], partition=0)

    rows = decode_frame(_frame(spark, kafka, topic, unique, 2),
                        value=subject_decoder(registry, f"{topic}-value"),
                        key=subject_decoder(registry, f"{topic}-key")).df.collect()

    assert [(r.key.id, r.value and r.value.asDict()) for r in rows] == [(7, {"name": "a", "age": 1}),
                                                                       (8, None)]


def _bad_and_incompatible(client: Any, kafka: Any, topic: str) -> None:
    good = _serialize(client, USER_V1, topic, [{"name": "a", "age": 1}, {"name": "b", "age": 2}])
    # a writer schema registered under another subject whose age is a string: does not resolve to User
    other = {**USER_V1, "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "string"}]}
    incompatible = _serialize(client, other, f"{topic}-other", [{"name": "c", "age": "three"}])
    kafka.produce(topic, [good[0], b"not avro", incompatible[0], good[1]], partition=0)


def test_skip_drops_undecodable_and_unresolvable_rows_and_reports_their_offsets(
        spark, kafka, client, registry, topic, unique):
    _bad_and_incompatible(client, kafka, topic)

    decoded = decode_frame(_frame(spark, kafka, topic, unique, 4),
                           value=subject_decoder(registry, f"{topic}-value"), on_error="skip")
    rows = decoded.df.collect()

    assert [(r.offset, r.value.name) for r in rows] == [(0, "a"), (3, "b")]
    skipped = decoded.skipped()
    assert skipped.count == 2 and [s.offset for s in skipped.first] == [1, 2]


def test_fail_stops_the_job_at_an_unresolvable_record_naming_its_offset(
        spark, kafka, client, registry, topic, unique):
    _bad_and_incompatible(client, kafka, topic)
    frame = _frame(spark, kafka, topic, unique, 4)

    with pytest.raises(Exception) as failure:
        decode_frame(frame, value=subject_decoder(registry, f"{topic}-value")).df.collect()

    assert f"topic '{topic}' partition 0 offset 1" in str(failure.value)
    assert "RecordDecodeError" in str(failure.value)


def test_an_unknown_subject_is_refused_on_the_driver_naming_the_default_subject_names(registry, unique):
    with pytest.raises(ConfigurationError, match=r"no subject 'nothing-.*<topic>-value"):
        subject_decoder(registry, unique("nothing"))


def test_a_cast_value_column_is_refused_before_any_job(spark, kafka, client, registry, topic, unique):
    kafka.produce(topic, _serialize(client, USER_V1, topic, [{"name": "a", "age": 1}]), partition=0)
    frame = _frame(spark, kafka, topic, unique, 1).selectExpr("CAST(value AS STRING) AS value")

    with pytest.raises(ConfigurationError, match=r"binary 'value' column \(string\)"):
        decode_frame(frame, value=subject_decoder(registry, f"{topic}-value"))


READING = {"type": "object", "properties": {
    "sensor": {"type": "string"}, "celsius": {"type": "number"},
    "flags": {"type": "array", "items": {"type": "string"}}}, "required": ["sensor"]}


def test_json_schema_values_decode_into_the_subjects_schema_and_misfits_are_skipped(
        spark, sc, kafka, client, registry, topic, unique):
    context = SerializationContext(topic, MessageField.VALUE)
    good = JSONSerializer(json.dumps(READING), client)
    # valid against its own writer schema (another subject), but celsius is not a number
    other = {**READING, "properties": {**READING["properties"], "celsius": {"type": "string"}}}
    misfit = JSONSerializer(json.dumps(other), client)(
        {"sensor": "c", "celsius": "warm"}, SerializationContext(f"{topic}-other", MessageField.VALUE))
    kafka.produce(topic, [good({"sensor": "a", "celsius": 20.5, "flags": ["x"]}, context), misfit,
                          good({"sensor": "b", "celsius": 21}, context)], partition=0)

    decoded = decode_frame(_frame(spark, kafka, topic, unique, 3), value=JsonSchemaDecoder(registry),
                           value_schema=subject_schema(registry, f"{topic}-value"), on_error="skip")
    rows = decoded.df.collect()

    assert decoded.df.schema["value"].dataType.simpleString() == (
        "struct<sensor:string,celsius:double,flags:array<string>>")
    expected = _rdd_values(sc, kafka, topic, unique, 3, JsonSchemaDecoder(registry))
    assert [r.value.asDict() for r in rows] == [
        {"sensor": "a", "celsius": 20.5, "flags": ["x"]}, {"sensor": "b", "celsius": 21.0, "flags": None}]
    assert [expected[0], expected[2]] == [{"sensor": "a", "celsius": 20.5, "flags": ["x"]},
                                          {"sensor": "b", "celsius": 21}]
    skipped = decoded.skipped()
    assert skipped.count == 1 and skipped.first[0].offset == 1
    assert "does not fit the column type" in skipped.first[0].reason


def _proto_message(name: str, fields: list[tuple[str, str, bool]]) -> Any:
    """A message class of package ``frames`` built from (name, TYPE_x suffix, repeated) triples."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    kind = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name=f"frames/{name}.proto", package="frames", syntax="proto3")
    message = proto.message_type.add(name=name)
    for number, (field, type_name, repeated) in enumerate(fields, 1):
        message.field.add(name=field, number=number, type=getattr(kind, f"TYPE_{type_name}"),
                          label=kind.LABEL_REPEATED if repeated else kind.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"frames.{name}"))


def test_protobuf_values_decode_into_the_message_types_struct_row_by_row(
        spark, sc, kafka, client, registry, topic, unique):
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer

    from dstream_kafka.formats import ProtobufDecoder

    event = _proto_message("Event", [("id", "STRING", False), ("count", "UINT64", False),
                                     ("tags", "STRING", True)])
    serialize = ProtobufSerializer(event, client, {"use.deprecated.format": False})
    context = SerializationContext(topic, MessageField.VALUE)
    kafka.produce(topic, [serialize(event(id="a", count=2**64 - 1, tags=["x", "y"]), context),
                          serialize(event(id="b"), context)], partition=0)

    decoded = decode_frame(_frame(spark, kafka, topic, unique, 2), value=ProtobufDecoder(registry),
                           value_schema=event).df
    rows = decoded.collect()

    assert decoded.schema["value"].dataType.simpleString() == (
        "struct<id:string,count:decimal(20,0),tags:array<string>>")
    expected = _rdd_values(sc, kafka, topic, unique, 2, ProtobufDecoder(registry))
    assert [r.value.asDict() for r in rows] == [{**v, "count": decimal.Decimal(v["count"])} for v in expected]
    assert expected[0]["count"] == 2**64 - 1
