"""Issue #18, bad input and unclear errors (items 6, 8, 12, 13, 14) and their siblings.

Each test feeds one bad input to the real broker, Spark or the ``dstream-kafka`` command and
checks that the answer is one clear ``DStreamKafkaError`` naming the field, the value where it
is not secret, and the fix, before any data moves.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from dstream_kafka.errors import (
    BrokerTimeoutError,
    ConfigurationError,
    InvalidOffsetRangeError,
)
from dstream_kafka.config import SparkConfReader
from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.plan.rate import DefaultPerPartitionConfig

from support import STRING_DESERIALIZER

INT_DESERIALIZER = "org.apache.kafka.common.serialization.IntegerDeserializer"
UUID_DESERIALIZER = "org.apache.kafka.common.serialization.UUIDDeserializer"
SECRET = "S3cr3t-PW-123"


@pytest.fixture
def topic(kafka: Any, unique: Any) -> str:
    name = unique("hin")
    kafka.create_topic(name)
    return name


@pytest.fixture
def text_topic(kafka: Any, topic: str) -> str:
    """A topic holding five text records (keys and values are plain words)."""
    kafka.produce(topic, [(f"k{i}".encode(), f"word-{i}".encode()) for i in range(5)])
    return topic


# -- item 6: unreachable bootstrap servers and protocol mismatches -----------------------------


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


def test_an_executor_consumer_that_cannot_bootstrap_names_the_servers_and_its_bound() -> None:
    from dstream_kafka.read.backends.kafka_python import KafkaPythonBackend

    with pytest.raises(BrokerTimeoutError, match="127.0.0.1:1.*bootstrap.timeout.ms=1000"):
        KafkaPythonBackend("t", 0, {"bootstrap_servers": "127.0.0.1:1",
                                    "bootstrap_timeout_ms": 1000})


# -- item 8: malformed values reach raw Python errors -------------------------------------------


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


@pytest.mark.parametrize("field", ["value", "key"])
def test_an_integer_deserializer_over_text_names_topic_partition_and_offset(
        kafka: Any, sc: Any, text_topic: str, backend: str, field: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers,
              f"{field}.deserializer": INT_DESERIALIZER}
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 2, 4)])
    with pytest.raises(Exception) as info:
        rdd.collect()
    text = str(info.value)
    assert "KafkaReadError" in text
    assert f"{field}.deserializer" in text and "IntegerDeserializer" in text
    assert f"topic {text_topic} partition 0 offset 2" in text


def test_a_uuid_deserializer_over_text_names_the_offset(kafka: Any, sc: Any,
                                                        text_topic: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers,
              "value.deserializer": UUID_DESERIALIZER}
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 0, 5)])
    with pytest.raises(Exception, match=f"topic {text_topic} partition 0 offset 0"):
        rdd.collect()


def test_a_failing_user_deserializer_names_the_offset_and_the_callable(
        kafka: Any, sc: Any, text_topic: str) -> None:
    def strict(data: bytes) -> int:
        return int(data)

    params = {"bootstrap.servers": kafka.bootstrap_servers, "value_deserializer": strict}
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 1, 5)])
    with pytest.raises(Exception) as info:
        rdd.collect()
    text = str(info.value)
    assert f"topic {text_topic} partition 0 offset 1" in text and "strict" in text


def test_a_string_deserializer_still_reads_text(kafka: Any, sc: Any, text_topic: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers,
              "value.deserializer": STRING_DESERIALIZER}
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 0, 5)])
    assert [r.value for r in rdd.collect()] == [f"word-{i}" for i in range(5)]


@pytest.mark.parametrize("fields", [(0, 2**63, 2**63 + 5), (0, 0, 2**63), (2**31, 0, 1)])
def test_offsets_beyond_the_kafka_range_are_refused_before_any_job(
        kafka: Any, sc: Any, topic: str, fields: tuple[int, int, int]) -> None:
    with pytest.raises(InvalidOffsetRangeError) as info:
        KafkaUtils.createRDD(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                             [OffsetRange(topic, *fields)])
    assert topic in str(info.value) and "at most" in str(info.value)


def test_starting_offsets_json_beyond_the_64_bit_range_is_refused(
        kafka: Any, sc: Any, topic: str) -> None:
    with pytest.raises(ConfigurationError, match="startingOffsets"):
        KafkaUtils.createRDDFromOptions(
            sc, {"bootstrap.servers": kafka.bootstrap_servers},
            {"assign": f'{{"{topic}":[0]}}', "startingOffsets": f'{{"{topic}":{{"0":{2**63}}}}}'})


@pytest.mark.parametrize("options", ["subscribe=x", ["subscribe", "x"], 42])
def test_create_rdd_from_options_refuses_options_that_are_not_a_mapping(
        kafka: Any, sc: Any, options: Any) -> None:
    with pytest.raises(ConfigurationError) as info:
        KafkaUtils.createRDDFromOptions(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                                        options)
    assert "options must be a dict" in str(info.value) and '{"subscribe"' in str(info.value)


def test_create_rdd_from_options_refuses_a_non_string_option_name(kafka: Any, sc: Any) -> None:
    with pytest.raises(ConfigurationError, match="option names must be strings"):
        KafkaUtils.createRDDFromOptions(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                                        {1: "x"})


@pytest.mark.parametrize("topics", [5, [b"bytes-topic"], {"t": 1}])
def test_create_rdd_from_options_refuses_a_subscribe_value_that_is_not_topic_names(
        kafka: Any, sc: Any, topics: Any) -> None:
    with pytest.raises(ConfigurationError, match="'subscribe' must be"):
        KafkaUtils.createRDDFromOptions(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                                        {"subscribe": topics})


def test_create_rdd_from_options_refuses_kafka_params_that_are_a_string(sc: Any) -> None:
    with pytest.raises(ConfigurationError, match="kafkaParams must be a dict"):
        KafkaUtils.createRDDFromOptions(sc, "bootstrap.servers=x", {"subscribe": "x"})


# -- item 12: negative rates and overlapping ranges ---------------------------------------------


@pytest.mark.parametrize("key,value", [
    ("spark.streaming.kafka.maxRatePerPartition", "-5"),
    ("spark.streaming.kafka.minRatePerPartition", "-1"),
    ("spark.streaming.backpressure.initialRate", "-1"),
])
def test_a_negative_rate_is_refused_naming_the_key(sc: Any, key: str, value: str) -> None:
    conf = sc.getConf().set(key, value)
    with pytest.raises(ConfigurationError) as info:
        DefaultPerPartitionConfig(conf)
        SparkConfReader(conf).backpressure_initial_rate  # noqa: B018 - read for its check
    assert key in str(info.value) and value in str(info.value)


@pytest.mark.parametrize("ranges", [[(0, 5), (0, 5)], [(0, 5), (3, 8)], [(2, 4), (0, 10)]])
def test_overlapping_ranges_of_one_partition_are_refused_before_any_job(
        kafka: Any, sc: Any, text_topic: str, ranges: list[tuple[int, int]]) -> None:
    offset_ranges = [OffsetRange(text_topic, 0, a, b) for a, b in ranges]
    with pytest.raises(InvalidOffsetRangeError) as info:
        KafkaUtils.createRDD(sc, {"bootstrap.servers": kafka.bootstrap_servers}, offset_ranges)
    text = str(info.value)
    assert f"topic {text_topic} partition 0" in text and "overlap" in text


def test_adjacent_ranges_of_one_partition_read_every_record_once(
        kafka: Any, sc: Any, text_topic: str) -> None:
    ranges = [OffsetRange(text_topic, 0, 0, 2), OffsetRange(text_topic, 0, 2, 5),
              OffsetRange(text_topic, 0, 5, 5)]
    rdd = KafkaUtils.createRDD(sc, {"bootstrap.servers": kafka.bootstrap_servers}, ranges)
    assert sorted(r.offset for r in rdd.collect()) == [0, 1, 2, 3, 4]


def test_create_rdd_from_options_refuses_a_partition_assigned_twice(
        kafka: Any, sc: Any, text_topic: str) -> None:
    with pytest.raises(ConfigurationError, match="given twice"):
        KafkaUtils.createRDDFromOptions(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                                        {"assign": f'{{"{text_topic}":[0,0]}}'})


def test_a_lowercase_security_protocol_is_read_as_java_reads_it(kafka: Any, sc: Any,
                                                                 text_topic: str) -> None:
    params = {"bootstrap.servers": kafka.bootstrap_servers, "security.protocol": "plaintext",
              "bootstrap.timeout.ms": "5000"}
    assert KafkaUtils.createRDD(sc, params, [OffsetRange(text_topic, 0, 0, 5)]).count() == 5


# -- item 13: values of keys not known to be safe are never echoed ------------------------------


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


# -- item 14: the demo command --------------------------------------------------------------------


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dstream_kafka.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_the_demo_against_an_unreachable_broker_prints_one_error_line_within_its_timeout() -> None:
    started = time.monotonic()
    result = _cli("demo", "--bootstrap-servers", "127.0.0.1:1", "--connect-timeout", "2")
    assert time.monotonic() - started < 60
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dstream-kafka: error:")
    assert "127.0.0.1:1" in lines[0] and "--connect-timeout" in lines[0]


@pytest.mark.parametrize("args", [
    ["--bootstrap-servers", "not:a:host"],
    ["--bootstrap-servers", "not a host:::"],
    ["--rate", "-5"], ["--rate", "0"],
    ["--duration", "-1"], ["--duration", "nan"], ["--duration", "0"],
    ["--batch-seconds", "0"], ["--batch-seconds", "-1"], ["--batch-seconds", "inf"],
    ["--connect-timeout", "-1"],
    ["--topic", "bad topic"], ["--topic", ""], ["--group", ""],
])
def test_a_bad_demo_option_is_a_usage_error_before_anything_starts(args: list[str]) -> None:
    result = _cli("demo", *args, timeout=60)
    assert result.returncode == 2
    assert args[0] in result.stderr and "Traceback" not in result.stderr


def test_the_demo_broker_check_passes_for_a_real_broker(kafka: Any) -> None:
    from dstream_kafka.operate.demo import check_broker

    check_broker(kafka.bootstrap_servers, 10.0)
