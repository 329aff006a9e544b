"""Unit and property tests for the offsets JSON codec."""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

with warnings.catch_warnings():
    # kafka-python 3.x uses importlib.resources APIs that warn on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka

from dstream_kafka.errors import ConfigurationError, OffsetsJsonError
from dstream_kafka.offsets import EARLIEST, LATEST, OffsetRange, TopicPartition
from dstream_kafka.offsets_json import (
    MAX_NESTING,
    offset_ranges_from_json,
    offset_ranges_to_json,
    partition_offsets_from_json,
    partition_offsets_to_json,
    partitions_from_json,
    partitions_to_json,
)

PROPERTY = settings(max_examples=200, deadline=None)
SPARK_EXAMPLE = 'Expected e.g. {"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}, got '

topics = st.text(min_size=1, max_size=20)
tps = st.builds(TopicPartition, topics, st.integers(0, 2**31 - 1))
offsets = st.one_of(st.sampled_from([EARLIEST, LATEST]), st.integers(0, 2**63 - 1))


# -- partition offsets -----------------------------------------------------------------------


def test_partition_offsets_to_json_sorts_by_topic_then_partition() -> None:
    mapping = {
        TopicPartition("topicB", 0): -2,
        TopicPartition("topicA", 10): 5,
        TopicPartition("topicA", 1): -1,
        TopicPartition("topicA", 0): 23,
    }
    assert partition_offsets_to_json(mapping) == (
        '{"topicA":{"0":23,"1":-1,"10":5},"topicB":{"0":-2}}'
    )


def test_partition_offsets_to_json_accepts_kafka_python_keys() -> None:
    assert partition_offsets_to_json({kafka.TopicPartition("t", 0): 1}) == '{"t":{"0":1}}'


def test_partition_offsets_to_json_of_an_empty_mapping_is_an_empty_object() -> None:
    assert partition_offsets_to_json({}) == "{}"


def test_partition_offsets_to_json_rejects_a_non_int_offset() -> None:
    with pytest.raises(ConfigurationError, match="must be an int"):
        partition_offsets_to_json({TopicPartition("t", 0): 1.5})


def test_partition_offsets_from_json_reads_sparks_example() -> None:
    text = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    assert partition_offsets_from_json(text) == {
        TopicPartition("topicA", 0): 23,
        TopicPartition("topicA", 1): LATEST,
        TopicPartition("topicB", 0): EARLIEST,
    }


def test_partition_offsets_from_json_keys_equal_kafka_python_topic_partitions() -> None:
    result = partition_offsets_from_json('{"t":{"3":7}}')
    assert result[kafka.TopicPartition("t", 3)] == 7


def test_partition_offsets_from_json_error_ends_with_sparks_example_and_the_text() -> None:
    text = '{"topicA":{"x":1}}'
    with pytest.raises(OffsetsJsonError) as info:
        partition_offsets_from_json(text)
    message = str(info.value)
    assert message.startswith("Invalid startingOffsets: ")
    assert message.endswith(SPARK_EXAMPLE + text)


def test_partition_offsets_from_json_error_names_the_field() -> None:
    with pytest.raises(OffsetsJsonError, match="^Invalid endingOffsets: "):
        partition_offsets_from_json("[]", field="endingOffsets")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"topicA":{"x":1}}', 'partition key "x" of topic "topicA"'),
        ('{"topicA":{"-1":1}}', 'partition key "-1"'),
        ('{"topicA":{" 1":1}}', 'partition key " 1"'),
        ('{"topicA":{"1.0":1}}', 'partition key "1.0"'),
        ('{"topicA":{"2147483648":1}}', 'partition key "2147483648"'),
        ('{"topicA":{"0":1.5}}', "offset 1.5 for topicA-0 is not an int"),
        ('{"topicA":{"0":23.0}}', "offset 23.0 for topicA-0 is not an int"),
        ('{"topicA":{"0":true}}', "offset true for topicA-0 is not an int"),
        ('{"topicA":{"0":"23"}}', 'offset "23" for topicA-0 is not an int'),
        ('{"topicA":{"0":null}}', "offset null for topicA-0 is not an int"),
        ('{"topicA":{"0":-3}}', "offset -3 for topicA-0 is negative"),
        ('{"topicA":{"0":NaN}}', "NaN is not a valid offset"),
        ('{"topicA":{"0":9223372036854775808}}', "offset 9223372036854775808"),
        ('{"topicA":[0,1]}', 'topic "topicA" maps to [0, 1]'),
        ('{"":{"0":1}}', 'topic name "" is empty'),
        ('{"topicA":{"0":1,"0":2}}', 'duplicate key "0"'),
        ('{"topicA":{"1":1,"01":2}}', 'partition 1 of topic "topicA" is given twice'),
        ("[1]", "the top level must be an object of topics"),
        ("{not json", "not valid JSON"),
        ("", "not valid JSON"),
    ],
)
def test_partition_offsets_from_json_names_the_offending_key_or_value(
    text: str, fragment: str
) -> None:
    with pytest.raises(OffsetsJsonError) as info:
        partition_offsets_from_json(text)
    assert fragment in str(info.value)
    assert str(info.value).endswith(SPARK_EXAMPLE + text)


