"""Schema Registry decoding through TLS and basic authentication, secrets never shown.

The registry is the session's Apicurio behind an HTTPS gateway that asks for HTTP basic auth
(``secured_schema_registry``): the settings a Confluent-style registry takes.
"""

from __future__ import annotations

import json
import logging
import pickle
from typing import Any

import pytest

from dstream_kafka.errors import SchemaRegistryError
from dstream_kafka.formats import AvroDecoder, RecordDecoder, RegistrySettings, decode_records
from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import OffsetRange

pytest.importorskip("confluent_kafka.schema_registry")
from confluent_kafka.schema_registry import SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

SCHEMA = json.dumps({"type": "record", "name": "Reading", "namespace": "auth",
                     "fields": [{"name": "celsius", "type": "double"}]})


@pytest.fixture
def written(kafka: Any, secured_schema_registry: Any, unique: Any) -> str:
    """A topic with two Avro values written through the gateway by confluent's serializer."""
    gate = secured_schema_registry
    client = SchemaRegistryClient({"url": gate.url, "basic.auth.user.info": f"{gate.user}:{gate.password}",
                                   "ssl.ca.location": str(gate.pki.ca_pem)})
    topic = unique("sr-auth")
    kafka.create_topic(topic)
    serializer = AvroSerializer(client, SCHEMA)
    context = SerializationContext(topic, MessageField.VALUE)
    kafka.produce(topic, [serializer({"celsius": c}, context) for c in (20.5, 21.0)], partition=0)
    return topic


def _rdd(sc: Any, kafka: Any, topic: str, unique: Any) -> Any:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g")}
    return KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 2)])


def test_executors_decode_through_tls_and_basic_auth(sc, kafka, secured_schema_registry, written, unique):
    gate = secured_schema_registry
    settings = RegistrySettings(gate.url, basic_auth=f"{gate.user}:{gate.password}",
                                ssl_ca_location=str(gate.pki.ca_pem))

    decoded = decode_records(_rdd(sc, kafka, written, unique), value=AvroDecoder(settings))

    assert [r.value for r in decoded.rdd.collect()] == [{"celsius": 20.5}, {"celsius": 21.0}]


def test_a_wrong_password_fails_the_job_with_a_registry_error_that_does_not_show_it(
        sc, kafka, secured_schema_registry, written, unique, caplog):
    gate = secured_schema_registry
    wrong = "wrong-" + gate.password[::-1]
    settings = RegistrySettings(gate.url, basic_auth=f"{gate.user}:{wrong}",
                                ssl_ca_location=str(gate.pki.ca_pem))
    refused_before = gate.refused

    # skip mode too: a refused login is the registry's answer, not a fault of the records
    decoded = decode_records(_rdd(sc, kafka, written, unique), value=AvroDecoder(settings), on_error="skip")
    with caplog.at_level(logging.DEBUG), pytest.raises(Exception) as failure:
        decoded.rdd.collect()

    text = str(failure.value)
    assert "SchemaRegistryError" in text and "401" in text
    assert gate.refused > refused_before
    for shown in (text, caplog.text, repr(settings), repr(AvroDecoder(settings)),
                  repr(RecordDecoder(value=AvroDecoder(settings)))):
        assert wrong not in shown


def test_the_registry_error_raised_in_this_process_does_not_show_the_password(
        kafka, secured_schema_registry, written, sc, unique):
    gate = secured_schema_registry
    wrong = "wrong-" + gate.password[::-1]
    settings = RegistrySettings(gate.url, basic_auth=f"{gate.user}:{wrong}",
                                ssl_ca_location=str(gate.pki.ca_pem))
    record = _rdd(sc, kafka, written, unique).collect()[0]

    with pytest.raises(SchemaRegistryError) as failure:
        RecordDecoder(value=AvroDecoder(settings))(record)

    assert wrong not in str(failure.value) and gate.url.split("/apis")[0] in str(failure.value)
    assert wrong not in repr(pickle.loads(pickle.dumps(settings)))


def test_without_the_ca_the_registrys_certificate_is_refused(
        kafka, secured_schema_registry, written, sc, unique):
    gate = secured_schema_registry
    settings = RegistrySettings(gate.url, basic_auth=f"{gate.user}:{gate.password}")
    record = _rdd(sc, kafka, written, unique).collect()[0]

    with pytest.raises(SchemaRegistryError, match="(?i)certificate") as failure:
        RecordDecoder(value=AvroDecoder(settings))(record)

    assert gate.password not in str(failure.value)
