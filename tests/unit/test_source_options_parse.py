"""SourceOptions.parse: one parser for a batch read's options and a stream's, checked without a broker."""

from __future__ import annotations

import logging

import pytest

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.plan.batch_options import BatchOptions
from dstream_kafka.plan.stream_options import StartOptions


@pytest.mark.parametrize("read", [BatchOptions, StartOptions])
def test_both_reads_refuse_a_bad_fail_on_data_loss_with_one_message(read: type) -> None:
    with pytest.raises(ConfigurationError, match=r"option failOnDataLoss must be 'true' or 'false', "
                                                 r"got 'maybe'"):
        read.parse({"failOnDataLoss": "maybe"})


@pytest.mark.parametrize("read", [BatchOptions, StartOptions])
def test_both_reads_refuse_a_timestamp_that_is_not_a_whole_number_naming_the_fix(read: type) -> None:
    with pytest.raises(ConfigurationError, match=r"option endingTimestamp must be a timestamp in "
                                                 r"milliseconds since the epoch.*e\.g\."):
        read.parse({"endingTimestamp": "-5"})


@pytest.mark.parametrize(("read", "name"), [(BatchOptions, "Kafka batch"), (StartOptions, "direct stream")])
def test_an_unknown_option_is_refused_naming_the_read_and_the_closest_option(read: type, name: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"unknown {name} option 'endingOffset'; did you mean "
                                                 "endingOffsets"):
        read.parse({"endingOffset": "latest"})


def test_a_batch_read_starts_at_earliest_and_ends_at_latest_by_default() -> None:
    options = BatchOptions.parse({"subscribe": "t"})
    assert (options.start.kind, options.end.kind) == ("earliest", "latest")


def test_a_batch_read_takes_the_starting_timestamp_over_starting_offsets() -> None:
    options = BatchOptions.parse({"startingOffsets": "earliest", "startingTimestamp": 5})
    assert (options.start.option, options.start.timestamp) == ("startingTimestamp", 5)


def test_a_batch_read_takes_json_offsets_as_a_dict() -> None:
    options = BatchOptions.parse({"startingOffsets": {"t": {"0": 3}}})
    assert options.start.offsets == {TopicPartition("t", 0): 3}


def test_a_batch_read_ignores_trigger_options_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        options = BatchOptions.parse({"maxOffsetsPerTrigger": 10})
    assert "maxOffsetsPerTrigger" not in options.given
    assert "maxOffsetsPerTrigger is ignored in batch reads" in caplog.text


def test_a_stream_refuses_the_batch_only_subscribe_option() -> None:
    with pytest.raises(ConfigurationError, match="unknown direct stream option 'subscribe'"):
        StartOptions.parse({"subscribe": "t"})


@pytest.mark.parametrize("value", ["soon", "-1", 1.5])
def test_a_poll_timeout_that_is_not_a_whole_number_is_refused_naming_the_option(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"option kafkaConsumer.pollTimeoutMs must be a time in "
                                                 r"milliseconds \(a whole number >= 0\)"):
        BatchOptions.parse({"kafkaConsumer.pollTimeoutMs": value})


def test_keyword_options_of_a_batch_read_win_over_the_dict() -> None:
    options = BatchOptions.parse({"failOnDataLoss": "true"}, more={"failOnDataLoss": False})
    assert options.fail_on_data_loss is False
