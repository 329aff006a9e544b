"""Spark's DirectKafkaStreamSuite scenarios, and ours, against the real broker."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetRange, TopicPartition
from dstream_kafka.errors import PartitionsRevokedError
from dstream_kafka.streaming import StreamingContext

from support import wait_until

BATCH = 0.5


def _params(kafka, group: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
            "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra}


class Collector:
    """Thread-safe per-batch collection of (ranges, per-partition counts, values)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.values: list[Any] = []
        self.batches: list[tuple[list[OffsetRange], list[int]]] = []

    def add(self, ranges: list[OffsetRange], sizes: list[int], values: list[Any]) -> None:
        with self.lock:
            self.batches.append((ranges, sizes))
            self.values.extend(values)

    def count(self) -> int:
        with self.lock:
            return len(self.values)


def _collect_with_ranges(stream, collector: Collector) -> None:
    def per_batch(rdd):
        ranges = rdd.offsetRanges()
        sizes = rdd.mapPartitions(lambda it: [sum(1 for _ in it)]).collect()
        values = rdd.map(lambda r: r.value.decode()).collect()
        collector.add(ranges, sizes, values)
        return rdd

    stream.transform(per_batch).foreachRDD(lambda rdd: None)


def test_multiple_topics_with_a_per_partition_starting_offset_are_read_completely(kafka, make_ssc, unique):
    topics = [unique(f"basic{i}") for i in (1, 2, 3)]
    for topic in topics:
        kafka.create_topic(topic)
        kafka.send_messages(topic, {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1, "f": 1, "g": 1, "h": 1,
                                    "i": 1, "j": 1, "k": 1, "l": 1, "m": 1, "n": 1, "o": 1, "p": 1})
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe(topics, _params(kafka, unique("g")),
                                     {TopicPartition(topics[2], 0): 2}))
    collector = Collector()
    _collect_with_ranges(stream, collector)
    context.start()
    wait_until(lambda: collector.count() >= 46, what="46 records")
    time.sleep(2 * BATCH)
    assert collector.count() == 46
    for ranges, sizes in collector.batches:
        assert [r.count() for r in ranges] == sizes  # partition i holds exactly range i


def test_pattern_subscription_reads_matching_topics_from_explicit_offsets(kafka, make_ssc, unique):
    prefix = unique("pat").replace("-", "")
    names = [f"{prefix}pat1", f"{prefix}pat2", f"{prefix}pat3", f"{prefix}advanced3"]
    for topic in names:
        kafka.create_topic(topic)
        kafka.send_messages(topic, {chr(ord("a") + i): 1 for i in range(16)})
    context = make_ssc(BATCH)
    offsets = {TopicPartition(names[1], 0): 3, TopicPartition(names[2], 0): 4}
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.SubscribePattern(prefix + r"pat\d", _params(kafka, unique("g")), offsets))
    collector = Collector()
    _collect_with_ranges(stream, collector)
    context.start()
    wait_until(lambda: collector.count() >= 41, what="41 records")
    time.sleep(2 * BATCH)
    assert collector.count() == 41
    assert {r.topic for ranges, _ in collector.batches for r in ranges} == set(names[:3])


def test_starting_at_latest_never_reads_records_sent_before_start(kafka, make_ssc, unique):
    topic = unique("latest")
    kafka.create_topic(topic)
    kafka.send_messages(topic, {"a": 5})
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka, unique("g"), **{"auto.offset.reset": "latest"})))
    collector = Collector()
    _collect_with_ranges(stream, collector)
    context.start()
    # "latest" is fixed when the partition is assigned; a slow group join on a loaded machine
    # must not let the b records arrive before it. A batch lists every assigned partition.
    wait_until(lambda: any(collector.batches[i][0] for i in range(len(collector.batches))),
              what="the partition's assignment")
    time.sleep(2 * BATCH)
    kafka.send_messages(topic, {"b": 10})
    wait_until(lambda: collector.count() >= 10, what="the b records")
    assert sorted(set(collector.values)) == ["b"]


