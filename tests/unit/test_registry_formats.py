"""dstream_kafka.formats without a registry: wire format, settings, skip reports, Protobuf values."""

from __future__ import annotations

import pickle
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dstream_kafka.errors import ConfigurationError, RecordDecodeError, UnknownSchemaError
from dstream_kafka.formats import AvroDecoder, RegistrySettings, decode_records
from dstream_kafka.formats.records import SkippedRecord, SkippedRecords, _SkippedParam
from dstream_kafka.formats.wire import WireFormatError, read_message_indexes, split_schema_id

URL = "http://127.0.0.1:1/apis/ccompat/v7"


def _zigzag(n: int) -> bytes:
    raw = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = raw & 0x7F
        raw >>= 7
        if raw:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


@given(st.integers(min_value=0, max_value=2**31 - 1), st.binary(max_size=20))
def test_the_prefix_carries_a_big_endian_schema_id_before_the_body(schema_id, body):
    assert split_schema_id(b"\x00" + schema_id.to_bytes(4, "big") + body) == (schema_id, body)


def test_a_schema_id_header_wins_over_the_prefix_and_gives_a_guid():
    guid = uuid.uuid4()
    headers = [("other", b"x"), ("__value_schema_id", b"\x01" + guid.bytes)]
    assert split_schema_id(b"body", headers) == (str(guid), b"body")
    # the key's header is a different one
    assert split_schema_id(b"\x00\x00\x00\x00\x07k", headers, is_key=True) == (7, b"k")


@pytest.mark.parametrize("data, words", [
    (b"{}", "too short"), (b"\x01\x00\x00\x00\x01x", "magic byte 0x00"), (b"", "too short")])
def test_bytes_outside_the_wire_format_are_refused_with_the_reason(data, words):
    with pytest.raises(WireFormatError, match=words):
        split_schema_id(data)


def test_a_malformed_schema_id_header_is_refused():
    with pytest.raises(WireFormatError, match="__value_schema_id"):
        split_schema_id(b"\x00\x00\x00\x00\x01", [("__value_schema_id", b"\x00" + bytes(16))])


@given(st.lists(st.integers(min_value=0, max_value=10_000), min_size=1, max_size=5), st.binary(max_size=8))
def test_protobuf_message_indexes_are_read_as_zigzag_varints(indexes, payload):
    encoded = _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes) + payload
    assert read_message_indexes(encoded) == (indexes, payload)


def test_a_zero_index_count_means_the_first_message():
    assert read_message_indexes(b"\x00rest") == ([0], b"rest")


def test_a_truncated_index_path_is_refused():
    with pytest.raises(WireFormatError, match="varint"):
        read_message_indexes(b"\x02\x80")


def test_settings_never_show_the_password_in_repr_or_after_pickling():
    settings = RegistrySettings("https://bob:url-secret-1@registry:8081", basic_auth="alice:pw-secret-1",
                                ssl_key_password="key-secret-1")
    for shown in (repr(settings), repr(pickle.loads(pickle.dumps(settings))), settings.display_url):
        assert "secret-1" not in shown
    assert pickle.loads(pickle.dumps(settings)) == settings
    assert "secret-1" not in settings.scrub("401 for alice:pw-secret-1, url-secret-1, key-secret-1")


@pytest.mark.parametrize("kwargs, words", [
    ({"url": "registry:8081"}, "must start with http"),
    ({"url": URL, "basic_auth": "no-colon-secret"}, "user:password"),
    ({"url": URL, "ssl_key_location": "/k.pem"}, "together"),
    ({"url": URL, "timeout": 0}, "timeout"),
])
def test_bad_settings_are_refused_naming_the_field(kwargs, words):
    with pytest.raises(ConfigurationError, match=words) as failure:
        RegistrySettings(**kwargs)
    assert "no-colon-secret" not in str(failure.value)


def test_a_bad_reader_schema_is_refused_on_the_driver():
    with pytest.raises(ConfigurationError, match="reader_schema"):
        AvroDecoder(RegistrySettings(URL), reader_schema={"type": "no-such-type"})


def test_on_error_must_be_fail_or_skip():
    with pytest.raises(ConfigurationError, match="on_error"):
        decode_records(None, value=AvroDecoder(RegistrySettings(URL)), on_error="ignore")


def test_decode_records_needs_a_decoder():
    with pytest.raises(ConfigurationError, match="value decoder"):
        decode_records(None)


def test_skip_reports_add_counts_and_keep_the_first_records_by_position():
    param = _SkippedParam(limit=2)
    a = SkippedRecords(3, (SkippedRecord("t", 1, 5, 9, "x"), SkippedRecord("t", 1, 6, 9, "x")))
    b = SkippedRecords(2, (SkippedRecord("t", 0, 7, None, "y"),))
    merged = param.addInPlace(param.addInPlace(param.zero(a), a), b)
    assert merged.count == 5
    assert [(r.partition, r.offset) for r in merged.first] == [(0, 7), (1, 5)]


def test_decode_errors_keep_the_records_position_through_pickling():
    error = UnknownSchemaError("schema id 42 unknown", "t", 3, 17, 42)
    back = pickle.loads(pickle.dumps(error))
    assert isinstance(back, RecordDecodeError) and isinstance(back, ValueError)
    assert (back.topic, back.partition, back.offset, back.schema_id, str(back)) == \
        ("t", 3, 17, 42, "schema id 42 unknown")


def test_protobuf_values_become_plain_python_with_every_field():
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from dstream_kafka.formats.protobuf import message_to_python

    f = descriptor_pb2.FieldDescriptorProto
    proto = descriptor_pb2.FileDescriptorProto(name="u.proto", package="u", syntax="proto3")
    proto.enum_type.add(name="Kind").value.add(name="NONE", number=0)
    proto.enum_type[0].value.add(name="BIG", number=1)
    inner = proto.message_type.add(name="Inner")
    inner.field.add(name="n", number=1, type=f.TYPE_INT64, label=f.LABEL_OPTIONAL)
    outer = proto.message_type.add(name="Outer")
    outer.field.add(name="kind", number=1, type=f.TYPE_ENUM, type_name=".u.Kind", label=f.LABEL_OPTIONAL)
    outer.field.add(name="inner", number=2, type=f.TYPE_MESSAGE, type_name=".u.Inner", label=f.LABEL_OPTIONAL)
    outer.field.add(name="many", number=3, type=f.TYPE_MESSAGE, type_name=".u.Inner", label=f.LABEL_REPEATED)
    outer.field.add(name="missing", number=4, type=f.TYPE_MESSAGE, type_name=".u.Inner", label=f.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    outer_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("u.Outer"))
    inner_cls = message_factory.GetMessageClass(pool.FindMessageTypeByName("u.Inner"))

    value = outer_cls(kind=1, inner=inner_cls(n=2**40), many=[inner_cls(n=1), inner_cls()])

    assert message_to_python(value) == {"kind": "BIG", "inner": {"n": 2**40},
                                        "many": [{"n": 1}, {"n": 0}], "missing": None}


def test_values_already_deserialized_are_refused_as_a_program_mistake():
    with pytest.raises(ConfigurationError, match="value.deserializer") as failure:
        AvroDecoder(RegistrySettings(URL)).decode("text", topic="t", partition=0, offset=3)
    assert "offset 3" in str(failure.value)
