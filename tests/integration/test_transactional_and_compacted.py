"""Compacted and transactional topics, with and without allowNonConsecutiveOffsets."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import OffsetRange

from support import STRING_DESERIALIZER, string_params

ALLOW = "spark.streaming.kafka.allowNonConsecutiveOffsets"
POLL_MS = "spark.streaming.kafka.consumer.poll.ms"

# Every test runs once per executor consumer backend.
pytestmark = pytest.mark.usefixtures("backend")


def _params(kafka: Any, group: str, **extra: Any) -> dict[str, Any]:
    return string_params(kafka, group, **{"key.deserializer": STRING_DESERIALIZER, **extra})


def _committed(kafka: Any, group: str) -> dict[str, Any]:
    return _params(kafka, group, **{"isolation.level": "read_committed"})


@pytest.fixture
def allow_gaps(sc):
    sc._conf.set(ALLOW, "true")
    yield
    sc._conf.set(ALLOW, "false")


@pytest.fixture
def short_poll(sc):
    previous = sc.getConf().get(POLL_MS)
    sc._conf.set(POLL_MS, "1500")
    yield 1500
    sc._conf.set(POLL_MS, previous)


def _transactions(kafka: Any, topic: str, plan: list[tuple[str, list[str]]]) -> None:
    """Write each (commit|abort, values) transaction; every one ends with a marker offset."""
    producer = KafkaProducer(
        bootstrap_servers=kafka.bootstrap_servers, transactional_id=f"tx-{uuid.uuid4().hex}"
    )
    try:
        producer.init_transactions()
        for outcome, values in plan:
            producer.begin_transaction()
            for value in values:
                producer.send(topic, value=value.encode(), partition=0)
            producer.flush()
            producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    finally:
        producer.close()
    # The coordinator writes the last marker after the producer's call returns.
    end = sum(len(values) + 1 for _, values in plan)
    deadline = time.monotonic() + 30
    while kafka.end_offsets(topic) != {0: end}:
        assert time.monotonic() < deadline, f"the markers of {topic} never reached offset {end}"
        time.sleep(0.05)


@pytest.fixture
def tx_topic(kafka, unique):
    """Offsets: c0 c1 c2 | marker 3 | aborted 4 5 6 | marker 7 | d0 d1 | marker 10; end 11."""
    name = unique("tx")
    kafka.create_topic(name)
    _transactions(
        kafka,
        name,
        [("commit", ["c0", "c1", "c2"]), ("abort", ["a0", "a1", "a2"]), ("commit", ["d0", "d1"])],
    )
    return name


def _offsets_and_values(rdd: Any) -> list[tuple[int, str]]:
    return rdd.map(lambda r: (r.offset, r.value)).collect()


# -- transactional topics ------------------------------------------------------------------------


def test_read_committed_skips_aborted_records_and_transaction_markers(
    sc, kafka, tx_topic, unique, allow_gaps
):
    rdd = KafkaUtils.createRDD(
        sc, _committed(kafka, unique("g")), [OffsetRange(tx_topic, 0, 0, 11)]
    )
    assert _offsets_and_values(rdd) == [(0, "c0"), (1, "c1"), (2, "c2"), (8, "d0"), (9, "d1")]


def test_count_of_a_transactional_range_counts_records_not_offsets(
    sc, kafka, tx_topic, unique, allow_gaps
):
    rdd = KafkaUtils.createRDD(
        sc, _committed(kafka, unique("g")), [OffsetRange(tx_topic, 0, 0, 11)]
    )
    assert (rdd.count(), rdd.isEmpty(), len(rdd.take(10))) == (5, False, 5)


def test_read_uncommitted_returns_aborted_records_but_never_markers(
    sc, kafka, tx_topic, unique, allow_gaps
):
    rdd = KafkaUtils.createRDD(sc, _params(kafka, unique("g")), [OffsetRange(tx_topic, 0, 0, 11)])
    assert [o for o, _ in _offsets_and_values(rdd)] == [0, 1, 2, 4, 5, 6, 8, 9]


def test_range_ending_on_the_final_commit_marker_finishes_without_waiting(
    sc, kafka, tx_topic, unique, allow_gaps
):
    # Offset 10 is a marker and nothing follows it: Spark polls until its timeout and fails.
    rdd = KafkaUtils.createRDD(
        sc, _committed(kafka, unique("g")), [OffsetRange(tx_topic, 0, 8, 11)]
    )
    started = time.monotonic()
    assert _offsets_and_values(rdd) == [(8, "d0"), (9, "d1")]
    assert time.monotonic() - started < 8  # the poll timeout is 10 s


def test_range_ending_inside_aborted_records_at_the_log_end_finishes(sc, kafka, unique, allow_gaps):
    name = unique("txend")
    kafka.create_topic(name)
    _transactions(kafka, name, [("commit", ["c0", "c1"]), ("abort", ["a0", "a1"])])  # end 6
    params = _committed(kafka, unique("g"))
    started = time.monotonic()
    whole = KafkaUtils.createRDD(sc, params, [OffsetRange(name, 0, 0, 6)])
    gap_only = KafkaUtils.createRDD(sc, params, [OffsetRange(name, 0, 3, 6)])
    assert _offsets_and_values(whole) == [(0, "c0"), (1, "c1")]
    assert gap_only.collect() == []
    assert time.monotonic() - started < 10


def test_range_ending_before_the_next_visible_record_stops_at_its_end(
    sc, kafka, tx_topic, unique, allow_gaps
):
    rdd = KafkaUtils.createRDD(sc, _committed(kafka, unique("g")), [OffsetRange(tx_topic, 0, 2, 8)])
    assert _offsets_and_values(rdd) == [(2, "c2")]


def test_strict_mode_on_a_transactional_topic_fails_suggesting_allow_non_consecutive_offsets(
    sc, kafka, tx_topic, unique
):
    rdd = KafkaUtils.createRDD(
        sc, _committed(kafka, unique("g")), [OffsetRange(tx_topic, 0, 0, 11)]
    )
    with pytest.raises(Exception) as info:
        rdd.collect()
    text = str(info.value)
    assert "WrongOffsetError" in text and "Got wrong record for spark-executor-" in text
    assert "consider enabling spark.streaming.kafka.allowNonConsecutiveOffsets" in text


def test_strict_mode_reads_a_committed_range_without_gaps(sc, kafka, tx_topic, unique):
    rdd = KafkaUtils.createRDD(sc, _committed(kafka, unique("g")), [OffsetRange(tx_topic, 0, 0, 3)])
    assert [v for _, v in _offsets_and_values(rdd)] == ["c0", "c1", "c2"]


def test_strict_mode_fails_at_once_when_the_range_ends_on_a_marker(sc, kafka, tx_topic, unique):
    rdd = KafkaUtils.createRDD(
        sc, _committed(kafka, unique("g")), [OffsetRange(tx_topic, 0, 8, 11)]
    )
    started = time.monotonic()
    with pytest.raises(Exception, match="there is no record at that offset"):
        rdd.collect()
    assert time.monotonic() - started < 8


# -- compacted topics (KafkaRDDSuite "compacted topic") ------------------------------------------


@pytest.fixture
def compacted_topic(kafka, unique):
    """Spark's log: keys a a b c c b b with values 1 2 1 1 2 2 3, compacted to offsets 1, 4, 6."""
    name = unique("compact")
    kafka.create_topic(
        name,
        config={
            "cleanup.policy": "compact",
            "segment.ms": 100,
            "min.cleanable.dirty.ratio": 0.01,
            "delete.retention.ms": 100,
            "min.compaction.lag.ms": 0,
        },
    )
    kafka.produce(
        name, [("a", "1"), ("a", "2"), ("b", "1"), ("c", "1"), ("c", "2"), ("b", "2"), ("b", "3")]
    )
    time.sleep(0.3)
    kafka.produce(name, [("z", "roll")])  # rolls the segment so the cleaner can compact the first
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, enable_auto_commit=False)
    tp = TopicPartition(name, 0)
    consumer.assign([tp])
    deadline = time.monotonic() + 60
    try:
        while True:
            consumer.seek(tp, 0)
            offsets = []
            while True:
                batch = consumer.poll(timeout_ms=500).get(tp, [])
                if not batch:
                    break
                offsets.extend(r.offset for r in batch)
            if offsets[:3] == [1, 4, 6]:
                return name
            if time.monotonic() > deadline:
                pytest.fail(f"the log cleaner did not compact {name}: offsets {offsets}")
            time.sleep(0.5)
    finally:
        consumer.close()


