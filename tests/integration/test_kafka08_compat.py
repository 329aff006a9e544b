"""PySpark 2.4's KafkaStreamTests, and the rest of the 0-8 surface, on our engine.

The scenarios are those of ``pyspark/streaming/tests.py`` (2.4) ``KafkaStreamTests``, written
against ``dstream_kafka.streaming.kafka`` and the real broker. The receiver test becomes a
test that ``createStream`` names its replacement.
"""

from __future__ import annotations

import pickle
import threading
import time
from collections import Counter
from typing import Any, Callable

import pytest

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.streaming import StreamingContext
from dstream_kafka.streaming.kafka import (
    Broker,
    KafkaMessageAndMetadata,
    KafkaUtils,
    OffsetRange,
    TopicAndPartition,
    utf8_decoder,
)

from support import wait_until

BATCH = 0.5


class Collected:
    """Elements gathered by an output operation, thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.items: list[Any] = []

    def extend(self, items: list[Any]) -> None:
        with self._lock:
            self.items.extend(items)

    def __len__(self) -> int:
        with self._lock:
            return len(self.items)


def _collect(stream: Any) -> Collected:
    collected = Collected()
    stream.foreachRDD(lambda rdd: collected.extend(rdd.collect()))
    return collected


def _validate_stream_result(expected: dict[str, int], stream: Any) -> None:
    """Start ``stream``'s context and check the value counts it delivers (2.4's helper)."""
    collected = _collect(stream.map(lambda kv: kv[1]))
    stream.context().start()
    wait_until(lambda: len(collected) >= sum(expected.values()), "every message")
    time.sleep(2 * BATCH)  # nothing more arrives
    assert Counter(collected.items) == Counter(expected)


def _validate_rdd_result(expected: dict[str, int], rdd: Any) -> None:
    assert Counter(rdd.map(lambda kv: kv[1]).collect()) == Counter(expected)


def _params(kafka: Any, **extra: str) -> dict[str, str]:
    return {"metadata.broker.list": kafka.bootstrap_servers, **extra}


def _topic_with(kafka: Any, unique: Callable[[str], str], data: dict[str, int]) -> str:
    topic = unique("topic")
    kafka.create_topic(topic)
    kafka.send_messages(topic, data)
    return topic


# -- KafkaStreamTests (2.4) --------------------------------------------------------------

def test_create_stream_raises_an_error_naming_create_direct_stream(make_ssc):
    with pytest.raises(NotImplementedError) as raised:
        KafkaUtils.createStream(make_ssc(BATCH), "localhost:2181", "test-streaming-consumer",
                                {"events": 1}, {"auto.offset.reset": "smallest"})
    message = str(raised.value)
    assert "KafkaUtils.createDirectStream(ssc, ['events'], " in message
    assert "'group.id': 'test-streaming-consumer'" in message
    assert "'auto.offset.reset': 'smallest'" in message


def test_direct_stream_from_smallest_delivers_every_message(kafka, make_ssc, unique):
    send = {"a": 1, "b": 2, "c": 3}
    topic = _topic_with(kafka, unique, send)
    stream = KafkaUtils.createDirectStream(make_ssc(BATCH), [topic],
                                           _params(kafka, **{"auto.offset.reset": "smallest"}))
    _validate_stream_result(send, stream)


def test_direct_stream_from_offsets_delivers_every_message(kafka, make_ssc, unique):
    send = {"a": 1, "b": 2, "c": 3}
    topic = _topic_with(kafka, unique, send)
    stream = KafkaUtils.createDirectStream(make_ssc(BATCH), [topic], _params(kafka),
                                           {TopicAndPartition(topic, 0): 0})
    _validate_stream_result(send, stream)


def test_create_rdd_reads_the_offset_range(kafka, sc, unique):
    send = {"a": 1, "b": 2}
    topic = _topic_with(kafka, unique, send)
    rdd = KafkaUtils.createRDD(sc, _params(kafka), [OffsetRange(topic, 0, 0, 3)])
    _validate_rdd_result(send, rdd)


def test_create_rdd_with_leaders_reads_the_offset_range(kafka, sc, unique):
    send = {"a": 1, "b": 2, "c": 3}
    topic = _topic_with(kafka, unique, send)
    host, port = kafka.bootstrap_servers.split(",")[0].split(":")
    leaders = {TopicAndPartition(topic, 0): Broker(host, int(port))}
    rdd = KafkaUtils.createRDD(sc, _params(kafka), [OffsetRange(topic, 0, 0, 6)], leaders)
    _validate_rdd_result(send, rdd)


def test_create_rdd_returns_the_offset_ranges_it_was_given(kafka, sc, unique):
    topic = _topic_with(kafka, unique, {"a": 3, "b": 4, "c": 5})
    ranges = [OffsetRange(topic, 0, 0, 12)]
    rdd = KafkaUtils.createRDD(sc, _params(kafka), ranges)
    assert rdd.offsetRanges() == ranges


def test_offset_ranges_are_available_in_foreach_rdd_with_time_and_rdd(kafka, make_ssc, unique):
    topic = _topic_with(kafka, unique, {"a": 1, "b": 2, "c": 3})
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(context, [topic],
                                           _params(kafka, **{"auto.offset.reset": "smallest"}))
    offset_ranges = Collected()

    def get_offset_ranges(_, rdd):
        offset_ranges.extend([o for o in rdd.offsetRanges() if o.untilOffset > o.fromOffset])

    stream.foreachRDD(get_offset_ranges)
    context.start()
    wait_until(lambda: len(offset_ranges) >= 1, "a batch with data")
    assert offset_ranges.items == [OffsetRange(topic, 0, 0, 6)]


def test_offset_ranges_are_available_in_transform_before_map_count_pprint(kafka, make_ssc, unique,
                                                                           capsys):
    topic = _topic_with(kafka, unique, {"a": 1, "b": 2, "c": 3})
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(context, [topic],
                                           _params(kafka, **{"auto.offset.reset": "smallest"}))
    offset_ranges = Collected()

    def transform_with_offset_ranges(rdd):
        offset_ranges.extend([o for o in rdd.offsetRanges() if o.untilOffset > o.fromOffset])
        return rdd

    stream.transform(transform_with_offset_ranges).map(lambda kv: kv[1]).count().pprint()
    context.start()
    wait_until(lambda: len(offset_ranges) >= 1, "a batch with data")
    assert offset_ranges.items == [OffsetRange(topic, 0, 0, 6)]
    printed: list[str] = []
    wait_until(lambda: printed.append(capsys.readouterr().out) or "\n6\n" in "".join(printed),
              "pprint of the count 6")


@pytest.mark.parametrize("operation", ["foreachRDD(rdd)", "transform(time, rdd)"])
def test_offset_ranges_are_available_with_the_other_function_forms(kafka, make_ssc, unique,
                                                                   operation):
    topic = _topic_with(kafka, unique, {"a": 2})
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(context, [topic],
                                           _params(kafka, **{"auto.offset.reset": "smallest"}))
    offset_ranges = Collected()

    def record(rdd):
        offset_ranges.extend([o for o in rdd.offsetRanges() if o.untilOffset > o.fromOffset])
        return rdd

    if operation == "foreachRDD(rdd)":
        stream.foreachRDD(record)
    else:
        stream.transform(lambda time, rdd: record(rdd)).foreachRDD(lambda rdd: rdd.count())
    context.start()
    wait_until(lambda: len(offset_ranges) >= 1, "a batch with data")
    assert offset_ranges.items == [OffsetRange(topic, 0, 0, 2)]


def test_topic_and_partition_equality_is_by_topic_and_partition():
    a, b = TopicAndPartition("foo", 0), TopicAndPartition("foo", 0)
    assert a == b
    assert a != TopicAndPartition("bar", 0)
    assert a != TopicAndPartition("foo", 1)
    assert hash(a) == hash(b)
    assert {a: 1}[b] == 1


def test_transform_with_checkpoint_recovers_through_get_or_create_and_stops_gracefully(
        kafka, sc, unique, tmp_path):
    topic = _topic_with(kafka, unique, {"a": 1, "b": 2, "c": 3})
    params = _params(kafka, **{"auto.offset.reset": "smallest"})
    checkpoint = str(tmp_path / "checkpoint")
    offset_ranges = Collected()

    def transform_with_offset_ranges(rdd):
        offset_ranges.extend([o for o in rdd.offsetRanges() if o.untilOffset > o.fromOffset])
        return rdd

    def setup():
        context = StreamingContext(sc, BATCH)
        context.checkpoint(checkpoint)
        stream = KafkaUtils.createDirectStream(context, [topic], params)
        stream.transform(transform_with_offset_ranges).count().pprint()
        return context

    first = StreamingContext.getOrCreate(checkpoint, setup)
    try:
        first.start()
        wait_until(lambda: len(offset_ranges) >= 1, "the first run's batch")
        assert offset_ranges.items == [OffsetRange(topic, 0, 0, 6)]
        completed = len(first.completed_batches)
        wait_until(lambda: len(first.completed_batches) >= completed + 2, "checkpoints")
    finally:
        first.stop(False)

    kafka.send_messages(topic, {"d": 2})
    second = StreamingContext.getOrCreate(checkpoint, setup)
    try:
        second.start()
        second.awaitTermination(3)
    finally:
        second.stop(stopSparkContext=False, stopGraceFully=True)
    # Recovered at offset 6: only the new messages were read again.
    assert offset_ranges.items == [OffsetRange(topic, 0, 0, 6), OffsetRange(topic, 0, 6, 8)]


def test_rdd_message_handler_receives_key_and_message(kafka, sc, unique):
    topic = _topic_with(kafka, unique, {"a": 1, "b": 1, "c": 2})

    def get_key_and_double_message(m):
        return m and (m.key, m.message * 2)

    rdd = KafkaUtils.createRDD(sc, _params(kafka), [OffsetRange(topic, 0, 0, 4)],
                               messageHandler=get_key_and_double_message)
    _validate_rdd_result({"aa": 1, "bb": 1, "cc": 2}, rdd)


def test_direct_stream_message_handler_receives_key_and_message(kafka, make_ssc, unique):
    topic = _topic_with(kafka, unique, {"a": 1, "b": 2, "c": 3})

    def get_key_and_double_message(m):
        return m and (m.key, m.message * 2)

    stream = KafkaUtils.createDirectStream(make_ssc(BATCH), [topic],
                                           _params(kafka, **{"auto.offset.reset": "smallest"}),
                                           messageHandler=get_key_and_double_message)
    _validate_stream_result({"aa": 1, "bb": 2, "cc": 3}, stream)


# -- the rest of the 0-8 contract ----------------------------------------------------------

def test_direct_stream_without_reset_starts_at_the_latest_offsets(kafka, make_ssc, unique):
    topic = _topic_with(kafka, unique, {"old": 4})
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(context, [topic], _params(kafka))
    collected = _collect(stream.map(lambda kv: kv[1]))
    context.start()
    kafka.send_messages(topic, {"new": 3})
    wait_until(lambda: len(collected) >= 3, "the new messages")
    time.sleep(2 * BATCH)
    assert collected.items == ["new"] * 3


def test_direct_stream_reads_every_partition_of_its_topics(kafka, make_ssc, unique):
    topic = unique("topic")
    kafka.create_topic(topic, partitions=3)
    for partition in range(3):
        kafka.send_messages(topic, {f"p{partition}": partition + 1}, partition=partition)
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(context, [topic],
                                           _params(kafka, **{"auto.offset.reset": "smallest"}))
    _validate_stream_result({"p0": 1, "p1": 2, "p2": 3}, stream)


def test_decoders_apply_to_the_raw_key_and_value(kafka, sc, unique):
    topic = unique("topic")
    kafka.create_topic(topic)
    kafka.produce(topic, [("k", "v")])
    rdd = KafkaUtils.createRDD(sc, _params(kafka), [OffsetRange(topic, 0, 0, 1)],
                               keyDecoder=lambda b: b.upper(), valueDecoder=lambda b: b)
    assert rdd.collect() == [(b"K", b"v")]


def test_create_rdd_checks_on_the_driver_that_offsets_are_on_the_leader(kafka, sc, unique):
    topic = _topic_with(kafka, unique, {"a": 2})
    with pytest.raises(ConfigurationError, match=r"^Offsets not available on leader: "
                       rf"OffsetRange\(topic: '{topic}', partition: 0, range: \[0 -> 5\]\)$"):
        KafkaUtils.createRDD(sc, _params(kafka), [OffsetRange(topic, 0, 0, 5)])


def test_from_offsets_for_other_topics_than_the_topics_are_refused(kafka, make_ssc, unique):
    topic = _topic_with(kafka, unique, {"a": 1})
    with pytest.raises(ConfigurationError, match=rf"^The specified topics: {topic} do not equal "
                       "to the topic from offsets: other$"):
        KafkaUtils.createDirectStream(make_ssc(BATCH), [topic], _params(kafka),
                                      {TopicAndPartition("other", 0): 0})


def test_old_consumer_settings_are_translated_or_ignored(kafka, sc, unique):
    topic = _topic_with(kafka, unique, {"a": 2})
    old_params = _params(kafka, **{
        "group.id": unique("group"), "zookeeper.connect": "localhost:2181",
        "zookeeper.connection.timeout.ms": "10000", "auto.commit.enable": "false",
        "fetch.message.max.bytes": "1048576", "socket.timeout.ms": "30000",
        "auto.offset.reset": "smallest"})
    rdd = KafkaUtils.createRDD(sc, old_params, [OffsetRange(topic, 0, 0, 2)])
    assert rdd.collect() == [(None, "a"), (None, "a")]


def test_unknown_kafka_params_fail_when_the_stream_is_created(make_ssc):
    with pytest.raises(ConfigurationError, match="Unknown Kafka consumer parameter"):
        KafkaUtils.createDirectStream(make_ssc(BATCH), ["t"], {"metadata.broker.list": "localhost:9092",
                                                     "fetch.mesage.max.bytes": "1"})


def test_kafka_params_need_a_broker_list(make_ssc):
    with pytest.raises(ConfigurationError, match="metadata.broker.list or bootstrap.servers"):
        KafkaUtils.createDirectStream(make_ssc(BATCH), ["t"], {"group.id": "g"})


@pytest.mark.parametrize("call, message", [
    (lambda c, s: KafkaUtils.createDirectStream(c, "t", {}), "topics should be list"),
    (lambda c, s: KafkaUtils.createDirectStream(c, ["t"], [("k", "v")]),
     "kafkaParams should be dict"),
    (lambda c, s: KafkaUtils.createRDD(s, [("k", "v")], []), "kafkaParams should be dict"),
    (lambda c, s: KafkaUtils.createRDD(s, {}, (OffsetRange("t", 0, 0, 1),)),
     "offsetRanges should be list"),
])
def test_argument_types_are_checked_with_the_old_type_errors(make_ssc, sc, call, message):
    with pytest.raises(TypeError, match=f"^{message}$"):
        call(make_ssc(BATCH), sc)


def test_a_pyspark_streaming_context_is_refused_with_the_import_to_change(sc):
    import warnings

    from pyspark.streaming import StreamingContext as PySparkStreamingContext

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        old = PySparkStreamingContext(sc, 1)
    try:
        with pytest.raises(TypeError, match="from dstream_kafka.streaming import StreamingContext"):
            KafkaUtils.createDirectStream(old, ["t"], {"metadata.broker.list": "localhost:9092"})
    finally:
        old.stop(stopSparkContext=False)


def test_offset_range_prints_in_the_old_format():
    assert str(OffsetRange("t", 1, 2, 30)) == "OffsetRange(topic: t, partition: 1, range: [2 -> 30]"


def test_offset_ranges_compare_by_value_and_are_not_hashable():
    assert OffsetRange("t", 0, 0, 3) == OffsetRange("t", 0, 0, 3)
    assert OffsetRange("t", 0, 0, 3) != OffsetRange("t", 0, 0, 4)
    with pytest.raises(TypeError):
        hash(OffsetRange("t", 0, 0, 3))


def test_message_and_metadata_prints_and_pickles_as_before():
    m = KafkaMessageAndMetadata("t", 2, 7, b"k", b"v")
    assert str(m) == ("KafkaMessageAndMetadata(topic: t, partition: 2, offset: 7, "
                      "key and message...)")
    m._set_value_decoder(lambda b: b * 2)
    copy = pickle.loads(pickle.dumps(m))
    assert (copy.topic, copy.partition, copy.offset, copy.key, copy.message) == (
        "t", 2, 7, "k", "v")


def test_utf8_decoder_passes_none_through():
    assert utf8_decoder(None) is None
    assert utf8_decoder("é".encode()) == "é"
