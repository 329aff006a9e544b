"""Issue #13 item 1: Structured Streaming's start options on createDirectStream, real broker.

Each option alone on a group without offsets, each with an offset store that already holds
offsets (the store wins), the origin logged per partition, data loss at the requested start,
and each bad input.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetStores
from dstream_kafka.errors import ConfigurationError, DataLossError, OffsetsJsonError
from dstream_kafka.offsets import TopicPartition

from stream_runs import params, start_run, values


@pytest.fixture
def topic(kafka: Any, unique: Any) -> str:
    """A two-partition topic holding a0000..a0009 in partition 0 and b0000..b0009 in 1."""
    name = unique("start")
    kafka.create_topic(name, partitions=2)
    kafka.produce(name, values("a", 10), partition=0)
    kafka.produce(name, values("b", 10), partition=1)
    return name


def subscribe(kafka: Any, topic: str, group: str, **extra: Any) -> Any:
    return ConsumerStrategies.Subscribe([topic], params(kafka, group, **extra))


def test_starting_offsets_earliest_reads_every_record_although_auto_offset_reset_is_latest(
        kafka, make_ssc, unique, topic):
    run = start_run(make_ssc, subscribe(kafka, topic, unique("g")),
                    options={"startingOffsets": "earliest"})
    assert run.wait_for(20) == values("a", 10) + values("b", 10)


def test_starting_offsets_latest_reads_only_records_produced_after_the_start(
        kafka, make_ssc, unique, topic):
    run = start_run(make_ssc, subscribe(kafka, topic, unique("g"), **{"auto.offset.reset": "earliest"}),
                    options={"startingOffsets": "latest"})
    run.wait_batches(1)
    kafka.produce(topic, ["late"], partition=0)
    assert run.wait_for(1) == ["late"]
    run.wait_batches(2)
    assert run.read() == ["late"]


def test_starting_offsets_json_starts_each_partition_where_it_says(kafka, make_ssc, unique, topic):
    run = start_run(make_ssc, subscribe(kafka, topic, unique("g")),
                    options={"startingOffsets": f'{{"{topic}":{{"0":7,"1":-2}}}}'})
    assert run.wait_for(13) == values("a", 10)[7:] + values("b", 10)


def test_starting_timestamp_starts_every_partition_at_the_first_record_at_or_after_it(
        kafka, make_ssc, unique, topic):
    time.sleep(0.05)
    stamp = int(time.time() * 1000)
    kafka.produce(topic, ["a-new"], partition=0)
    kafka.produce(topic, ["b-new"], partition=1)
    run = start_run(make_ssc, subscribe(kafka, topic, unique("g")),
                    options={"startingTimestamp": str(stamp)})
    assert run.wait_for(2) == ["a-new", "b-new"]


def test_starting_offsets_by_timestamp_uses_each_partitions_own_timestamp(
        kafka, make_ssc, unique, topic):
    time.sleep(0.05)
    stamp = int(time.time() * 1000)
    kafka.produce(topic, ["a-new"], partition=0)
    run = start_run(make_ssc, subscribe(kafka, topic, unique("g")),
                    options={"startingOffsetsByTimestamp": f'{{"{topic}":{{"0":{stamp},"1":0}}}}'})
    assert run.wait_for(11) == ["a-new"] + values("b", 10)


@pytest.mark.parametrize("option", [
    {"startingOffsets": "earliest"},
    {"startingOffsets": "latest"},
    "json",
    {"startingTimestamp": "0"},
    "by-timestamp",
])
def test_offsets_in_the_store_win_over_every_starting_option(
        kafka, make_ssc, unique, topic, tmp_path, option, caplog):
    group, db = unique("g"), str(tmp_path / "offsets.db")
    if option == "json":
        option = {"startingOffsets": f'{{"{topic}":{{"0":-2,"1":-2}}}}'}
    elif option == "by-timestamp":
        option = {"startingOffsetsByTimestamp": f'{{"{topic}":{{"0":0,"1":0}}}}'}
    first = start_run(make_ssc, subscribe(kafka, topic, group, **{"auto.offset.reset": "earliest"}),
                      offsetStore=OffsetStores.sqlite(db))
    first.wait_for(20)
    first.context.stop(stopSparkContext=False, stopGraceFully=True)
    kafka.produce(topic, ["after"], partition=1)
    with caplog.at_level(logging.INFO, logger="dstream_kafka.plan.positions"):
        second = start_run(make_ssc, subscribe(kafka, topic, group),
                           offsetStore=OffsetStores.sqlite(db), options=option)
        assert second.wait_for(1) == ["after"]
    second.wait_batches(2)
    assert second.read() == ["after"]
    assert f"Partition {topic}-1 starts at offset 10 (from the offset store)" in caplog.text


def test_a_partition_the_store_lacks_starts_at_the_option_while_a_stored_one_resumes(
        kafka, make_ssc, unique, topic, tmp_path, caplog):
    group, db = unique("g"), str(tmp_path / "offsets.db")
    first = start_run(make_ssc, ConsumerStrategies.Assign([TopicPartition(topic, 0)], params(
        kafka, group, **{"auto.offset.reset": "earliest"})), offsetStore=OffsetStores.sqlite(db))
    first.wait_for(10)
    first.context.stop(stopSparkContext=False, stopGraceFully=True)
    with caplog.at_level(logging.INFO, logger="dstream_kafka.plan.positions"):
        second = start_run(make_ssc, subscribe(kafka, topic, group),
                           offsetStore=OffsetStores.sqlite(db),
                           options={"startingOffsets": f'{{"{topic}":{{"0":0,"1":4}}}}'})
        assert second.wait_for(6) == values("b", 10)[4:]
    assert f"Partition {topic}-0 starts at offset 10 (from the offset store)" in caplog.text
    assert f"Partition {topic}-1 starts at offset 4 (from option startingOffsets)" in caplog.text


def test_partitions_without_an_option_or_store_log_auto_offset_reset_as_their_origin(
        kafka, make_ssc, unique, topic, caplog):
    with caplog.at_level(logging.INFO, logger="dstream_kafka.plan.positions"):
        run = start_run(make_ssc, subscribe(kafka, topic, unique("g")))
        run.wait_batches(1)
    assert f"Partition {topic}-0 starts at offset 10 (from auto.offset.reset=latest)" in caplog.text


def test_a_json_start_below_the_log_start_fails_the_start_naming_the_option(
        kafka, make_ssc, unique, topic):
    kafka.delete_records(topic, {0: 5})
    context = make_ssc(0.2)
    KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                  subscribe(kafka, topic, unique("g")),
                                  options={"startingOffsets": f'{{"{topic}":{{"0":2,"1":0}}}}'}
                                  ).foreachRDD(lambda rdd: None)
    with pytest.raises(DataLossError, match=r"option startingOffsets: Requested offset 2 for topic "
                                            rf"{topic} partition 0 is below the earliest available "
                                            r"offset 5"):
        context.start()


def test_with_fail_on_data_loss_false_a_json_start_below_the_log_start_is_skipped_and_recorded(
        kafka, make_ssc, unique, topic, tmp_path):
    kafka.delete_records(topic, {0: 5})
    group, store = unique("g"), OffsetStores.sqlite(str(tmp_path / "offsets.db"))
    run = start_run(make_ssc, subscribe(kafka, topic, group), offsetStore=store,
                    options={"startingOffsets": f'{{"{topic}":{{"0":2,"1":0}}}}',
                             "failOnDataLoss": "false"})
    assert run.wait_for(15) == values("a", 10)[5:] + values("b", 10)
    losses = [(x.topic, x.partition, x.lost_from, x.lost_until)
              for x in OffsetStores.sqlite(str(tmp_path / "offsets.db")).data_losses(group)]
    assert losses == [(topic, 0, 2, 5)]


@pytest.mark.parametrize(("options", "error", "message"), [
    ({"startingOffsets": '{"t":{"0":}'}, OffsetsJsonError,
     r"Invalid option startingOffsets: not valid JSON"),
    ({"startingOffsets": '{"other":{"0":1}}'}, ConfigurationError,
     r"option startingOffsets names topic 'other', which this stream does not read"),
    ({"startingOffsets": "earliest", "startingTimestamp": "0"}, ConfigurationError,
     r"options startingOffsets and startingTimestamp are both given.*keep one of them"),
    ({"startingOffsetsByTimestamp": '{"t":{"0":1}}', "startingTimestamp": "0"},
     ConfigurationError, r"options startingOffsetsByTimestamp and startingTimestamp are both"),
    ({"startingTimestamp": "yesterday"}, ConfigurationError,
     r"option startingTimestamp must be a timestamp in milliseconds"),
    ({"startingOfsets": "earliest"}, ConfigurationError,
     r"unknown direct stream option 'startingOfsets'; did you mean startingOffsets"),
    ({"failOnDataLoss": "maybe"}, ConfigurationError, r"option failOnDataLoss must be 'true' or"),
])
def test_bad_start_options_are_refused_when_the_stream_is_created(
        kafka, make_ssc, unique, options, error, message):
    strategy = ConsumerStrategies.Subscribe(["t"], params(kafka, unique("g")))
    with pytest.raises(error, match=message):
        KafkaUtils.createDirectStream(make_ssc(0.2), LocationStrategies.PreferConsistent, strategy,
                                      options=options)


def test_json_naming_a_partition_the_topic_lacks_fails_the_start_before_any_batch(
        kafka, make_ssc, unique, topic):
    context = make_ssc(0.2)
    batches: list[Any] = []
    KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.SubscribePattern(topic, params(kafka, unique("g"))),
        options={"startingOffsets": f'{{"{topic}":{{"0":0,"5":0}}}}'}).foreachRDD(batches.append)
    with pytest.raises(ConfigurationError, match=rf"option startingOffsets names partition 5 of "
                                                 rf"topic '{topic}', which has partitions \[0, 1\]"):
        context.start()
    assert batches == []
