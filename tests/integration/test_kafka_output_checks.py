"""The Kafka output's checks of its settings and records against the real broker, on both
client backends: each refusal names the cause and the fix, and nothing is written silently
wrong (headers unpacked from strings, topics made with str(), partitions or topics that do
not exist waited for or refused by the client in its own words)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from dstream_kafka import KafkaUtils, OffsetRange
from dstream_kafka.errors import BrokerTimeoutError, ConfigurationError
from dstream_kafka.write import KafkaOutput

# Every test runs once per client backend: the output follows the consumers' backend.
pytestmark = pytest.mark.usefixtures("backend")

SECRET = "pw-never-shown-7f3a"


def _params(kafka: Any, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 0, **extra}


def _read(kafka: Any, topic: str, isolation: str = "read_uncommitted") -> list[Any]:
    """Every record of ``topic`` a consumer of ``isolation`` sees, up to the end."""
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=None,
                             enable_auto_commit=False, isolation_level=isolation)
    try:
        parts = [TopicPartition(topic, p) for p in kafka.partitions_for(topic)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(parts)
        out: list[Any] = []
        deadline = time.monotonic() + 60
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            assert time.monotonic() < deadline, f"reading {topic} did not reach {ends}"
            for records in consumer.poll(timeout_ms=500).values():
                out.extend(records)
        return out
    finally:
        consumer.close(autocommit=False)


def _topics(kafka: Any) -> set[str]:
    return set(kafka.admin().list_topics())


def test_headers_given_as_two_character_strings_fail_the_write_and_nothing_is_unpacked(
        kafka, sc, unique):
    target = unique("out")
    kafka.create_topic(target)
    output = KafkaOutput(_params(kafka), topic=target)
    with pytest.raises(Exception, match=r"a record's headers must be a list of \(key, value\) "
                                        r"pairs or a dict .*item 0 is str 'ab'"):
        output.write(sc.parallelize([{"value": b"v", "headers": ["ab", "cd"]}], 1))
    assert _read(kafka, target) == []


def test_header_pairs_lists_and_dicts_are_written_as_given_by_either_backend(kafka, sc, unique):
    target = unique("out")
    kafka.create_topic(target)
    output = KafkaOutput(_params(kafka), topic=target)
    records = [{"value": b"0", "headers": [("a", b"b"), ("n", "1"), ("empty", None)]},
               {"value": b"1", "headers": [["a", b"b"], ["n", "1"], ["empty", None]]},
               {"value": b"2", "headers": {"a": b"b", "n": "1", "empty": None}}]
    assert output.write(sc.parallelize(records, 1)) == 3
    written = _read(kafka, target)
    assert [r.value for r in written] == [b"0", b"1", b"2"]
    for record in written:
        assert list(record.headers) == [("a", b"b"), ("n", b"1"), ("empty", b"")]


def test_a_record_partition_the_topic_lacks_fails_naming_topic_partition_and_count(
        kafka, sc, unique):
    target = unique("out")
    kafka.create_topic(target, partitions=3)
    output = KafkaOutput(_params(kafka), topic=target)
    with pytest.raises(Exception, match=f"a record's partition 3 does not exist: topic "
                                        f"'{target}' has 3 partition\\(s\\), 0 to 2"):
        output.write(sc.parallelize([{"value": b"v", "partition": 3}], 1))
    assert _read(kafka, target) == []


def test_partitions_added_after_a_producer_looked_the_topic_up_are_written(kafka, sc, unique):
    from kafka.admin import NewPartitions

    target = unique("out")
    kafka.create_topic(target)
    output = KafkaOutput(_params(kafka), topic=target)
    assert output.write(sc.parallelize([{"value": b"first", "partition": 0}], 1)) == 1
    kafka.admin().create_partitions({target: NewPartitions(3)})
    # a kept producer knows one partition: partition 2 makes it fetch fresh metadata
    assert output.write(sc.parallelize([{"value": b"later", "partition": 2}], 1)) == 1
    assert sorted((r.partition, r.value) for r in _read(kafka, target)) == [
        (0, b"first"), (2, b"later")]


def test_an_exactly_once_write_to_a_missing_partition_aborts_and_commits_nothing(
        kafka, sc, unique):
    source, target, group = unique("in"), unique("out"), unique("g")
    kafka.create_topic(source)
    kafka.create_topic(target, partitions=2)
    kafka.produce(source, [(b"k", b"v")] * 3)
    rdd = KafkaUtils.createRDD(sc, {"bootstrap.servers": kafka.bootstrap_servers,
                                    "group.id": group, "isolation.level": "read_committed"},
                               [OffsetRange(source, 0, 0, 3)])
    output = KafkaOutput(_params(kafka), topic=target, guarantee="exactly-once")
    with pytest.raises(Exception, match=f"partition 5 does not exist: topic '{target}' has 2"):
        output.write(rdd.map(lambda r: {"value": r.value, "partition": 5 if r.offset == 2
                                        else 0}), source=rdd, groupId=group)
    assert _read(kafka, target, "read_committed") == []
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, isolation_level="read_committed")
    try:
        assert consumer.committed(TopicPartition(source, 0)) is None
    finally:
        consumer.close(autocommit=False)


def test_a_record_topic_that_does_not_exist_fails_within_the_topic_wait_naming_it(
        kafka, sc, unique, spark_conf):
    spark_conf("spark.streaming.kafka.producer.topicWait.ms", "1s")
    missing = unique("missing")
    output = KafkaOutput(_params(kafka))
    started = time.monotonic()
    with pytest.raises(Exception) as caught:
        output.write(sc.parallelize([{"value": b"v", "topic": missing}], 1))
    elapsed = time.monotonic() - started
    text = str(caught.value)
    assert f"a record's topic '{missing}' does not exist" in text
    assert "within 1000 ms (spark.streaming.kafka.producer.topicWait.ms)" in text
    assert "Create the topic" in text and "auto.create.topics.enable=true" in text
    # The clients alone wait 60 s (kafka-python's max.block.ms) for a missing topic.
    assert elapsed < 45, elapsed
    assert missing not in _topics(kafka)


@pytest.mark.parametrize("topic, match", [
    ("bad topic!", "a record's topic 'bad topic!' is not a legal Kafka topic name"),
    (5, "a record's topic must be a topic name \\(str\\), got int 5")])
def test_a_record_topic_that_is_no_legal_name_fails_and_is_never_converted(
        kafka, sc, unique, topic, match):
    output = KafkaOutput(_params(kafka))
    before = _topics(kafka)
    with pytest.raises(Exception, match=match):
        output.write(sc.parallelize([{"value": b"v", "topic": topic}], 1))
    assert _topics(kafka) == before  # no topic "5" (or any other) was made


@pytest.mark.parametrize("topic", ["bad topic!", 5])
def test_an_output_topic_that_is_no_legal_name_is_refused_when_the_output_is_created(
        kafka, topic):
    with pytest.raises(ConfigurationError, match="the Kafka output's topic"):
        KafkaOutput(_params(kafka), topic=topic)


@pytest.mark.parametrize("params, match", [
    ({"linger.ms": -1}, "linger.ms is below its minimum 0"),
    ({"max.in.flight.requests.per.connection": 6}, "above its maximum 5"),
    ({"batch.size": -1}, "batch.size is below its minimum 0")])
def test_a_producer_setting_outside_kafkas_range_is_refused_when_the_output_is_created(
        kafka, unique, params, match):
    with pytest.raises(ConfigurationError, match=match):
        KafkaOutput({**_params(kafka), **params}, topic=unique("out"))


def test_sasl_against_a_plaintext_listener_fails_the_output_at_once_as_create_rdd_does(
        kafka, sc, unique):
    params = {"bootstrap.servers": kafka.bootstrap_servers,
              "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule '
                                  f'required username="u" password="{SECRET}";'}
    started = time.monotonic()
    with pytest.raises(BrokerTimeoutError) as output_error:
        KafkaOutput(params, topic=unique("out"))
    # bootstrap.timeout.ms is left at its 30 s: the refused handshake ends the wait.
    assert time.monotonic() - started < 20
    with pytest.raises(BrokerTimeoutError) as rdd_error:
        KafkaUtils.createRDD(sc, params, [OffsetRange(unique("t"), 0, 0, 1)])
    text = str(output_error.value)
    assert text == str(rdd_error.value)
    assert "refused the SASL handshake" in text and "PLAINTEXT listener" in text
    assert kafka.bootstrap_servers in text and SECRET not in text
