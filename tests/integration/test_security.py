"""createRDD and direct streams through a real broker's SSL, SASL_PLAINTEXT and SASL_SSL
listeners, with Spark's Java-spelled security parameters, on both consumer backends.

The session's ``secured_kafka`` broker requires a client certificate on SSL and knows the
users ``admin`` and ``alice`` for PLAIN and SCRAM-SHA-512 on both SASL listeners.
"""

from __future__ import annotations

import time

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka.errors import ConfigurationError, KafkaAuthenticationError

from support import STRING_DESERIALIZER, wait_until

LISTENERS = [
    # (protocol, mechanism, truststore type, keystore type): every store type appears once
    ("SSL", None, "JKS", "PKCS12"),
    ("SASL_PLAINTEXT", "PLAIN", None, None),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512", None, None),
    ("SASL_SSL", "PLAIN", "PKCS12", None),
    ("SASL_SSL", "SCRAM-SHA-512", "PEM", None),
]
RECORDS = [f"secure-{i}" for i in range(10)]


def _params(kafka, protocol, mechanism=None, truststore="PEM", keystore="PKCS12",
            password=None, **extra):
    options = {"truststore_type": truststore or "PEM", "keystore_type": keystore or "PKCS12",
               "password": password}
    if mechanism:
        options["mechanism"] = mechanism
    return {**kafka.client_params(protocol, **options),
            "value.deserializer": STRING_DESERIALIZER, **extra}


@pytest.fixture
def topic(secured_kafka, unique):
    name = unique("secure")
    secured_kafka.create_topic(name)
    secured_kafka.produce(name, RECORDS, partition=0)
    return name


@pytest.mark.parametrize("protocol,mechanism,truststore,keystore", LISTENERS,
                         ids=[f"{p}-{m or 'mTLS'}" for p, m, _, _ in LISTENERS])
def test_createRDD_reads_every_record_through_the_secured_listener(
        sc, secured_kafka, topic, unique, backend, protocol, mechanism, truststore, keystore):
    params = _params(secured_kafka, protocol, mechanism, truststore, keystore,
                     **{"group.id": unique("g")})
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, len(RECORDS))],
                               LocationStrategies.PreferConsistent)
    assert rdd.map(lambda r: r.value).collect() == RECORDS


@pytest.mark.parametrize("protocol,mechanism,truststore,keystore", LISTENERS,
                         ids=[f"{p}-{m or 'mTLS'}" for p, m, _, _ in LISTENERS])
def test_a_direct_stream_reads_every_record_through_the_secured_listener(
        secured_kafka, topic, unique, make_ssc, backend, protocol, mechanism, truststore,
        keystore):
    params = _params(secured_kafka, protocol, mechanism, truststore, keystore,
                     **{"group.id": unique("g"), "auto.offset.reset": "earliest"})
    ssc = make_ssc(0.2)
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))
    seen: list[str] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: r.value).collect()))
    ssc.start()
    wait_until(lambda: len(seen) >= len(RECORDS), "the stream to read every record")
    ssc.stop(stopSparkContext=False)
    assert sorted(seen) == sorted(RECORDS)


@pytest.mark.parametrize("keystore", ["JKS", "PEM"])
def test_the_mutual_tls_listener_accepts_jks_and_pem_client_keystores(
        sc, secured_kafka, topic, unique, backend, keystore):
    params = _params(secured_kafka, "SSL", None, "PKCS12", keystore, **{"group.id": unique("g")})
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 3)],
                               LocationStrategies.PreferConsistent)
    assert rdd.map(lambda r: r.value).collect() == RECORDS[:3]


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_a_wrong_password_fails_with_an_authentication_error_within_seconds(
        sc, secured_kafka, topic, unique, backend, protocol, mechanism):
    wrong = "not-the-password-" + unique("pw")
    params = {**_params(secured_kafka, protocol, mechanism, "PEM", None, password=wrong),
              "group.id": unique("g")}
    started = time.monotonic()
    with pytest.raises(KafkaAuthenticationError) as caught:
        KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)],
                             LocationStrategies.PreferConsistent)
    assert time.monotonic() - started < 15
    message = str(caught.value)
    assert mechanism in message and "'alice'" in message and "sasl.jaas.config" in message
    assert wrong not in message


def test_a_wrong_password_is_reported_even_with_kafka_pythons_logger_silenced(
        sc, secured_kafka, topic, unique):
    import logging

    kafka_log = logging.getLogger("kafka")
    saved = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)  # as the offsets command and many applications do
    try:
        params = {**_params(secured_kafka, "SASL_PLAINTEXT", "SCRAM-SHA-512", "PEM", None,
                            password="not-the-password-" + unique("pw")), "group.id": unique("g")}
        started = time.monotonic()
        with pytest.raises(KafkaAuthenticationError):
            KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)],
                                 LocationStrategies.PreferConsistent)
        assert time.monotonic() - started < 15
        assert kafka_log.level == logging.CRITICAL and kafka_log.propagate
    finally:
        kafka_log.setLevel(saved)


def test_a_stream_with_a_wrong_password_fails_to_start_with_an_authentication_error(
        secured_kafka, topic, unique, make_ssc):
    wrong = "not-the-password-" + unique("pw")
    params = {**_params(secured_kafka, "SASL_PLAINTEXT", "SCRAM-SHA-512", password=wrong),
              "group.id": unique("g")}
    ssc = make_ssc(0.2)
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))
    stream.foreachRDD(lambda rdd: rdd.count())
    started = time.monotonic()
    with pytest.raises(KafkaAuthenticationError) as caught:
        ssc.start()
    assert time.monotonic() - started < 15
    assert wrong not in str(caught.value)


def test_a_wrong_truststore_password_is_refused_naming_the_setting_before_any_job(
        sc, secured_kafka, topic, unique):
    params = {**_params(secured_kafka, "SASL_SSL", "PLAIN", "JKS"),
              "ssl.truststore.password": "wrong-store-password", "group.id": unique("g")}
    with pytest.raises(ConfigurationError) as caught:
        KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)],
                             LocationStrategies.PreferConsistent)
    message = str(caught.value)
    assert "ssl.truststore.password" in message and "wrong-store-password" not in message


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_an_executor_confluent_consumer_reports_a_refused_login_within_seconds(
        secured_kafka, topic, unique, mechanism):
    from dstream_kafka.read.backends.confluent import ConfluentBackend
    from dstream_kafka.client.kafka_params import fix_kafka_params

    wrong = "not-the-password-" + unique("pw")
    params = fix_kafka_params({**_params(secured_kafka, "SASL_SSL", mechanism, password=wrong),
                               "group.id": unique("g")})
    backend = ConfluentBackend(topic, 0, params)
    try:
        backend.seek(0)
        started = time.monotonic()
        with pytest.raises(KafkaAuthenticationError) as caught:
            while time.monotonic() - started < 30:
                backend.fetch(500)
        assert time.monotonic() - started < 15
        assert wrong not in str(caught.value) and "sasl.jaas.config" in str(caught.value)
    finally:
        backend.close()
