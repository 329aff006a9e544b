"""Issue #13 item 2: bounded runs (Trigger.AvailableNow) against the real broker.

An ending option makes a direct stream read up to the end offsets resolved at its start, in
batches that keep the rate limits, commit them, and stop its context gracefully by itself.
"""

from __future__ import annotations

import time
from typing import Any

from dstream_kafka import ConsumerStrategies, OffsetStores
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.plan.rate import PerPartitionConfig

from stream_runs import Run, params, start_run, values

AWAIT_S = 60.0


class FixedRate(PerPartitionConfig):
    """maxRatePerPartition for every partition, as spark.streaming.kafka.maxRatePerPartition."""

    def __init__(self, rate: int) -> None:
        self.rate = rate

    def maxRatePerPartition(self, tp: Any) -> int:
        return self.rate


def bounded(make_ssc: Any, kafka: Any, topic: str, group: str, store: Any,
            ending: dict[str, str] | None = None, **stream_args: Any) -> Run:
    """Start a bounded run of ``topic`` from its first offset, to ``ending`` (default latest)."""
    strategy = ConsumerStrategies.Subscribe([topic], params(kafka, group))
    options = {"startingOffsets": "earliest", **(ending or {"endingOffsets": "latest"})}
    return start_run(make_ssc, strategy, offsetStore=store, options=options, **stream_args)


def finished(run: Run) -> bool:
    started = time.monotonic()
    run.context.awaitTermination(AWAIT_S)
    return run.context.getState() == "STOPPED" and time.monotonic() - started < AWAIT_S


def test_a_bounded_run_reads_what_was_there_at_its_start_in_rate_limited_batches_and_stops(
        kafka, make_ssc, unique, tmp_path):
    topic, group, db = unique("bounded"), unique("g"), str(tmp_path / "o.db")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, values("a", 20), partition=0)
    kafka.produce(topic, values("b", 20), partition=1)
    run = bounded(make_ssc, kafka, topic, group, OffsetStores.sqlite(db), perPartitionConfig=FixedRate(20))
    run.wait_batches(1)
    kafka.produce(topic, values("late", 10), partition=0)
    assert finished(run)
    assert sorted(run.read()) == values("a", 20) + values("b", 20)
    assert max(r.count() for r in run.ranges) <= 4  # 20 records/s * 0.2 s per partition
    assert OffsetStores.sqlite(db).load(group, [topic]) == {TopicPartition(topic, 0): 20,
                                                           TopicPartition(topic, 1): 20}
    second = bounded(make_ssc, kafka, topic, group, OffsetStores.sqlite(db))
    assert finished(second)
    assert sorted(second.read()) == values("late", 10)


def test_a_bounded_run_keeps_max_offsets_per_trigger(kafka, make_ssc, unique, tmp_path):
    topic = unique("bounded")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, values("v", 60))
    run = bounded(make_ssc, kafka, topic, unique("g"), OffsetStores.sqlite(str(tmp_path / "o.db")),
                  maxOffsetsPerTrigger=15)
    assert finished(run)
    assert len(run.read()) == 60 and run.batches >= 4


def test_ending_offsets_json_ends_each_partition_where_it_says(kafka, make_ssc, unique, tmp_path):
    topic = unique("bounded")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, values("a", 10), partition=0)
    kafka.produce(topic, values("b", 10), partition=1)
    run = bounded(make_ssc, kafka, topic, unique("g"), OffsetStores.sqlite(str(tmp_path / "o.db")),
                  ending={"endingOffsets": f'{{"{topic}":{{"0":3,"1":-1}}}}'})
    assert finished(run)
    assert sorted(run.read()) == values("a", 3) + values("b", 10)


def test_an_ending_timestamp_ends_before_the_first_record_at_or_after_it(
        kafka, make_ssc, unique, tmp_path):
    topic = unique("bounded")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, values("old", 5))
    time.sleep(0.05)
    stamp = int(time.time() * 1000)
    kafka.produce(topic, values("new", 5))
    run = bounded(make_ssc, kafka, topic, unique("g"), OffsetStores.sqlite(str(tmp_path / "o.db")),
                  ending={"endingTimestamp": str(stamp)})
    assert finished(run)
    assert sorted(run.read()) == values("old", 5)


def test_a_bounded_run_with_nothing_to_read_stops_after_its_first_batch(
        kafka, make_ssc, unique, tmp_path):
    topic = unique("bounded")
    kafka.create_topic(topic, partitions=1)
    run = bounded(make_ssc, kafka, topic, unique("g"), OffsetStores.sqlite(str(tmp_path / "o.db")))
    assert finished(run)
    assert run.read() == []
