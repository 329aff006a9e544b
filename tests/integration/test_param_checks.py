"""client/param_checks.py against the real broker: bootstrap servers that cannot be reached or
are malformed, a security protocol the listener does not speak, and bad values that are echoed
only for keys known to be safe, each refused with one clear error before any data moves."""

from __future__ import annotations

import time
from typing import Any

import pytest

from dstream_kafka.errors import BrokerTimeoutError, ConfigurationError
from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import OffsetRange


SECRET = "S3cr3t-PW-123"


def test_an_unreachable_bootstrap_server_fails_within_bootstrap_timeout_naming_the_servers(
        sc: Any, unique: Any) -> None:
    params = {"bootstrap.servers": "127.0.0.1:1", "bootstrap.timeout.ms": "2000"}
    started = time.monotonic()
    with pytest.raises(BrokerTimeoutError) as info:
        KafkaUtils.createRDD(sc, params, [OffsetRange(unique("t"), 0, 0, 1)])
    assert time.monotonic() - started < 20
    text = str(info.value)
    assert "127.0.0.1:1" in text and "bootstrap.timeout.ms" in text and "2000" in text


def test_an_unreachable_bootstrap_server_fails_create_rdd_from_options_the_same_way(
        sc: Any, unique: Any) -> None:
    params = {"bootstrap.servers": "127.0.0.1:1", "bootstrap.timeout.ms": "2000"}
    with pytest.raises(BrokerTimeoutError, match="127.0.0.1:1"):
        KafkaUtils.createRDDFromOptions(sc, params, {"subscribe": unique("t")})


def test_an_unresolvable_bootstrap_host_fails_naming_the_host(sc: Any, unique: Any) -> None:
    params = {"bootstrap.servers": "no-such-host.invalid:9092", "bootstrap.timeout.ms": "2000"}
    with pytest.raises(BrokerTimeoutError, match="no-such-host.invalid:9092"):
        KafkaUtils.createRDD(sc, params, [OffsetRange(unique("t"), 0, 0, 1)])


def test_a_sasl_client_against_a_plaintext_listener_names_the_protocol_mismatch(
        kafka: Any, sc: Any, topic: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "bootstrap.timeout.ms": "3000",
              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                  f'required username="u" password="{SECRET}";'}
    with pytest.raises(BrokerTimeoutError) as info:
        KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)])
    text = str(info.value)
    assert "security.protocol=SASL_PLAINTEXT" in text and "PLAINTEXT listener" in text
    assert kafka.bootstrap_servers in text and SECRET not in text


def test_an_ssl_client_against_a_plaintext_listener_names_the_protocol_mismatch(
        kafka: Any, sc: Any, topic: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "bootstrap.timeout.ms": "3000",
              "security.protocol": "SSL"}
    with pytest.raises(BrokerTimeoutError, match="security.protocol=SSL"):
        KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)])


@pytest.mark.parametrize("servers", ["not a host:::", "not:a:host", "host:notaport",
                                     "host:70000", "host:", ":9092", "", " , ", "a:1,,b:2"])
def test_a_malformed_bootstrap_servers_value_is_refused_naming_the_field(
        sc: Any, unique: Any, servers: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        KafkaUtils.createRDD(sc, {"bootstrap.servers": servers},
                             [OffsetRange(unique("t"), 0, 0, 1)])
    text = str(info.value)
    assert "bootstrap.servers" in text and "host:port" in text


def test_a_bootstrap_servers_list_with_a_non_string_is_refused(sc: Any, unique: Any) -> None:
    with pytest.raises(ConfigurationError, match="bootstrap.servers"):
        KafkaUtils.createRDD(sc, {"bootstrap.servers": ["127.0.0.1:9092", 9092]},
                             [OffsetRange(unique("t"), 0, 0, 1)])


def test_a_bracketed_ipv6_bootstrap_server_is_accepted_as_a_value(kafka: Any, sc: Any,
                                                                  text_topic: str) -> None:
    servers = "[::1]:1," + kafka.bootstrap_servers  # first one unreachable, second one real
    rdd = KafkaUtils.createRDD(sc, {"bootstrap.servers": servers},
                               [OffsetRange(text_topic, 0, 0, 5)])
    assert rdd.count() == 5


@pytest.mark.parametrize("key", ["check.crcs", "fetch.max.wait.ms", "enable.auto.commit",
                                 "api.version", "retry.backoff.ms", "max.poll.records"])
def test_a_bad_value_is_not_echoed_for_a_key_not_known_to_be_safe(
        kafka: Any, sc: Any, topic: str, key: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers, key: SECRET}
    with pytest.raises(ConfigurationError) as info:
        KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)])
    text = str(info.value)
    assert key in text and SECRET not in text and "S3cr3t" not in text


def test_a_bad_value_is_not_echoed_through_the_chained_cause(kafka: Any, sc: Any,
                                                             topic: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "api.version": SECRET}
    with pytest.raises(ConfigurationError) as info:
        KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)])
    chained = [info.value.__cause__, info.value.__context__]
    assert all(SECRET not in repr(e) for e in chained)


def test_a_bad_value_of_a_known_safe_key_is_echoed(kafka: Any, sc: Any, topic: str) -> None:
    with pytest.raises(ConfigurationError, match="'sometimes'"):
        KafkaUtils.createRDD(sc, {"bootstrap.servers": kafka.bootstrap_servers,
                                  "isolation.level": "sometimes"}, [OffsetRange(topic, 0, 0, 1)])
