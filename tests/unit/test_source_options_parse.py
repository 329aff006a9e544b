"""SourceOptions.parse: one parser for a batch read's options, a DataFrame read's and a stream's,
checked without a broker; check_loss, what both reads do with offsets the log lacks."""

from __future__ import annotations

import logging

import pytest

from dstream_kafka.errors import ConfigurationError, DataLossError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.plan.batch_options import BatchOptions, DataFrameOptions
from dstream_kafka.plan.source_options import check_loss
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


@pytest.mark.parametrize(("value", "expected"), [("TRUE", True), (" false", False), (True, True)])
def test_a_dataframe_read_parses_include_headers_case_insensitively(value: object,
                                                                     expected: bool) -> None:
    options = DataFrameOptions.parse({"subscribe": "t"}, more={"includeheaders": value})
    assert options.include_headers is expected


def test_a_dataframe_read_leaves_out_headers_by_default() -> None:
    assert DataFrameOptions.parse({"subscribe": "t"}).include_headers is False


def test_include_headers_must_be_true_or_false() -> None:
    with pytest.raises(ConfigurationError, match=r"option includeHeaders must be 'true' or 'false', "
                                                 r"got 'yes'"):
        DataFrameOptions.parse({"includeHeaders": "yes"})


def test_include_headers_given_twice_in_two_spellings_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="option includeHeaders is given twice"):
        DataFrameOptions.parse({"includeHeaders": "true"}, more={"INCLUDEHEADERS": "false"})


@pytest.mark.parametrize(("read", "name"), [(BatchOptions, "Kafka batch"), (StartOptions, "direct stream")])
def test_reads_without_a_dataframe_refuse_include_headers(read: type, name: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"unknown {name} option 'includeHeaders'"):
        read.parse({"includeHeaders": "true"})


def test_a_dataframe_read_suggests_include_headers_for_a_near_miss() -> None:
    with pytest.raises(ConfigurationError, match="did you mean includeHeaders"):
        DataFrameOptions.parse({"includeHeader": "true"})


_T0 = TopicPartition("t", 0)


def test_check_loss_passes_a_range_inside_the_log() -> None:
    assert check_loss(_T0, 3, 8, 0, 10, True) == (3, 8, None)


def test_check_loss_refuses_a_start_below_the_log_naming_the_lost_records() -> None:
    with pytest.raises(DataLossError, match=r"records \[2, 5\) are no longer in Kafka.*"
                                            "failOnDataLoss=false"):
        check_loss(_T0, 2, 8, 5, 10, True)


def test_check_loss_without_fail_moves_the_start_up_and_reports_the_lost_range() -> None:
    assert check_loss(_T0, 2, 8, 5, 10, False) == (5, 8, OffsetRange("t", 0, 2, 5))


def test_check_loss_without_fail_skips_a_start_past_the_log_end() -> None:
    assert check_loss(_T0, 12, 15, 0, 10, False) == (10, 10, OffsetRange("t", 0, 12, 15))
