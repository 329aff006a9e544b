"""StartOptions.parse: Structured Streaming's start and end options, checked without a broker."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from dstream_kafka.errors import ConfigurationError, OffsetsJsonError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.plan.stream_options import StartOptions


def test_no_options_leave_the_stream_unbounded_and_failing_on_data_loss() -> None:
    options = StartOptions.parse(None)
    assert (options.start.kind, options.bounded, options.fail_on_data_loss) == (None, False, True)


def test_option_names_are_case_insensitive() -> None:
    assert StartOptions.parse({"STARTINGOFFSETS": "Earliest"}).start.kind == "earliest"


def test_json_starting_offsets_keep_the_earliest_and_latest_sentinels() -> None:
    options = StartOptions.parse({"startingOffsets": '{"t":{"0":23,"1":-2,"2":-1}}'})
    assert options.start.offsets == {TopicPartition("t", 0): 23, TopicPartition("t", 1): -2,
                                     TopicPartition("t", 2): -1}


def test_an_ending_option_makes_the_stream_bounded() -> None:
    assert StartOptions.parse({"endingOffsets": "latest"}).bounded


def test_ending_offsets_json_refuses_the_earliest_sentinel() -> None:
    with pytest.raises(OffsetsJsonError, match=r"option endingOffsets.*offset -2 for t-0 is negative"):
        StartOptions.parse({"endingOffsets": '{"t":{"0":-2}}'})


def test_ending_offsets_earliest_is_refused_naming_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="endingOffsets can't be 'earliest'.*use 'latest'"):
        StartOptions.parse({"endingOffsets": "earliest"})


def test_both_ending_offsets_and_an_ending_timestamp_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="endingOffsets and endingTimestamp are both given"):
        StartOptions.parse({"endingOffsets": "latest", "endingTimestamp": "5"})


def test_the_fail_on_data_loss_option_and_argument_must_agree() -> None:
    with pytest.raises(ConfigurationError, match="disagree; give it once"):
        StartOptions.parse({"failOnDataLoss": "false"}, failOnDataLoss=True)


def test_the_fail_on_data_loss_option_sets_the_policy() -> None:
    assert StartOptions.parse({"failOnDataLoss": "FALSE"}).fail_on_data_loss is False


def test_a_value_that_is_not_a_string_is_refused_naming_the_option() -> None:
    with pytest.raises(ConfigurationError, match=r"option startingOffsets must be a string"):
        StartOptions.parse({"startingOffsets": {"t": {"0": 1}}})


def test_an_unknown_timestamp_strategy_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="must be 'error' or 'latest', got 'skip'"):
        StartOptions.parse({"startingOffsetsByTimestampStrategy": "skip"})


def test_json_for_a_topic_outside_the_strategy_names_the_topic() -> None:
    options = StartOptions.parse({"startingOffsets": '{"other":{"0":1}}'})
    with pytest.raises(ConfigurationError, match="names topic 'other'.*it reads t"):
        options.check_topics(["t"])


def test_a_missing_partition_is_named_with_the_partitions_the_topic_has() -> None:
    options = StartOptions.parse({"endingOffsets": '{"t":{"3":1}}'})
    with pytest.raises(ConfigurationError, match=r"option endingOffsets names partition 3 of "
                                                 r"topic 't', which has partitions \[0, 1\]"):
        options.check_partitions({"t": {0, 1}})


@given(st.integers(min_value=0, max_value=2**62))
def test_any_whole_millisecond_count_is_a_starting_timestamp(stamp: int) -> None:
    assert StartOptions.parse({"startingTimestamp": stamp}).start.timestamp == stamp


@pytest.mark.parametrize("options, fragment", [
    ({"startingOffsets": '{"t":{"0":%d}}' % 2**70}, f"offset {2**70} for t-0 is out of range: offsets are 0 to "
                                                    "9223372036854775807"),
    ({"startingTimestamp": str(2**70)}, "option startingTimestamp is out of range: a timestamp in milliseconds "
                                        "since the epoch is 0 to 9223372036854775807"),
])
def test_a_value_beyond_int64_is_refused_as_out_of_range_naming_the_valid_range(
        options: dict[str, str], fragment: str) -> None:
    with pytest.raises(ConfigurationError) as info:
        StartOptions.parse(options)
    assert fragment in str(info.value) and "not an int" not in str(info.value)


def test_a_starting_timestamp_of_non_ascii_digits_is_refused_as_not_a_whole_number() -> None:
    with pytest.raises(ConfigurationError, match="must be a timestamp in milliseconds since the epoch"):
        StartOptions.parse({"startingTimestamp": "\u00b2"})