def test_partition_offsets_from_json_can_forbid_sentinels() -> None:
    with pytest.raises(OffsetsJsonError, match="allowed sentinels: none"):
        partition_offsets_from_json('{"t":{"0":-1}}', allowed_sentinels=())


def test_a_refused_sentinel_is_answered_with_an_example_that_uses_no_sentinel() -> None:
    with pytest.raises(OffsetsJsonError) as info:
        partition_offsets_from_json('{"t":{"0":-1}}', "--file", allowed_sentinels=())
    assert 'Expected e.g. {"topicA":{"0":23,"1":42}}, got' in str(info.value)
    with pytest.raises(OffsetsJsonError) as info:
        partition_offsets_from_json('{"t":{"0":-2}}', allowed_sentinels=(LATEST,))
    assert 'Expected e.g. {"topicA":{"0":23,"1":-1}}, got' in str(info.value)


def test_an_offset_beyond_int64_is_out_of_range_naming_the_valid_range_not_a_type_error() -> None:
    with pytest.raises(OffsetsJsonError) as info:
        partition_offsets_from_json('{"t":{"0":%d}}' % 2**70, "startingOffsets")
    assert (f"offset {2**70} for t-0 is out of range: offsets are 0 to 9223372036854775807 (2**63 - 1), "
            "or -2 or -1") in str(info.value)
    assert "not an int" not in str(info.value)


def test_a_partition_key_beyond_int32_is_out_of_range_naming_the_valid_range() -> None:
    with pytest.raises(OffsetsJsonError, match=r'partition key "2147483648" of topic "t" is out of range: '
                                               r"partitions are 0 to 2147483647"):
        partition_offsets_from_json('{"t":{"2147483648":1}}')


def test_partition_offsets_from_json_can_allow_only_latest() -> None:
    assert partition_offsets_from_json('{"t":{"0":-1}}', allowed_sentinels=(LATEST,)) == {
        TopicPartition("t", 0): -1
    }
    with pytest.raises(OffsetsJsonError, match="offset -2"):
        partition_offsets_from_json('{"t":{"0":-2}}', allowed_sentinels=(LATEST,))


def test_partition_offsets_from_json_rejects_a_non_string_input() -> None:
    with pytest.raises(OffsetsJsonError, match="expected a JSON string"):
        partition_offsets_from_json(None)  # type: ignore[arg-type]


def test_partition_offsets_from_json_accepts_utf8_bytes() -> None:
    result = partition_offsets_from_json(b'{"t":{"0":1}}')  # type: ignore[arg-type]
    assert result == {TopicPartition("t", 0): 1}


def test_partition_offsets_from_json_accepts_an_empty_object() -> None:
    assert partition_offsets_from_json("{}") == {}


def test_offsets_json_error_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        partition_offsets_from_json("[]")


@PROPERTY
@given(st.dictionaries(tps, offsets, max_size=20))
def test_partition_offsets_json_round_trips(mapping: dict[TopicPartition, int]) -> None:
    text = partition_offsets_to_json(mapping)
    assert partition_offsets_from_json(text) == mapping


@PROPERTY
@given(st.dictionaries(tps, offsets, max_size=20))
def test_partition_offsets_json_is_deterministic_for_equal_mappings(
    mapping: dict[TopicPartition, int],
) -> None:
    reordered = dict(reversed(list(mapping.items())))
    assert partition_offsets_to_json(reordered) == partition_offsets_to_json(mapping)


# -- partitions ------------------------------------------------------------------------------


def test_partitions_to_json_sorts_and_groups_by_topic() -> None:
    parts = [
        TopicPartition("topicB", 1),
        ("topicA", 1),
        kafka.TopicPartition("topicA", 0),
        ("topicB", 0),
    ]
    assert partitions_to_json(parts) == '{"topicA":[0,1],"topicB":[0,1]}'