def test_assign_with_explicit_offsets_starts_exactly_there(kafka, make_ssc, unique):
    topic = unique("assign")
    kafka.create_topic(topic)
    kafka.produce(topic, [f"v{i}" for i in range(20)])
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Assign([TopicPartition(topic, 0)],
                                  _params(kafka, unique("g"), **{"auto.offset.reset": "none"}),
                                  {TopicPartition(topic, 0): 11}))
    collector = Collector()
    _collect_with_ranges(stream, collector)
    context.start()
    wait_until(lambda: collector.count() >= 9, what="offsets 11..19")
    time.sleep(2 * BATCH)
    assert collector.values == [f"v{i}" for i in range(11, 20)]


def test_commit_async_after_output_lets_a_new_stream_resume_from_the_committed_offsets(kafka, make_ssc, unique):
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    topic, group = unique("commit"), unique("g")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(30)])
    results: list[tuple[dict, Any, str]] = []
    collector = Collector()

    def run_once() -> None:
        context = make_ssc(BATCH)
        stream = KafkaUtils.createDirectStream(
            context, LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([topic], _params(kafka, group)))

        def output(rdd):
            collector.add(rdd.offsetRanges(), [], rdd.map(lambda r: r.value.decode()).collect())
            stream.commitAsync(rdd.offsetRanges(), lambda offsets, err: results.append(
                (offsets, err, threading.current_thread().name)))

        stream.foreachRDD(output)
        context.start()
        return context

    first = run_once()
    wait_until(lambda: collector.count() >= 30 and results, what="first run to commit")
    first.stop(stopSparkContext=False, stopGraceFully=True)
    assert all(err is None for _, err, _ in results)
    # Callbacks run on the stream's own threads, never on the Kafka client's I/O thread.
    assert not any(thread.startswith("kafka-io") for _, _, thread in results)
    consumer = KafkaConsumer(bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    committed = {p: consumer.committed(KTP(topic, p)) for p in (0, 1)}
    consumer.close()
    assert sum(committed.values()) == 30

    kafka.produce(topic, [f"w{i}" for i in range(10)])
    second = run_once()
    wait_until(lambda: collector.count() >= 40, what="second run's records")
    time.sleep(2 * BATCH)
    second.stop(stopSparkContext=False, stopGraceFully=True)
    assert sorted(collector.values) == sorted([f"v{i}" for i in range(30)] + [f"w{i}" for i in range(10)])


def test_a_second_stream_in_the_same_group_fails_with_the_revoked_partitions_error(kafka, make_ssc, unique, sc):
    topic, group = unique("revoke"), unique("g")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(10)])
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka, group)))
    stream.foreachRDD(lambda rdd: None)
    context.start()
    time.sleep(2 * BATCH)
    # A second member joins the same group: Kafka moves a partition away from the stream.
    from kafka import KafkaConsumer

    intruder = KafkaConsumer(topic, bootstrap_servers=kafka.bootstrap_servers, group_id=group,
                             enable_auto_commit=False)
    try:
        deadline = time.monotonic() + 60
        while not intruder.assignment() and time.monotonic() < deadline:
            intruder.poll(timeout_ms=200)
        with pytest.raises(PartitionsRevokedError, match="same group id"):
            context.awaitTermination(timeout=60)
    finally:
        intruder.close()


class _Limits:
    """A PerPartitionConfig with fixed max/min rates (the session SparkConf cannot change)."""

    def __init__(self, max_rate: int, min_rate: int = 1) -> None:
        self.max_rate, self.min_rate = max_rate, min_rate

    def maxRatePerPartition(self, tp):  # noqa: N802 - Spark's name
        return self.max_rate

    def minRatePerPartition(self, tp):  # noqa: N802 - Spark's name
        return self.min_rate


def _limits(max_rate: int, min_rate: int = 1):
    from dstream_kafka import PerPartitionConfig

    class Limits(_Limits, PerPartitionConfig):
        pass

    return Limits(max_rate, min_rate)


