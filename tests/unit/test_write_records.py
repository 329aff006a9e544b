"""What a Kafka output record may hold (dstream_kafka.write.records), without a broker: header
shapes, topic names, and the per-topic partition checks with a stand-in metadata look-up."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dstream_kafka.errors import ConfigurationError, UnknownTopicPartitionError
from dstream_kafka.write.records import (MAX_TOPIC_LENGTH, Message, TopicPartitions, check_topic,
                                         message_builder)
from dstream_kafka.write.settings import serializer_for

_LEGAL = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


def _build(topic: str | None = "out") -> Any:
    return message_builder(topic, serializer_for("key", None), serializer_for("value", None))


def test_headers_given_as_two_character_strings_are_refused_not_unpacked() -> None:
    with pytest.raises(ConfigurationError, match=r"headers must be a list of \(key, value\) "
                                                 r"pairs or a dict.*item 0 is str 'ab'"):
        _build()({"value": b"v", "headers": ["ab", "cd"]})


@pytest.mark.parametrize("headers, match", [
    ("ab", "got str"), (b"ab", "got bytes"), ({("a", b"b")}, "got set"),
    ([("k",)], "item 0 is tuple"), ([("k", b"v", b"w")], "item 0 is tuple"),
    ([(b"k", b"v")], "the key of item 0 is bytes"), ({1: b"v"}, "the key of item 0 is int"),
    ([("k", 1)], "the value of header 'k' is int"), ({"k": 1.5}, "the value of header 'k' is float")])
def test_headers_of_other_shapes_are_refused_naming_the_field_and_the_accepted_shapes(
        headers: Any, match: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        _build()({"value": b"v", "headers": headers})
    message = str(caught.value)
    assert re.search(match, message), message
    assert "a record's headers must be a list of (key, value) pairs or a dict" in message
    assert "bytes, str or None values" in message


def test_header_pairs_lists_and_dicts_keep_str_keys_and_bytes_str_or_none_values() -> None:
    build = _build()
    expected = [("a", b"b"), ("n", b"1"), ("empty", b"")]
    for headers in ([("a", b"b"), ("n", "1"), ("empty", None)],
                    (["a", bytearray(b"b")], ("n", "1"), ("empty", None)),
                    {"a": b"b", "n": "1", "empty": None}):
        assert build({"value": b"v", "headers": headers}).headers == expected


@pytest.mark.parametrize("topic", [5, 5.0, b"events", ["events"], None])
def test_a_record_topic_of_another_type_is_refused_not_converted(topic: Any) -> None:
    build = _build(topic=None if topic is not None else "out")
    if topic is None:  # None means "the output's topic", never a topic named "None"
        assert build({"value": b"v", "topic": None}).topic == "out"
        return
    with pytest.raises(ConfigurationError, match="a record's topic must be a topic name"):
        build({"value": b"v", "topic": topic})


@pytest.mark.parametrize("topic", ["bad topic!", "", ".", "..", "a" * (MAX_TOPIC_LENGTH + 1),
                                   "events/eu", "événements"])
def test_a_record_topic_that_is_no_legal_kafka_name_is_refused(topic: str) -> None:
    with pytest.raises(ConfigurationError, match="a record's topic .* is not a legal Kafka "
                                                 "topic name: use 1 to 249 characters"):
        _build()({"value": b"v", "topic": topic})


@given(st.text(alphabet=_LEGAL, min_size=1, max_size=MAX_TOPIC_LENGTH))
def test_every_name_of_legal_characters_up_to_249_is_accepted(topic: str) -> None:
    if topic in (".", ".."):
        with pytest.raises(ConfigurationError):
            check_topic(topic, "topic")
    else:
        assert check_topic(topic, "topic") == topic


@given(st.text(min_size=1, max_size=20).filter(lambda t: any(c not in _LEGAL for c in t)))
def test_every_name_with_another_character_is_refused(topic: str) -> None:
    with pytest.raises(ConfigurationError, match="not a legal Kafka topic name"):
        check_topic(topic, "topic")


class _Metadata:
    """A stand-in for a producer's metadata: partition counts by topic, and the calls."""

    def __init__(self, **counts: int) -> None:
        self.counts = counts
        self.calls: list[str] = []

    def __call__(self, topic: str, timeout_s: float, refresh: bool) -> int | None:
        self.calls.append(f"{topic} (fresh)" if refresh else topic)
        return self.counts.get(topic)


def _message(topic: str, partition: int | None = None) -> Message:
    return Message(topic, partition, None, b"v", [])


def test_a_topic_is_looked_up_once_and_then_checked_from_the_cache() -> None:
    metadata = _Metadata(events=3)
    topics = TopicPartitions(metadata, wait_s=1.0)
    for partition in (None, 0, 2, None):
        topics.check(_message("events", partition))
    assert metadata.calls == ["events"]


def test_a_partition_past_the_count_is_refused_naming_topic_partition_and_count() -> None:
    metadata = _Metadata(events=3)
    topics = TopicPartitions(metadata, wait_s=1.0)
    with pytest.raises(UnknownTopicPartitionError,
                       match=r"partition 3 does not exist: topic 'events' has 3 partition\(s\), "
                             r"0 to 2"):
        topics.check(_message("events", 3))
    assert metadata.calls == ["events", "events (fresh)"]  # partitions may have been added


def test_partitions_added_since_the_first_look_up_are_found_by_a_fresh_one() -> None:
    metadata = _Metadata(events=1)
    topics = TopicPartitions(metadata, wait_s=1.0)
    topics.check(_message("events", 0))
    metadata.counts["events"] = 4
    topics.check(_message("events", 3))
    topics.check(_message("events", 2))
    assert metadata.calls == ["events", "events (fresh)"]


def test_a_missing_topic_is_asked_for_until_the_wait_ends_then_refused_naming_it() -> None:
    metadata = _Metadata()
    topics = TopicPartitions(metadata, wait_s=0.3, retry_s=0.05)
    with pytest.raises(UnknownTopicPartitionError) as caught:
        topics.check(_message("nowhere"))
    message = str(caught.value)
    assert "topic 'nowhere' does not exist" in message
    assert "within 300 ms (spark.streaming.kafka.producer.topicWait.ms)" in message
    assert "Create the topic" in message and "auto.create.topics.enable=true" in message
    assert len(metadata.calls) > 1  # a topic the brokers are creating gets the wait


def test_a_topic_that_appears_during_the_wait_is_written() -> None:
    answers = iter([None, None, 2])
    topics = TopicPartitions(lambda topic, timeout_s, refresh: next(answers), wait_s=5.0, retry_s=0.01)
    topics.check(_message("created-on-first-use", 1))