def test_compacted_topic_yields_the_latest_value_per_key(
    sc, kafka, compacted_topic, unique, allow_gaps
):
    rdd = KafkaUtils.createRDD(
        sc, _params(kafka, unique("g")), [OffsetRange(compacted_topic, 0, 0, 7)]
    )
    assert sorted(rdd.map(lambda r: (r.key, r.value)).collect()) == [
        ("a", "2"),
        ("b", "3"),
        ("c", "2"),
    ]
    # Generic actions here (they run jobs); countApprox returns the final value once its job ends.
    assert (rdd.count(), rdd.countApprox(60000), rdd.isEmpty(), len(rdd.take(3))) == (
        3,
        3,
        False,
        3,
    )


def test_empty_range_of_a_compacted_topic_is_empty(sc, kafka, compacted_topic, unique, allow_gaps):
    rdd = KafkaUtils.createRDD(
        sc, _params(kafka, unique("g")), [OffsetRange(compacted_topic, 0, 0, 0)]
    )
    assert rdd.isEmpty() and rdd.collect() == []


def test_range_ending_inside_a_compaction_gap_stops_at_its_end(
    sc, kafka, compacted_topic, unique, allow_gaps
):
    rdd = KafkaUtils.createRDD(
        sc, _params(kafka, unique("g")), [OffsetRange(compacted_topic, 0, 0, 3)]
    )
    assert _offsets_and_values(rdd) == [(1, "2")]


def test_range_past_the_end_of_a_compacted_topic_is_refused_before_any_job(
    sc, kafka, compacted_topic, unique, allow_gaps, short_poll
):
    # Spark fails this range in the executor ("Failed to get records for compacted ..."); the
    # log end is known on the driver, so createRDD refuses it before any data moves.
    from dstream_kafka.errors import InvalidOffsetRangeError

    with pytest.raises(InvalidOffsetRangeError, match=r"ends past the end of the log .*: the log "
                                                      r"ends at 8 .*offsets \[8, 12\) do not exist"):
        KafkaUtils.createRDD(
            sc, _params(kafka, unique("g")), [OffsetRange(compacted_topic, 0, 0, 12)]
        )


def test_strict_mode_on_a_compacted_topic_fails_suggesting_allow_non_consecutive_offsets(
    sc, kafka, compacted_topic, unique
):
    rdd = KafkaUtils.createRDD(
        sc, _params(kafka, unique("g")), [OffsetRange(compacted_topic, 0, 0, 7)]
    )
    with pytest.raises(
        Exception,
        match="even after seeking to offset 0 got offset 1 instead. If this is a compacted topic",
    ):
        rdd.collect()
