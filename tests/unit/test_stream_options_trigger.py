"""A stream's trigger options (minOffsetsPerTrigger, maxTriggerDelay, maxOffsetsPerTrigger,
minPartitions): parsed with Structured Streaming's names and checks, and the hold-back rule."""

from __future__ import annotations

import logging

import pytest

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.plan.batch_options import BatchOptions
from dstream_kafka.plan.rate import TriggerGate
from dstream_kafka.plan.source_options import DEFAULT_MAX_TRIGGER_DELAY_MS
from dstream_kafka.plan.stream_options import StartOptions


def test_no_trigger_option_leaves_every_limit_unset_and_the_delay_at_15_minutes() -> None:
    options = StartOptions.parse(None)
    assert (options.min_offsets_per_trigger, options.max_offsets_per_trigger,
            options.min_partitions) == (None, None, None)
    assert options.max_trigger_delay_ms == DEFAULT_MAX_TRIGGER_DELAY_MS == 900_000


def test_the_trigger_options_are_read_from_strings_case_insensitively() -> None:
    options = StartOptions.parse({"MINOFFSETSPERTRIGGER": "50", "maxTriggerDelay": "2s",
                                  "maxOffsetsPerTrigger": "200", "minpartitions": "4"})
    assert (options.min_offsets_per_trigger, options.max_trigger_delay_ms,
            options.max_offsets_per_trigger, options.min_partitions) == (50, 2000, 200, 4)


def test_a_bare_max_trigger_delay_is_milliseconds_as_spark_reads_it() -> None:
    assert StartOptions.parse({"maxTriggerDelay": "750"}).max_trigger_delay_ms == 750


@pytest.mark.parametrize("name", ["minOffsetsPerTrigger", "maxOffsetsPerTrigger", "minPartitions"])
@pytest.mark.parametrize("value", ["0", "-3", "1.0", "a", ""])
def test_a_count_option_that_is_not_a_positive_whole_number_is_refused_naming_it(
        name: str, value: str) -> None:
    with pytest.raises(ConfigurationError, match=rf"option {name} must be .*e\.g\."):
        StartOptions.parse({name: value})


@pytest.mark.parametrize("value", ["-1s", "soon", "5 parsecs"])
def test_a_max_trigger_delay_that_is_not_a_time_is_refused_with_an_example(value: str) -> None:
    with pytest.raises(ConfigurationError, match=r"option maxTriggerDelay must be a time .*'5s'"):
        StartOptions.parse({"maxTriggerDelay": value})


def test_min_offsets_above_the_max_offsets_option_is_refused_as_spark_says() -> None:
    options = StartOptions.parse({"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "15"})
    with pytest.raises(ConfigurationError,
                       match=r"minOffsetPerTrigger\(20\) is higher than the maxOffsetsPerTrigger\(15\)"):
        options.max_offsets(None)


def test_min_offsets_above_the_max_offsets_keyword_is_refused_too() -> None:
    with pytest.raises(ConfigurationError, match="higher than the maxOffsetsPerTrigger"):
        StartOptions.parse({"minOffsetsPerTrigger": "20"}).max_offsets(10)


def test_the_max_offsets_keyword_and_option_must_agree() -> None:
    options = StartOptions.parse({"maxOffsetsPerTrigger": "15"})
    assert options.max_offsets(15) == 15 and options.max_offsets(None) == 15
    with pytest.raises(ConfigurationError, match="disagree; give it once"):
        options.max_offsets(16)


def test_a_batch_read_still_ignores_the_trigger_options_with_a_warning(caplog) -> None:
    with caplog.at_level(logging.WARNING):
        BatchOptions.parse({"subscribe": "t", "minOffsetsPerTrigger": "5", "maxTriggerDelay": "1s"})
    assert "minOffsetsPerTrigger is ignored in batch reads" in caplog.text


def test_the_gate_lets_the_first_batch_with_data_through_at_once() -> None:
    assert TriggerGate(100, 5_000).ready(1, now_ms=10.0)


def test_the_gate_holds_fewer_new_offsets_back_until_the_delay_has_passed() -> None:
    gate = TriggerGate(100, 5_000)
    gate.fired(1_000.0)
    assert not gate.ready(99, now_ms=5_999.0)
    assert gate.ready(100, now_ms=1_001.0)
    assert gate.ready(1, now_ms=6_000.0)


def test_the_gate_never_opens_without_new_offsets() -> None:
    assert not TriggerGate(1, 0).ready(0, now_ms=1e12)
