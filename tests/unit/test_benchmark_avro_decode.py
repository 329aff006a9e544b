"""benchmarks/avro_decode.py: its values and its one-schema registry stand-in decode as measured."""

from __future__ import annotations

from benchmarks.avro_decode import SCHEMA_ID, _serve_schema, _values
from dstream_kafka.formats import AvroDecoder, RegistrySettings


def test_the_benchmark_values_decode_through_its_registry_stand_in() -> None:
    server = _serve_schema()
    try:
        decoder = AvroDecoder(RegistrySettings(f"http://127.0.0.1:{server.server_address[1]}"))
        values = _values(5)
        decoded = [decoder.decode(v, topic="bench", partition=0, offset=i) for i, v in enumerate(values)]
    finally:
        server.shutdown()
        server.server_close()
    assert all(v[:5] == b"\x00" + SCHEMA_ID.to_bytes(4, "big") for v in values)
    assert decoded[4] == {"id": 4, "user": "user-4", "amount": 1.0, "tags": ["a"], "country": "NO"}
    assert decoded[1]["country"] is None
