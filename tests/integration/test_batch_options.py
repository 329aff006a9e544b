"""Structured Streaming's batch offset options resolved against the real broker."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from dstream_kafka.errors import (
    ConfigurationError,
    DataLossError,
    InvalidOffsetRangeError,
    OffsetsJsonError,
    UnknownTopicPartitionError,
)
from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.plan.batch_options import plan_batch_read, resolve_offset_ranges
from dstream_kafka.offsets import OffsetRange, TopicPartition

SER = "org.apache.kafka.common.serialization."
# Record timestamps are T0 + 1000 * offset; recent, or retention would delete the records.
T0 = (int(time.time()) // 3600 - 1) * 3_600_000


def _params(kafka: Any, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": kafka.bootstrap_servers, "group.id": "resolution", **extra}


@pytest.fixture
def two_parts(kafka, unique):
    """Partition 0 holds offsets 0..9, partition 1 offsets 0..4; timestamps T0 + 1000 * offset."""
    name = unique("res")
    kafka.create_topic(name, partitions=2)
    producer = kafka.producer()
    for partition, count in ((0, 10), (1, 5)):
        for i in range(count):
            producer.send(
                name,
                value=f"{partition}-{i}".encode(),
                partition=partition,
                timestamp_ms=T0 + 1000 * i,
            )
    producer.flush()
    return name


def _resolve(kafka: Any, **options: Any) -> list[OffsetRange]:
    return resolve_offset_ranges(_params(kafka), options).ranges


def test_defaults_read_every_partition_from_earliest_to_latest(kafka, two_parts):
    assert _resolve(kafka, subscribe=two_parts) == [
        OffsetRange(two_parts, 0, 0, 10),
        OffsetRange(two_parts, 1, 0, 5),
    ]


def test_offsets_json_resolves_earliest_and_latest_sentinels(kafka, two_parts):
    ranges = _resolve(
        kafka,
        assign=f'{{"{two_parts}":[0,1]}}',
        startingOffsets=f'{{"{two_parts}":{{"0":3,"1":-2}}}}',
        endingOffsets=f'{{"{two_parts}":{{"0":-1,"1":4}}}}',
    )
    assert ranges == [OffsetRange(two_parts, 0, 3, 10), OffsetRange(two_parts, 1, 0, 4)]


def test_option_names_and_words_are_case_insensitive(kafka, two_parts):
    ranges = resolve_offset_ranges(
        _params(kafka),
        {"SUBSCRIBE": two_parts, "startingoffsets": "EarLiest", "EndingOffsets": "laTest"},
    ).ranges
    assert [r.count() for r in ranges] == [10, 5]


def test_starting_timestamp_applies_to_every_partition_and_wins_over_starting_offsets(
    kafka, two_parts
):
    ranges = _resolve(
        kafka, subscribe=two_parts, startingTimestamp=str(T0 + 3500), startingOffsets="earliest"
    )
    assert ranges == [OffsetRange(two_parts, 0, 4, 10), OffsetRange(two_parts, 1, 4, 5)]


def test_offsets_by_timestamp_resolve_each_partition(kafka, two_parts):
    ranges = _resolve(
        kafka,
        subscribe=two_parts,
        startingOffsetsByTimestamp=f'{{"{two_parts}":{{"0":{T0 + 2000},"1":{T0}}}}}',
        endingOffsetsByTimestamp=f'{{"{two_parts}":{{"0":{T0 + 7000},"1":{T0 + 99000}}}}}',
    )
    # No record at or after T0 + 99 s: the end is the latest offset.
    assert ranges == [OffsetRange(two_parts, 0, 2, 7), OffsetRange(two_parts, 1, 0, 5)]


def test_starting_timestamp_without_a_match_fails_unless_the_strategy_is_latest(kafka, two_parts):
    with pytest.raises(
        ConfigurationError,
        match=f"option startingTimestamp: no record of {two_parts}-0 has a timestamp at or after",
    ):
        _resolve(kafka, subscribe=two_parts, startingTimestamp=T0 + 99000)
    ranges = _resolve(
        kafka,
        subscribe=two_parts,
        startingTimestamp=T0 + 99000,
        startingOffsetsByTimestampStrategy="latest",
    )
    assert [r.count() for r in ranges] == [0, 0]


def test_starting_timestamp_must_be_a_single_long(kafka, two_parts):
    with pytest.raises(
        ConfigurationError, match="option startingTimestamp must be a timestamp in milliseconds"
    ):
        _resolve(kafka, subscribe=two_parts, startingTimestamp="1.5")


def test_subscribe_pattern_matches_topics_partially(kafka, two_parts, unique):
    other = unique("other")
    kafka.create_topic(other)
    ranges = _resolve(kafka, subscribePattern=two_parts[-8:])  # the unique suffix only
    assert {r.topic for r in ranges} == {two_parts}


def test_latest_is_rejected_as_a_batch_start(kafka, two_parts):
    with pytest.raises(
        ConfigurationError, match="starting offset can't be latest for batch queries on Kafka"
    ):
        _resolve(kafka, subscribe=two_parts, startingOffsets="latest")


def test_latest_sentinel_is_rejected_in_starting_offsets_naming_the_partition(kafka, two_parts):
    with pytest.raises(
        ConfigurationError, match=f"startingOffsets for {two_parts}-1 can't be latest"
    ):
        _resolve(kafka, subscribe=two_parts, startingOffsets=f'{{"{two_parts}":{{"0":0,"1":-1}}}}')


def test_earliest_is_rejected_as_a_batch_end(kafka, two_parts):
    with pytest.raises(
        ConfigurationError, match="option endingOffsets can't be 'earliest'.*use 'latest'"
    ):
        _resolve(kafka, subscribe=two_parts, endingOffsets="earliest")


def test_malformed_offsets_json_names_the_option_and_the_key(kafka, two_parts):
    with pytest.raises(
        OffsetsJsonError, match=r'Invalid option endingOffsets: partition key "x" of topic'
    ):
        _resolve(kafka, subscribe=two_parts, endingOffsets=f'{{"{two_parts}":{{"x":1}}}}')


def test_specific_offsets_must_cover_every_assigned_partition(kafka, two_parts):
    with pytest.raises(ConfigurationError, match="you must specify all TopicPartitions"):
        _resolve(kafka, subscribe=two_parts, startingOffsets=f'{{"{two_parts}":{{"0":1}}}}')


def test_exactly_one_of_assign_subscribe_and_subscribe_pattern(kafka, two_parts):
    with pytest.raises(ConfigurationError, match="One of the following options must be specified"):
        _resolve(kafka)
    with pytest.raises(
        ConfigurationError, match="Only one of the following options can be specified"
    ):
        _resolve(kafka, subscribe=two_parts, subscribePattern=".*")


def test_unknown_topic_is_rejected(kafka, unique):
    with pytest.raises(UnknownTopicPartitionError, match="does not exist in the Kafka cluster"):
        _resolve(kafka, subscribe=unique("nope"))


def test_unknown_partition_in_assign_is_rejected(kafka, two_parts):
    with pytest.raises(UnknownTopicPartitionError, match="Partition 7 of topic"):
        _resolve(kafka, assign=[TopicPartition(two_parts, 7)])


def test_unknown_option_is_rejected_with_a_suggestion(kafka, two_parts):
    with pytest.raises(ConfigurationError, match="did you mean startingOffsets"):
        _resolve(kafka, subscribe=two_parts, startingOffset="earliest")


def test_start_after_end_is_an_invalid_range(kafka, two_parts):
    with pytest.raises(
        InvalidOffsetRangeError, match="Beginning offset 8 is after the ending offset 5"
    ):
        _resolve(
            kafka,
            assign=[TopicPartition(two_parts, 0)],
            startingOffsets=f'{{"{two_parts}":{{"0":8}}}}',
            endingOffsets=f'{{"{two_parts}":{{"0":5}}}}',
        )


# -- failOnDataLoss ----------------------------------------------------------------------


def test_start_below_the_log_start_is_data_loss_naming_requested_and_earliest(kafka, two_parts):
    kafka.delete_records(two_parts, {0: 6})
    with pytest.raises(
        DataLossError,
        match=f"Requested offset 2 for topic {two_parts} partition 0 is below the earliest "
        "available offset 6",
    ):
        _resolve(
            kafka,
            assign=[TopicPartition(two_parts, 0)],
            startingOffsets=f'{{"{two_parts}":{{"0":2}}}}',
        )


def test_without_fail_on_data_loss_the_start_is_clamped_and_the_lost_range_reported(
    kafka, two_parts, caplog
):
    kafka.delete_records(two_parts, {0: 6})
    with caplog.at_level(logging.WARNING, logger="dstream_kafka.plan.source_options"):
        resolution = resolve_offset_ranges(
            _params(kafka),
            {
                "assign": [TopicPartition(two_parts, 0)],
                "startingOffsets": f'{{"{two_parts}":{{"0":2}}}}',
                "failOnDataLoss": "false",
            },
        )
    assert resolution.ranges == [OffsetRange(two_parts, 0, 6, 10)]
    assert resolution.lost == [OffsetRange(two_parts, 0, 2, 6)]
    assert "records [2, 6) are no longer in Kafka" in caplog.text


def test_start_after_the_log_end_is_data_loss_or_skipped(kafka, two_parts):
    start = f'{{"{two_parts}":{{"0":50}}}}'
    with pytest.raises(
        DataLossError, match=f"Partition {two_parts}-0's offset was changed from 50 to 10"
    ):
        _resolve(kafka, assign=[TopicPartition(two_parts, 0)], startingOffsets=start)
    resolution = resolve_offset_ranges(
        _params(kafka),
        {
            "assign": [TopicPartition(two_parts, 0)],
            "startingOffsets": start,
            "failOnDataLoss": False,
        },
    )
    assert resolution.ranges == [OffsetRange(two_parts, 0, 10, 10)]


# -- createRDDFromOptions ----------------------------------------------------------------


def test_create_rdd_from_options_reads_the_resolved_ranges(sc, kafka, two_parts):
    rdd = KafkaUtils.createRDDFromOptions(
        sc,
        _params(kafka, **{"value.deserializer": SER + "StringDeserializer"}),
        subscribe=two_parts,
        startingOffsets=f'{{"{two_parts}":{{"0":8,"1":3}}}}',
    )
    assert rdd.offsetRanges() == [OffsetRange(two_parts, 0, 8, 10), OffsetRange(two_parts, 1, 3, 5)]
    assert rdd.map(lambda r: r.value).collect() == ["0-8", "0-9", "1-3", "1-4"]


def test_min_partitions_splits_ranges_with_sparks_algorithm_and_no_location(sc, kafka, two_parts):
    rdd = KafkaUtils.createRDDFromOptions(
        sc, _params(kafka), {"subscribe": two_parts, "minPartitions": "5"}
    )
    # Sizes 10 and 5 over 5 partitions: round(10/15*5) = 3 pieces and round(5/15*5) = 2 pieces.
    assert rdd.offsetRanges() == [
        OffsetRange(two_parts, 0, 0, 3),
        OffsetRange(two_parts, 0, 3, 6),
        OffsetRange(two_parts, 0, 6, 10),
        OffsetRange(two_parts, 1, 0, 2),
        OffsetRange(two_parts, 1, 2, 5),
    ]
    assert all(rdd.preferredLocations(i) == [] for i in range(5))
    assert sorted(rdd.map(lambda r: (r.partition, r.offset)).collect()) == [
        (0, o) for o in range(10)
    ] + [(1, o) for o in range(5)]


def test_unsplit_ranges_keep_their_preferred_executor(sc, kafka, two_parts):
    rdd = KafkaUtils.createRDDFromOptions(sc, _params(kafka), subscribe=two_parts, minPartitions=2)
    host = sc.getConf().get("spark.driver.host")
    assert [rdd.preferredLocations(i) for i in range(2)] == [[f"executor_{host}_driver"]] * 2


def test_bad_min_partitions_fails_before_contacting_kafka(sc):
    with pytest.raises(ConfigurationError, match="minPartitions must be positive"):
        KafkaUtils.createRDDFromOptions(
            sc, {"bootstrap.servers": "127.0.0.1:1"}, subscribe="t", minPartitions=0
        )


def test_lost_ranges_are_reported_on_the_rdd(sc, kafka, two_parts):
    kafka.delete_records(two_parts, {1: 3})
    rdd = KafkaUtils.createRDDFromOptions(
        sc,
        _params(kafka),
        subscribe=two_parts,
        failOnDataLoss="false",
        startingOffsets=f'{{"{two_parts}":{{"0":0,"1":1}}}}',
    )
    assert rdd.lostOffsetRanges() == [OffsetRange(two_parts, 1, 1, 3)]
    assert rdd.count() == 12


def test_read_committed_latest_stops_before_an_open_transaction(sc, kafka, unique):
    from kafka import KafkaProducer

    name = unique("lso")
    kafka.create_topic(name)
    kafka.produce(name, ["a", "b"])
    producer = KafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers, transactional_id=unique("tx")
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(name, b"pending", partition=0)
        producer.flush()
        committed = _resolve_with(kafka, name, **{"isolation.level": "read_committed"})
        uncommitted = _resolve_with(kafka, name)
        producer.abort_transaction()
    finally:
        producer.close()
    assert committed == [OffsetRange(name, 0, 0, 2)]
    assert uncommitted == [OffsetRange(name, 0, 0, 3)]


def _resolve_with(kafka: Any, topic: str, **params: Any) -> list[OffsetRange]:
    return resolve_offset_ranges(_params(kafka, **params), {"subscribe": topic}).ranges


def test_prefer_brokers_places_partitions_on_their_leaders_host(sc, kafka, two_parts):
    from dstream_kafka.read.placement import LocationStrategies

    resolution = resolve_offset_ranges(_params(kafka), {"subscribe": two_parts})
    assert set(resolution.leaders.values()) == {"127.0.0.1"}
    rdd = KafkaUtils.createRDDFromOptions(
        sc, _params(kafka), {"subscribe": two_parts}, LocationStrategies.PreferBrokers
    )
    # The leader host runs the only executor (the local driver), so both prefer it.
    assert [rdd.preferredLocations(i) for i in range(2)] == [["executor_127.0.0.1_driver"]] * 2


def test_the_batch_read_pipeline_splits_the_non_empty_ranges_and_carries_the_options(
    kafka, two_parts
):
    read = plan_batch_read(
        _params(kafka),
        {"subscribe": two_parts, "endingOffsets": f'{{"{two_parts}":{{"0":4,"1":0}}}}'},
        {"minPartitions": 2, "failOnDataLoss": "false", "includeHeaders": "true"},
        {"spark.streaming.kafka.consumer.poll.ms": "700"},
        dataframe=True,
    )
    # partition 1's range is empty: left out before splitting, kept in the resolution
    assert read.resolution.ranges[1] == OffsetRange(two_parts, 1, 0, 0)
    assert (read.ranges, read.split) == (
        [OffsetRange(two_parts, 0, 0, 2), OffsetRange(two_parts, 0, 2, 4)], True)
    assert (read.settings.failOnDataLoss, read.settings.pollTimeoutMs) == (False, 700)
    assert read.options.include_headers is True


@pytest.mark.parametrize("topics", [5, [b"bytes-topic"], {"t": 1}])
def test_create_rdd_from_options_refuses_a_subscribe_value_that_is_not_topic_names(
        kafka: Any, sc: Any, topics: Any) -> None:
    with pytest.raises(ConfigurationError, match="'subscribe' must be"):
        KafkaUtils.createRDDFromOptions(sc, {"bootstrap.servers": kafka.bootstrap_servers},
                                        {"subscribe": topics})