def _batch_sizes(stream) -> list[int]:
    sizes: list[int] = []
    stream.foreachRDD(lambda rdd: sizes.append(sum(r.count() for r in rdd.offsetRanges())))
    return sizes


def test_a_listener_counts_every_input_record_when_batches_are_submitted_started_and_completed(
        kafka, make_ssc, unique):
    from dstream_kafka import StreamingListener

    topic = unique("listener")
    kafka.create_topic(topic)
    kafka.send_messages(topic, {chr(ord("a") + i): 1 for i in range(16)})

    class Counts(StreamingListener):
        def __init__(self) -> None:
            self.submitted = self.started = self.completed = 0

        def onBatchSubmitted(self, event):  # noqa: N802 - pyspark's name
            self.submitted += event.batchInfo().numRecords()

        def onBatchStarted(self, event):  # noqa: N802
            self.started += event.batchInfo().numRecords()

        def onBatchCompleted(self, event):  # noqa: N802
            self.completed += event.batchInfo().numRecords()

    context = make_ssc(BATCH)
    counts = Counts()
    context.addStreamingListener(counts)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka, unique("g"))))
    stream.foreachRDD(lambda rdd: rdd.count())
    context.start()
    wait_until(lambda: counts.completed >= 16, what="16 completed records")
    assert (counts.submitted, counts.started, counts.completed) == (16, 16, 16)


def test_batches_follow_the_rate_controllers_estimates(kafka, make_ssc, unique):
    from dstream_kafka.plan.backpressure import RateController

    topic = unique("pid")
    kafka.create_topic(topic)
    kafka.produce(topic, [f"v{i}" for i in range(5000)])

    class ConstantEstimator:
        def __init__(self) -> None:
            self.rate = 100.0

        def compute(self, time, elements, processing_delay, scheduling_delay):
            return self.rate

    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka, unique("g"))), _limits(100))
    estimator = ConstantEstimator()
    stream.rateController = RateController(stream.id, estimator)
    sizes = _batch_sizes(stream)
    context.start()
    for rate, expected in ((100.0, 50), (50.0, 25), (20.0, 10)):
        estimator.rate = rate
        wait_until(lambda: expected in sizes[-3:], what=f"a batch of {expected} at rate {rate}")


def test_the_first_batch_uses_the_initial_rate_capped_by_max_rate_per_partition(kafka, sc, unique):
    from dstream_kafka.plan.backpressure import PIDRateEstimator, RateController

    topic = unique("initial")
    kafka.create_topic(topic)
    kafka.produce(topic, [f"v{i}" for i in range(1000)])
    context = StreamingContext(sc, 0.5)
    try:
        stream = KafkaUtils.createDirectStream(
            context, LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([topic], _params(kafka, unique("g"))), _limits(1000))
        stream.rateController = RateController(stream.id, PIDRateEstimator(500))
        stream.initialRate = 500  # as spark.streaming.backpressure.initialRate=500
        sizes = _batch_sizes(stream)
        context.start()
        wait_until(lambda: any(sizes), what="the first non-empty batch")
        assert [s for s in sizes if s][0] == 250  # 500 records/s * 0.5 s, below maxRate 1000 * 0.5
    finally:
        context.stop(stopSparkContext=False)


def test_partitions_added_while_running_are_read_from_their_first_offset(kafka, make_ssc, unique):
    topic = unique("grow")
    kafka.create_topic(topic, partitions=1)
    kafka.produce(topic, [f"a{i}" for i in range(5)], partition=0)
    context = make_ssc(BATCH)
    params = _params(kafka, unique("g"), **{"metadata.max.age.ms": 500,
                                            "auto.offset.reset": "latest"})
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe([topic], params))
    collector = Collector()
    _collect_with_ranges(stream, collector)
    context.start()
    time.sleep(2 * BATCH)
    kafka.add_partitions(topic, 3)
    kafka.produce(topic, [f"b{i}" for i in range(6)], partition=1)
    kafka.produce(topic, [f"c{i}" for i in range(7)], partition=2)
    wait_until(lambda: collector.count() >= 13, timeout=90, what="records of the new partitions")
    assert sorted(collector.values) == sorted([f"b{i}" for i in range(6)] + [f"c{i}" for i in range(7)])
    first_ranges = {r.partition: r.fromOffset for ranges, _ in collector.batches for r in ranges
                    if r.partition in (1, 2) and r.count()}
    assert first_ranges == {1: 0, 2: 0}


