"""Unit tests for TopicPartition, java_string_hash, OffsetRange and HasOffsetRanges."""

from __future__ import annotations

import copy
import pickle
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    # kafka-python 3.x uses importlib.resources APIs that warn on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

from dstream_kafka.errors import ConfigurationError, InvalidOffsetRangeError
from dstream_kafka.offsets import (
    EARLIEST,
    LATEST,
    HasOffsetRanges,
    OffsetRange,
    TopicPartition,
    as_topic_partition,
    java_string_hash,
)

PROPERTY = settings(max_examples=200, deadline=None)


# -- java_string_hash / javaHash -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("abc", 96354),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("t1", 3645),
        ("polygenelubricants", -2147483648),
    ],
)
def test_java_string_hash_matches_known_java_values(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_java_string_hash_counts_a_supplementary_character_as_two_utf16_units() -> None:
    # U+1F600 is the surrogate pair D83D DE00: 0xD83D * 31 + 0xDE00.
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00


def test_java_string_hash_of_non_ascii_bmp_text_uses_code_units() -> None:
    assert java_string_hash("é") == 0xE9
    assert java_string_hash("日本") == 0x65E5 * 31 + 0x672C


def _reference_java_hash(s: str) -> int:
    data = s.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + int.from_bytes(data[i : i + 2], "big")) % 2**32
    return h - 2**32 if h >= 2**31 else h


@PROPERTY
@given(st.text())
def test_java_string_hash_stays_a_signed_32_bit_int_equal_to_the_polynomial(s: str) -> None:
    h = java_string_hash(s)
    assert -(2**31) <= h < 2**31
    assert h == _reference_java_hash(s)


@pytest.mark.parametrize(("topic", "expected"), [("t1", 4637), ("t2", 4638), ("t3", 4639)])
def test_topic_partition_java_hash_matches_kafkas_hash_code(topic: str, expected: int) -> None:
    assert TopicPartition(topic, 1).javaHash() == expected


def test_topic_partition_java_hash_overflows_like_java_int() -> None:
    tp = TopicPartition("polygenelubricants", 0)
    # 31 * 31 + Integer.MIN_VALUE, no overflow; then a large partition wraps around.
    assert tp.javaHash() == 961 - 2**31
    wrapped = TopicPartition("polygenelubricants", 2**31 - 1).javaHash()
    assert -(2**31) <= wrapped < 2**31


def test_topic_partition_equals_and_hashes_like_kafka_python_topic_partition() -> None:
    ours = TopicPartition("events", 3)
    theirs = kafka.TopicPartition("events", 3)
    assert ours == theirs and hash(ours) == hash(theirs)
    assert {theirs: 1}[ours] == 1


def test_topic_partition_pickles_to_an_equal_value() -> None:
    tp = TopicPartition("events", 3)
    assert pickle.loads(pickle.dumps(tp)) == tp


def test_as_topic_partition_accepts_kafka_tuples_and_attribute_objects() -> None:
    class ConfluentLike:
        topic = "t"
        partition = 2

    assert as_topic_partition(kafka.TopicPartition("t", 2)) == TopicPartition("t", 2)
    assert as_topic_partition(("t", 2)) == TopicPartition("t", 2)
    assert type(as_topic_partition(ConfluentLike())) is TopicPartition


@pytest.mark.parametrize("bad", [("t",), ("", 0), ("t", -1), ("t", True), ("t", 1.0), 5])
def test_as_topic_partition_rejects_malformed_values(bad: object) -> None:
    with pytest.raises(ConfigurationError):
        as_topic_partition(bad)


# -- OffsetRange -----------------------------------------------------------------------------


def test_offset_range_repr_is_sparks_to_string() -> None:
    r = OffsetRange.create("x", 0, 0, 100)
    assert repr(r) == "OffsetRange(topic: 'x', partition: 0, range: [0 -> 100])"
    assert str(r) == repr(r)


def test_offset_range_count_is_until_minus_from() -> None:
    assert OffsetRange("t", 0, 5, 12).count() == 7


def test_offset_range_with_equal_offsets_is_empty() -> None:
    assert OffsetRange("t", 0, 18, 18).count() == 0


def test_offset_range_create_accepts_a_topic_partition() -> None:
    r = OffsetRange.create(TopicPartition("t", 1), 2, 3)
    assert r == OffsetRange("t", 1, 2, 3)


def test_offset_range_create_accepts_a_kafka_python_topic_partition() -> None:
    assert OffsetRange.create(kafka.TopicPartition("t", 1), 2, 3) == OffsetRange("t", 1, 2, 3)


def test_offset_range_create_accepts_keywords() -> None:
    r = OffsetRange.create(topic="t", partition=1, fromOffset=2, untilOffset=3)
    assert r.toTuple() == ("t", 1, 2, 3)


def test_offset_range_topic_partition_returns_a_topic_partition() -> None:
    tp = OffsetRange("t", 4, 0, 1).topicPartition()
    assert type(tp) is TopicPartition and tp == ("t", 4)