def test_partitions_from_json_reads_the_assign_shape_in_document_order() -> None:
    assert partitions_from_json('{"topicB":[1,0],"topicA":[0]}') == [
        TopicPartition("topicB", 1),
        TopicPartition("topicB", 0),
        TopicPartition("topicA", 0),
    ]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"topicA":[0,-1]}', "partition -1 of topic"),
        ('{"topicA":[true]}', "partition true of topic"),
        ('{"topicA":[1.0]}', "partition 1.0 of topic"),
        ('{"topicA":["0"]}', 'partition "0" of topic'),
        ('{"topicA":[0,0]}', 'partition 0 of topic "topicA" is given twice'),
        ('{"topicA":{"0":1}}', "not a list of partitions"),
        ("[0]", "the top level must be an object"),
    ],
)
def test_partitions_from_json_rejects_malformed_input_with_sparks_example(
    text: str, fragment: str
) -> None:
    with pytest.raises(OffsetsJsonError) as info:
        partitions_from_json(text)
    message = str(info.value)
    assert message.startswith("Invalid assign: ")
    assert fragment in message
    assert message.endswith('Expected e.g. {"topicA":[0,1],"topicB":[0,1]}, got ' + text)


@PROPERTY
@given(st.sets(tps, max_size=20))
def test_partitions_json_round_trips(parts: set[TopicPartition]) -> None:
    assert set(partitions_from_json(partitions_to_json(parts))) == parts


# -- offset ranges ---------------------------------------------------------------------------


def test_offset_ranges_to_json_keeps_order_and_uses_sparks_field_names() -> None:
    ranges = [OffsetRange("b", 1, 5, 9), OffsetRange("a", 0, 0, 3)]
    assert json.loads(offset_ranges_to_json(ranges)) == [
        {"topic": "b", "partition": 1, "fromOffset": 5, "untilOffset": 9},
        {"topic": "a", "partition": 0, "fromOffset": 0, "untilOffset": 3},
    ]


def test_offset_ranges_to_json_rejects_other_objects() -> None:
    with pytest.raises(ConfigurationError, match="Expected OffsetRange"):
        offset_ranges_to_json([("t", 0, 0, 1)])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"topic":"t"}', "must be a list of offset ranges"),
        ('[{"topic":"t","partition":0,"fromOffset":0}]', "item 0"),
        ('[{"topic":"t","partition":0,"fromOffset":0,"untilOffset":1,"x":1}]', "exactly the keys"),
        (
            '[{"topic":"t","partition":0,"fromOffset":5,"untilOffset":1}]',
            "Beginning offset 5 is after",
        ),
        (
            '[{"topic":"t","partition":0,"fromOffset":-1,"untilOffset":1}]',
            "fromOffset must be >= 0",
        ),
        (
            '[{"topic":"t","partition":0,"fromOffset":0.0,"untilOffset":1}]',
            "fromOffset must be an int",
        ),
        ('[{"topic":"","partition":0,"fromOffset":0,"untilOffset":1}]', "topic must be"),
    ],
)
def test_offset_ranges_from_json_rejects_malformed_items(text: str, fragment: str) -> None:
    with pytest.raises(OffsetsJsonError) as info:
        offset_ranges_from_json(text)
    assert fragment in str(info.value)
    assert str(info.value).endswith(", got " + text)


@PROPERTY
@given(
    st.lists(
        st.tuples(
            topics, st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)
        ).map(lambda t: OffsetRange(t[0], t[1], min(t[2], t[3]), max(t[2], t[3]))),
        max_size=20,
    )
)
def test_offset_ranges_json_round_trips_in_order(ranges: list[OffsetRange]) -> None:
    assert offset_ranges_from_json(offset_ranges_to_json(ranges)) == ranges


# -- issue #37 item 12: input nested past any offsets document ------------------------------------

@pytest.mark.parametrize("decode", [
    lambda text: partition_offsets_from_json(text, "--file"),
    lambda text: partitions_from_json(text, "--file"),
    lambda text: offset_ranges_from_json(text, "--file"),
], ids=["offsets", "partitions", "ranges"])
@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"t":' * 100_000 + "1" + "}" * 100_000,
                                  "[" * 100_000], ids=["array", "object", "unclosed"])
def test_json_nested_past_the_limit_is_one_error_naming_the_input_and_the_limit(decode, text) -> None:
    with pytest.raises(OffsetsJsonError) as caught:  # not a RecursionError
        decode(text)
    message = str(caught.value)
    assert message.startswith("Invalid --file: arrays and objects nest 100000 levels deep, over the limit of 100")
    assert message.endswith(f"... ({len(text)} characters)")  # the input is shown cut short
    assert len(message) < 600


@given(st.integers(min_value=1, max_value=MAX_NESTING))
@settings(max_examples=20, deadline=None)
def test_nesting_up_to_the_limit_is_judged_by_its_shape_not_refused_for_depth(depth: int) -> None:
    with pytest.raises(OffsetsJsonError) as caught:
        partition_offsets_from_json("[" * depth + "]" * depth)
    assert "nest" not in str(caught.value) and "top level must be an object" in str(caught.value)


def test_brackets_inside_topic_names_do_not_count_as_nesting() -> None:
    text = json.dumps({"[" * 150 + '"{': {"0": 5}})
    assert partition_offsets_from_json(text) == {TopicPartition("[" * 150 + '"{', 0): 5}
