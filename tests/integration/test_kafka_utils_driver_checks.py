"""kafka_utils.py's checks on the driver before any job, against the real broker (issue #13 item 5)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
from dstream_kafka.errors import ConfigurationError, InvalidOffsetRangeError
from dstream_kafka.offsets import OffsetRange

from stream_runs import params, values


def test_a_range_past_the_log_end_is_refused_at_once_naming_the_range_and_the_log_end(
        kafka, sc, unique):
    topic = unique("end")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, values("v", 40), partition=1)
    started = time.monotonic()
    with pytest.raises(InvalidOffsetRangeError, match=(
            rf"OffsetRange\(topic: '{topic}', partition: 1, range: \[0 -> 100\]\) ends past the "
            rf"end of the log of topic {topic} partition 1: the log ends at 40 .*offsets \[40, 100\) "
            r"do not exist yet; end the range at 40 or less")):
        KafkaUtils.createRDD(sc, params(kafka, unique("g")), [OffsetRange(topic, 1, 0, 100)])
    assert time.monotonic() - started < 10


def test_a_range_ending_at_the_log_end_is_accepted(kafka, sc, unique):
    topic = unique("end")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, values("v", 5))
    rdd = KafkaUtils.createRDD(sc, params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 5)])
    assert sorted(rdd.map(lambda r: r.value).collect()) == values("v", 5)


def test_a_misspelled_parameter_is_answered_in_the_java_spelling_the_user_wrote(kafka, sc):
    bad = {"bootstrap.server": kafka.bootstrap_servers, "group.id": "g"}
    with pytest.raises(ConfigurationError, match=r"Unknown Kafka consumer parameter "
                                                 r"'bootstrap.server'; did you mean bootstrap.servers,"):
        KafkaUtils.createRDD(sc, bad, [OffsetRange("t", 0, 0, 1)])


def test_a_misspelled_parameter_of_a_stream_is_answered_before_it_starts(kafka, make_ssc, unique):
    strategy = ConsumerStrategies.Subscribe(["t"], {**params(kafka, unique("g")), "group.di": "x"})
    with pytest.raises(ConfigurationError, match=r"'group.di'; did you mean group.id\?"):
        KafkaUtils.createDirectStream(make_ssc(0.2), LocationStrategies.PreferConsistent, strategy)


def test_create_rdd_from_options_refuses_kafka_params_that_are_a_string(sc: Any) -> None:
    with pytest.raises(ConfigurationError, match="kafkaParams must be a dict"):
        KafkaUtils.createRDDFromOptions(sc, "bootstrap.servers=x", {"subscribe": "x"})


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