def test_offset_range_equality_and_hash_cover_all_four_fields() -> None:
    a = OffsetRange("t", 0, 1, 2)
    assert a == OffsetRange("t", 0, 1, 2) and hash(a) == hash(OffsetRange("t", 0, 1, 2))
    assert a != OffsetRange("t", 0, 1, 3)
    assert a != OffsetRange("t", 1, 1, 2)
    assert a != OffsetRange("u", 0, 1, 2)
    assert a != ("t", 0, 1, 2)


def test_offset_range_is_immutable() -> None:
    r = OffsetRange("t", 0, 1, 2)
    with pytest.raises(AttributeError):
        r.untilOffset = 5  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del r.topic
    with pytest.raises(AttributeError):
        r.extra = 1  # type: ignore[attr-defined]


def test_offset_range_pickles_and_copies_to_an_equal_value() -> None:
    r = OffsetRange("t", 0, 1, 2)
    assert pickle.loads(pickle.dumps(r)) == r
    assert copy.deepcopy(r) == r


def test_offset_range_to_tuple_and_from_tuple_round_trip() -> None:
    r = OffsetRange("t", 3, 10, 20)
    assert r.toTuple() == ("t", 3, 10, 20)
    assert OffsetRange.fromTuple(r.toTuple()) == r


def test_offset_range_from_tuple_rejects_the_wrong_arity() -> None:
    with pytest.raises(InvalidOffsetRangeError, match="tuple"):
        OffsetRange.fromTuple(("t", 0, 1))  # type: ignore[arg-type]


def test_offset_range_rejects_from_after_until_with_sparks_message() -> None:
    with pytest.raises(InvalidOffsetRangeError) as info:
        OffsetRange("t", 2, 5, 4)
    assert str(info.value) == (
        "Beginning offset 5 is after the ending offset 4 for topic t partition 2. "
        "You either provided an invalid fromOffset, or the Kafka topic has been damaged"
    )


@pytest.mark.parametrize("field", ["partition", "fromOffset", "untilOffset"])
def test_offset_range_rejects_a_negative_field_naming_it(field: str) -> None:
    values = {"topic": "t", "partition": 0, "fromOffset": 0, "untilOffset": 0, field: -5}
    if field == "fromOffset":
        values["untilOffset"] = 0
    with pytest.raises(InvalidOffsetRangeError, match=f"{field} must be >= 0"):
        OffsetRange(**values)


def test_offset_range_rejecting_a_sentinel_says_to_resolve_it() -> None:
    with pytest.raises(InvalidOffsetRangeError, match="resolve the EARLIEST"):
        OffsetRange("t", 0, EARLIEST, 10)
    with pytest.raises(InvalidOffsetRangeError, match="resolve"):
        OffsetRange("t", 0, 0, LATEST)


@pytest.mark.parametrize("bad", [True, 1.0, "1", None])
def test_offset_range_rejects_non_int_offsets_and_partitions(bad: object) -> None:
    with pytest.raises(InvalidOffsetRangeError, match="must be an int"):
        OffsetRange("t", 0, bad, 5)  # type: ignore[arg-type]
    with pytest.raises(InvalidOffsetRangeError, match="partition must be an int"):
        OffsetRange("t", bad, 0, 5)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["", None, 3])
def test_offset_range_rejects_a_missing_topic(bad: object) -> None:
    with pytest.raises(InvalidOffsetRangeError, match="topic must be a non-empty string"):
        OffsetRange(bad, 0, 0, 1)  # type: ignore[arg-type]


def test_offset_range_is_an_invalid_offset_range_error_and_a_value_error() -> None:
    with pytest.raises(ValueError):
        OffsetRange("t", 0, 2, 1)


def test_offset_range_accepts_offsets_beyond_32_bits() -> None:
    r = OffsetRange("t", 0, 2**40, 2**62)
    assert r.count() == 2**62 - 2**40


@PROPERTY
@given(
    st.text(min_size=1),
    st.integers(0, 2**31 - 1),
    st.integers(0, 2**63 - 1),
    st.integers(0, 2**63 - 1),
)
def test_offset_range_pickle_and_tuple_round_trips_preserve_equality(
    topic: str, partition: int, a: int, b: int
) -> None:
    r = OffsetRange(topic, partition, min(a, b), max(a, b))
    assert pickle.loads(pickle.dumps(r)) == r
    assert OffsetRange.fromTuple(r.toTuple()) == r
    assert hash(OffsetRange(*r.toTuple())) == hash(r)


# -- HasOffsetRanges -------------------------------------------------------------------------


def test_has_offset_ranges_is_a_runtime_checkable_protocol() -> None:
    class FakeRDD:
        def offsetRanges(self) -> list[OffsetRange]:
            return [OffsetRange("t", 0, 0, 1)]

    assert isinstance(FakeRDD(), HasOffsetRanges)
    assert not isinstance(object(), HasOffsetRanges)


def test_sentinels_are_sparks_values() -> None:
    assert (EARLIEST, LATEST) == (-2, -1)
