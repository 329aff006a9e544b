"""Avro, Protobuf and JSON Schema records through a real Schema Registry (Apicurio's Confluent API).

Records are written by confluent-kafka's own registry serializers against the real registry, sent
to the real broker, read back with createRDD on Spark local[2] and decoded on the executors by
dstream_kafka.formats. Each test registers under its own subjects; none assumes a schema id.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from dstream_kafka.errors import RecordDecodeError, SchemaRegistryError, UnknownSchemaError
from dstream_kafka.formats import (
    AvroDecoder,
    JsonSchemaDecoder,
    ProtobufDecoder,
    RecordDecoder,
    RegistrySettings,
    decode_records,
    subject_schema,
)
from dstream_kafka.formats.registry import registry_client
from dstream_kafka import ConsumerStrategies, LocationStrategies
from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import OffsetRange

from support import wait_until

pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONSerializer  # noqa: E402
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

USER_V1 = {"type": "record", "name": "User", "namespace": "test",
           "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]}
# v2 adds a field with a default: backward compatible, so a v2 reader reads v1 records
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"],
                                 {"name": "email", "type": ["null", "string"], "default": None}]}


@pytest.fixture
def registry(schema_registry: Any) -> RegistrySettings:
    return RegistrySettings(schema_registry.url)


@pytest.fixture
def client(schema_registry: Any) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": schema_registry.url})


@pytest.fixture
def topic(kafka: Any, unique: Any) -> str:
    name = unique("sr")
    kafka.create_topic(name)
    return name


def _write(kafka: Any, topic: str, serializer: Any, values: list[Any]) -> list[int]:
    context = SerializationContext(topic, MessageField.VALUE)
    return [offset for _, offset in kafka.produce(topic, [serializer(v, context) for v in values],
                                                   partition=0)]


def _read(sc: Any, kafka: Any, topic: str, unique: Any, until: int) -> Any:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g")}
    return KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, until)])


def _event_class() -> Any:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name="events/event.proto", package="events", syntax="proto3")
    message = proto.message_type.add(name="Event")
    field_type = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=field_type.TYPE_STRING, label=field_type.LABEL_OPTIONAL)
    message.field.add(name="count", number=2, type=field_type.TYPE_INT64, label=field_type.LABEL_OPTIONAL)
    message.field.add(name="tags", number=3, type=field_type.TYPE_STRING, label=field_type.LABEL_REPEATED)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("events.Event"))


@pytest.mark.service_check
def test_avro_values_written_by_confluents_serializer_decode_to_dicts_on_executors(
        sc, kafka, client, registry, topic, unique):
    serializer = AvroSerializer(client, json.dumps(USER_V1))
    _write(kafka, topic, serializer, [{"name": f"u{i}", "age": i} for i in range(6)])

    decoded = decode_records(_read(sc, kafka, topic, unique, 6), value=AvroDecoder(registry))

    assert [r.value for r in decoded.rdd.collect()] == [{"name": f"u{i}", "age": i} for i in range(6)]


def test_protobuf_values_decode_from_the_registrys_descriptor_without_a_generated_class(
        sc, kafka, client, registry, topic, unique):
    event = _event_class()
    serializer = ProtobufSerializer(event, client, {"use.deprecated.format": False})
    _write(kafka, topic, serializer, [event(id="a", count=2**40, tags=["x", "y"]), event(id="b")])

    decoded = decode_records(_read(sc, kafka, topic, unique, 2), value=ProtobufDecoder(registry))

    assert [r.value for r in decoded.rdd.collect()] == [
        {"id": "a", "count": 2**40, "tags": ["x", "y"]}, {"id": "b", "count": 0, "tags": []}]


def test_json_schema_values_decode_and_are_validated_against_the_writer_schema(
        sc, kafka, client, registry, topic, unique):
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "s": {"type": "string"}},
              "required": ["n"]}
    serializer = JSONSerializer(json.dumps(schema), client)
    _write(kafka, topic, serializer, [{"n": 1, "s": "one"}, {"n": 2}])

    decoded = decode_records(_read(sc, kafka, topic, unique, 2), value=JsonSchemaDecoder(registry))

    assert [r.value for r in decoded.rdd.collect()] == [{"n": 1, "s": "one"}, {"n": 2}]


def test_an_avro_reader_schema_reads_records_of_writer_v1_and_v2_alike(
        sc, kafka, client, registry, topic, unique):
    _write(kafka, topic, AvroSerializer(client, json.dumps(USER_V1)), [{"name": "old", "age": 1}])
    _write(kafka, topic, AvroSerializer(client, json.dumps(USER_V2)),
           [{"name": "new", "age": 2, "email": "n@example.org"}])
    rdd = _read(sc, kafka, topic, unique, 2)

    values = [r.value for r in decode_records(rdd, value=AvroDecoder(registry, reader_schema=USER_V2)).rdd.collect()]
    as_writer = [r.value for r in decode_records(rdd, value=AvroDecoder(registry)).rdd.collect()]

    assert values == [{"name": "old", "age": 1, "email": None},
                      {"name": "new", "age": 2, "email": "n@example.org"}]
    assert as_writer == [{"name": "old", "age": 1}, {"name": "new", "age": 2, "email": "n@example.org"}]


def _unknown_id_value(client: SchemaRegistryClient, topic: str) -> bytes:
    # one past every id the registry holds now: an id no schema has
    serializer = AvroSerializer(client, json.dumps(USER_V1))
    known = serializer({"name": "x", "age": 0}, SerializationContext(topic, MessageField.VALUE))
    unknown_id = int.from_bytes(known[1:5], "big") + 10_000
    return b"\x00" + unknown_id.to_bytes(4, "big") + known[5:]


def test_an_unknown_schema_id_fails_the_job_naming_topic_partition_offset_and_id(
        sc, kafka, client, registry, topic, unique):
    value = _unknown_id_value(client, topic)
    unknown_id = int.from_bytes(value[1:5], "big")
    kafka.produce(topic, [value], partition=0)

    decoded = decode_records(_read(sc, kafka, topic, unique, 1), value=AvroDecoder(registry))
    with pytest.raises(Exception) as failure:
        decoded.rdd.collect()

    text = str(failure.value)
    assert "UnknownSchemaError" in text
    assert f"topic '{topic}' partition 0 offset 0" in text and f"schema id {unknown_id} " in text


def test_the_decoder_raises_unknown_schema_error_with_the_records_position(
        kafka, client, registry, topic, sc, unique):
    value = _unknown_id_value(client, topic)
    kafka.produce(topic, [value], partition=0)
    record = _read(sc, kafka, topic, unique, 1).collect()[0]

    with pytest.raises(UnknownSchemaError) as failure:
        RecordDecoder(value=AvroDecoder(registry))(record)

    assert (failure.value.topic, failure.value.partition, failure.value.offset) == (topic, 0, 0)
    assert failure.value.schema_id == int.from_bytes(value[1:5], "big")


def test_skip_mode_drops_undecodable_records_and_reports_their_count_and_first_offsets(
        sc, kafka, client, registry, topic, unique):
    good = AvroSerializer(client, json.dumps(USER_V1))
    context = SerializationContext(topic, MessageField.VALUE)
    values = [good({"name": "a", "age": 1}, context), b"not avro at all",
              _unknown_id_value(client, topic), good({"name": "b", "age": 2}, context), b"\x00\x00"]
    kafka.produce(topic, values, partition=0)

    decoded = decode_records(_read(sc, kafka, topic, unique, 5), value=AvroDecoder(registry),
                             on_error="skip", report_first=2)
    kept = [(r.offset, r.value) for r in decoded.rdd.collect()]
    skipped = decoded.skipped()

    assert kept == [(0, {"name": "a", "age": 1}), (3, {"name": "b", "age": 2})]
    assert skipped.count == 3
    assert [(s.topic, s.partition, s.offset) for s in skipped.first] == [(topic, 0, 1), (topic, 0, 2)]
    assert "magic byte" in skipped.first[0].reason and skipped.first[1].schema_id is not None


def test_fail_mode_stops_at_a_value_that_is_not_in_the_wire_format(
        sc, kafka, registry, topic, unique):
    kafka.produce(topic, [b"plain text"], partition=0)

    decoded = decode_records(_read(sc, kafka, topic, unique, 1), value=AvroDecoder(registry))
    with pytest.raises(Exception) as failure:
        decoded.rdd.collect()

    assert "RecordDecodeError" in str(failure.value) and "offset 0" in str(failure.value)
    assert isinstance(RecordDecodeError("x"), ValueError)


def test_keys_and_values_decode_with_their_own_decoders_and_tombstones_stay_none(
        sc, kafka, client, registry, topic, unique):
    # Apicurio infers a schema's type from its content and refuses (HTTP 422) one as bare as
    # Avro's "string" or JSON Schema's {"type": "object"}
    key_schema = {"type": "record", "name": "Key", "fields": [{"name": "id", "type": "string"}]}
    key_serializer = AvroSerializer(client, json.dumps(key_schema))
    value_serializer = JSONSerializer(
        json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}}), client)
    keys = [key_serializer({"id": k}, SerializationContext(topic, MessageField.KEY)) for k in ("a", "b")]
    value = value_serializer({"n": 1}, SerializationContext(topic, MessageField.VALUE))
    kafka.produce(topic, [(keys[0], value), (keys[1], None)], partition=0)

    decoded = decode_records(_read(sc, kafka, topic, unique, 2), key=AvroDecoder(registry),
                             value=JsonSchemaDecoder(registry))

    assert [(r.key, r.value) for r in decoded.rdd.collect()] == [({"id": "a"}, {"n": 1}), ({"id": "b"}, None)]


def test_protobuf_reads_the_second_message_of_a_file_with_a_well_known_type_import(
        sc, kafka, client, registry, topic, unique):
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

    field_type = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="orders/order.proto", package="orders", syntax="proto3",
                                               dependency=["google/protobuf/timestamp.proto"])
    proto.message_type.add(name="Unused").field.add(name="x", number=1, type=field_type.TYPE_INT32,
                                                    label=field_type.LABEL_OPTIONAL)
    order = proto.message_type.add(name="Order")
    order.field.add(name="id", number=1, type=field_type.TYPE_STRING, label=field_type.LABEL_OPTIONAL)
    order.field.add(name="placed", number=2, type=field_type.TYPE_MESSAGE, label=field_type.LABEL_OPTIONAL,
                    type_name=".google.protobuf.Timestamp")
    pool = descriptor_pool.DescriptorPool()
    known = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(known)
    pool.Add(known)
    pool.Add(proto)
    order_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("orders.Order"))
    serializer = ProtobufSerializer(order_cls, client, {"use.deprecated.format": False})
    _write(kafka, topic, serializer, [order_cls(id="o1", placed={"seconds": 1700000000, "nanos": 5})])

    decoded = decode_records(_read(sc, kafka, topic, unique, 1), value=ProtobufDecoder(registry))

    assert [r.value for r in decoded.rdd.collect()] == [
        {"id": "o1", "placed": {"seconds": 1700000000, "nanos": 5}}]


def test_a_direct_stream_decodes_each_batch_with_the_record_decoder(
        kafka, client, registry, topic, unique, ssc):
    _write(kafka, topic, AvroSerializer(client, json.dumps(USER_V1)),
           [{"name": f"s{i}", "age": i} for i in range(4)])
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))
    seen: list[Any] = []
    stream.map(RecordDecoder(value=AvroDecoder(registry))).foreachRDD(
        lambda rdd: seen.extend(r.value for r in rdd.collect()))

    ssc.start()
    wait_until(lambda: len(seen) >= 4, "four decoded records from the stream")
    ssc.stop(stopSparkContext=False)

    assert seen == [{"name": f"s{i}", "age": i} for i in range(4)]


@pytest.fixture
def silent_registry() -> Iterator[str]:
    """The URL of a registry that accepts connections and never answers (a hung server)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)  # the kernel completes the handshakes; nobody ever reads
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_a_registry_that_never_answers_fails_each_call_within_the_timeout_retries_included(
        silent_registry):
    # The client retries a timed-out request 3 times with backoff: 4 s and more without the
    # bound of the whole call, 1 s with it.
    settings = RegistrySettings(silent_registry, timeout=1.0)
    registry_client(settings)  # built once per process, without I/O: not part of the timing
    for call in (lambda: AvroDecoder(settings).writer_schema(1),
                 lambda: subject_schema(settings, "some-subject")):
        started = time.monotonic()
        with pytest.raises(SchemaRegistryError) as failure:
            call()
        elapsed = time.monotonic() - started

        assert 1.0 <= elapsed < 3.0, elapsed  # at least 4 s before (four 1 s attempts)
        assert "no answer within 1 s" in str(failure.value)
        assert silent_registry in str(failure.value)


def test_a_protobuf_message_index_the_writer_schema_lacks_fails_naming_the_index_and_the_schema(
        client, registry, topic):
    event = _event_class()
    serializer = ProtobufSerializer(event, client, {"use.deprecated.format": False})
    good = serializer(event(id="a"), SerializationContext(topic, MessageField.VALUE))
    assert good[5:6] == b"\x00"  # the index path [0], written as count 0
    schema_id = int.from_bytes(good[1:5], "big")
    bad = good[:5] + b"\x02\x0a" + good[6:]  # count 1, index 5 (zigzag varints)

    with pytest.raises(RecordDecodeError) as failure:
        ProtobufDecoder(registry).decode(bad, topic=topic, partition=0, offset=7)

    text = str(failure.value)
    assert "WireFormatError" in text and "IndexError" not in text
    assert "message index path [5]" in text and "'events/event.proto' (Event)" in text
    assert f"schema id {schema_id}" in text and f"topic '{topic}' partition 0 offset 7" in text