def test_max_offsets_per_trigger_caps_every_batch(kafka, make_ssc, unique):
    topic = unique("trigger")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(200)])
    context = make_ssc(BATCH)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], _params(kafka, unique("g"))), maxOffsetsPerTrigger=30)
    sizes = _batch_sizes(stream)
    context.start()
    wait_until(lambda: sum(sizes) >= 200, timeout=90, what="all 200 records")
    assert max(sizes) <= 31  # Structured Streaming's proration may round one partition up
    assert sum(sizes) == 200


def test_a_graceful_stop_commits_everything_it_processed_and_a_restart_resumes_there(
        kafka, sc, unique, tmp_path):
    from dstream_kafka import OffsetStores

    topic, group = unique("graceful"), unique("g")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(100)])
    db = tmp_path / "offsets.db"
    seen: list[str] = []

    def run() -> StreamingContext:
        context = StreamingContext(sc, BATCH)
        stream = KafkaUtils.createDirectStream(
            context, LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([topic], _params(kafka, group)),
            offsetStore=OffsetStores.sqlite(db))

        def save(batch_time, rdd):
            values = rdd.map(lambda r: r.value.decode()).collect()
            time.sleep(0.3)  # a slow output: stop arrives while it runs
            seen.extend(values)

        stream.foreachRDD(save)
        context.start()
        return context

    first = run()
    wait_until(lambda: len(seen) >= 1, what="the first records")
    kafka.produce(topic, [f"w{i}" for i in range(50)])
    first.stop(stopSparkContext=False, stopGraceFully=True)
    stored = OffsetStores.sqlite(db).load(group, [topic])
    assert sum(stored.values()) == len(seen)  # everything processed is committed, nothing more

    second = run()
    wait_until(lambda: len(seen) >= 150, timeout=90, what="the rest after restart")
    time.sleep(2 * BATCH)
    second.stop(stopSparkContext=False, stopGraceFully=True)
    assert sorted(seen) == sorted([f"v{i}" for i in range(100)] + [f"w{i}" for i in range(50)])


def test_a_checkpointed_context_keeps_stream_offsets_in_its_folder_and_resumes_there(
        kafka, sc, unique, tmp_path):
    topic = unique("ckpt")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [f"v{i}" for i in range(40)])
    folder = str(tmp_path / "checkpoint")
    seen: list[str] = []
    params = _params(kafka, unique("g"))

    def setup() -> StreamingContext:
        context = StreamingContext(sc, BATCH)
        stream = KafkaUtils.createDirectStream(
            context, LocationStrategies.PreferConsistent, ConsumerStrategies.Subscribe([topic], params))
        stream.foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: r.value.decode()).collect()))
        context.checkpoint(folder)
        return context

    first = StreamingContext.getOrCreate(folder, setup)
    first.start()
    wait_until(lambda: len(seen) >= 40, what="the first 40 records")
    first.stop(stopSparkContext=False, stopGraceFully=True)
    kafka.produce(topic, [f"w{i}" for i in range(10)])
    second = StreamingContext.getOrCreate(folder, setup)
    second.start()
    wait_until(lambda: len(seen) >= 50, what="the 10 new records")
    time.sleep(2 * BATCH)
    second.stop(stopSparkContext=False, stopGraceFully=True)
    assert sorted(seen) == sorted([f"v{i}" for i in range(40)] + [f"w{i}" for i in range(10)])
