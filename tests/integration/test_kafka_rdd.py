"""Spark's KafkaRDDSuite scenarios, and ours, with createRDD against the real broker."""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from typing import Any, Callable

import pytest

from dstream_kafka.errors import (
    ConfigurationError,
    DataLossError,
    InvalidOffsetRangeError,
    UnknownTopicPartitionError,
)
from dstream_kafka.read.kafka_rdd import KafkaRDD, read_settings
from dstream_kafka.read.task import read_range
from dstream_kafka.read.placement import preferred_locations_for
from dstream_kafka.client.kafka_params import fix_kafka_params
from dstream_kafka.kafka_utils import KafkaUtils
from dstream_kafka.offsets import HasOffsetRanges, OffsetRange, TopicPartition
from dstream_kafka.read.placement import (
    ExecutorLocation,
    LocationStrategies,
    preferred_location,
    sort_executors,
)
from dstream_kafka.record import ConsumerRecord

from support import STRING_DESERIALIZER, string_params

POLL_MS = "spark.streaming.kafka.consumer.poll.ms"
BACKEND = "spark.streaming.kafka.consumer.backend"

# Every test runs once per executor consumer backend.
pytestmark = pytest.mark.usefixtures("backend")


def _jobs_during(sc: Any, action: Callable[[], Any]) -> tuple[Any, list[int]]:
    """Run ``action`` under a fresh job group; return its result and the jobs it started."""
    group = uuid.uuid4().hex
    sc.setJobGroup(group, "probe")
    try:
        result = action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return result, sorted(sc.statusTracker().getJobIdsForGroup(group))


@pytest.fixture
def topic(kafka, unique):
    name = unique("rdd")
    kafka.create_topic(name)
    return name


@pytest.fixture
def short_poll(sc):
    """Lower the executor poll timeout for tests that expect a timeout."""
    previous = sc.getConf().get(POLL_MS)
    sc._conf.set(POLL_MS, "1500")
    yield 1500
    sc._conf.set(POLL_MS, previous)


# -- KafkaRDDSuite: basic usage -----------------------------------------------------------------


@pytest.mark.smoke
def test_create_rdd_returns_exactly_the_records_of_the_range(sc, kafka, topic, unique):
    kafka.produce(topic, "the quick brown fox".split())
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 4)])
    assert rdd.map(lambda r: r.value).collect() == ["the", "quick", "brown", "fox"]


def test_count_count_approx_and_is_empty_run_no_job(sc, kafka, topic, unique):
    kafka.produce(topic, "the quick brown fox".split())
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 4)])
    answers, jobs = _jobs_during(sc, lambda: (rdd.count(), rdd.countApprox(0), rdd.isEmpty()))
    assert answers == (4, 4, False)
    assert jobs == []


def test_take_reads_only_as_many_records_as_asked(sc, kafka, topic, unique):
    kafka.produce(topic, "the quick brown fox".split())
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 4)])
    assert [r.value for r in rdd.take(1)] == ["the"]
    assert len(rdd.take(14)) == 4
    assert rdd.take(0) == []


def test_take_runs_one_job_on_only_the_partitions_it_needs(sc, kafka, unique):
    name = unique("take")
    kafka.create_topic(name, partitions=3)
    for p in range(3):
        kafka.produce(name, [f"p{p}-{i}" for i in range(5)], partition=p)
    ranges = [
        OffsetRange(name, 0, 0, 0),
        OffsetRange(name, 1, 0, 5),
        OffsetRange(name, 2, 0, 5),
        OffsetRange(name, 0, 0, 5),
    ]
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), ranges)
    records, jobs = _jobs_during(sc, lambda: rdd.take(7))
    assert [r.value for r in records] == [f"p1-{i}" for i in range(5)] + ["p2-0", "p2-1"]
    assert len(jobs) == 1
    stage = sc.statusTracker().getJobInfo(jobs[0]).stageIds[0]
    assert sc.statusTracker().getStageInfo(stage).numTasks == 2


def test_empty_range_gives_an_empty_partition(sc, kafka, topic, unique):
    kafka.produce(topic, ["a", "b"])
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 0)])
    assert rdd.isEmpty() and rdd.count() == 0
    assert rdd.glom().collect() == [[]]


def test_empty_range_acquires_no_consumer(kafka, topic, unique):
    from dstream_kafka.read import consumer_cache

    executor = fix_kafka_params(string_params(kafka, unique("g")))
    before = consumer_cache.stats()
    records = list(read_range((0, topic, 0, 3, 3), executor, read_settings({}, executor)))
    after = consumer_cache.stats()
    assert records == []
    assert (after["hits"] + after["misses"]) == (before["hits"] + before["misses"])


def test_reads_use_the_backend_selected_on_the_driver(sc, kafka, topic, unique, backend):
    from dstream_kafka.read import consumer_cache

    kafka.produce(topic, ["a", "b", "c"])
    executor = fix_kafka_params(string_params(kafka, unique("g")))
    settings = read_settings(sc, executor)
    assert settings.backend == backend
    records = list(read_range((0, topic, 0, 0, 3), executor, settings))
    assert [r.value for r in records] == ["a", "b", "c"]
    cached = consumer_cache.cached_consumer(
        consumer_cache.CacheKey(executor["group_id"], topic, 0)
    )
    assert cached is not None and cached.backend == backend
    consumer_cache.clear()


def test_reading_past_the_end_of_the_log_fails_with_a_fetch_timeout(
    sc, kafka, topic, unique, short_poll
):
    kafka.produce(topic, "the quick brown fox".split())
    group = unique("g")
    # KafkaRDD.create skips the driver's checks (createRDD refuses a range past the log end)
    rdd = KafkaRDD.create(sc, string_params(kafka, group), [OffsetRange(topic, 0, 0, 5)])
    with pytest.raises(Exception) as info:
        rdd.collect()
    assert "FetchTimeoutError" in str(info.value)
    assert (
        f"Failed to get records for spark-executor-{group} {topic}-0 4 after polling for 1500"
        in str(info.value)
    )


# -- KafkaRDDSuite: iterator boundary conditions --------------------------------------------------


def test_iterator_boundary_conditions(sc, kafka, topic, unique):
    params = string_params(kafka, unique("g"))
    kafka.produce(topic, [f"m{i}" for i in range(18)])
    first = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 18)])
    assert first.map(lambda r: r.offset).collect() == list(range(18))

    empty = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 18, 18)])
    kafka.produce(topic, ["one more"])
    assert empty.count() == 0 and empty.collect() == []

    one = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 18, 19)])
    kafka.produce(topic, [f"later{i}" for i in range(22)])
    assert one.map(lambda r: (r.offset, r.value)).collect() == [(18, "one more")]


# -- records, ranges, transformations --------------------------------------------------------------


def test_records_carry_topic_partition_offset_timestamp_key_value_and_headers(
    sc, kafka, topic, unique
):
    kafka.produce(topic, [("k1", "v1")], headers=[("h", b"x")])
    params = string_params(kafka, unique("g"), **{"key.deserializer": STRING_DESERIALIZER})
    [record] = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)]).collect()
    assert isinstance(record, ConsumerRecord)
    assert (record.topic, record.partition, record.offset, record.key, record.value) == (
        topic,
        0,
        0,
        "k1",
        "v1",
    )
    assert record.headers == (("h", b"x"),)
    assert record.timestampType == 0 and abs(record.timestamp / 1000 - time.time()) < 600


def test_partition_i_reads_offset_range_i(sc, kafka, unique):
    name = unique("parts")
    kafka.create_topic(name, partitions=2)
    kafka.produce(name, ["a0", "a1", "a2"], partition=0)
    kafka.produce(name, ["b0", "b1"], partition=1)
    ranges = [OffsetRange(name, 1, 0, 2), OffsetRange(name, 0, 1, 3), OffsetRange(name, 0, 0, 1)]
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), ranges)
    assert isinstance(rdd, HasOffsetRanges) and rdd.offsetRanges() == ranges
    assert rdd.glom().map(lambda rs: [r.value for r in rs]).collect() == [
        ["b0", "b1"],
        ["a1", "a2"],
        ["a0"],
    ]


def test_rdds_over_the_same_partitions_share_one_jvm_source_and_read_their_own_offsets(
    sc, kafka, unique
):
    name = unique("reuse")
    kafka.create_topic(name, partitions=2)
    kafka.produce(name, ["a0", "a1", "a2", "a3"], partition=0)
    kafka.produce(name, ["b0", "b1", "b2", "b3"], partition=1)
    params = fix_kafka_params(string_params(kafka, unique("g")))
    first = KafkaRDD.create(sc, params, [OffsetRange(name, 0, 0, 2), OffsetRange(name, 1, 0, 1)])
    second = KafkaRDD.create(sc, params, [OffsetRange(name, 0, 2, 4), OffsetRange(name, 1, 1, 4)])
    swapped = KafkaRDD.create(sc, params, [OffsetRange(name, 1, 0, 1), OffsetRange(name, 0, 0, 1)])
    source_id = first._source_jrdd.id()
    assert second._source_jrdd.id() == source_id and swapped._source_jrdd.id() != source_id
    assert first.glom().map(lambda rs: [r.value for r in rs]).collect() == [["a0", "a1"], ["b0"]]
    assert second.glom().map(lambda rs: [r.value for r in rs]).collect() == [
        ["a2", "a3"],
        ["b1", "b2", "b3"],
    ]
    assert swapped.glom().map(lambda rs: [r.value for r in rs]).collect() == [["b0"], ["a0"]]


def test_create_rdd_clones_the_offset_ranges(sc, kafka, topic, unique):
    kafka.produce(topic, ["a", "b"])
    ranges = [OffsetRange(topic, 0, 0, 2)]
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), ranges)
    ranges.append(OffsetRange(topic, 0, 0, 1))
    returned = rdd.offsetRanges()
    returned.clear()
    assert rdd.offsetRanges() == [OffsetRange(topic, 0, 0, 2)] and rdd.getNumPartitions() == 1


def test_transformations_return_plain_rdds_over_the_records(sc, kafka, topic, unique):
    kafka.produce(topic, [str(i) for i in range(10)])
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 10)])
    evens = rdd.map(lambda r: int(r.value)).filter(lambda v: v % 2 == 0)
    assert not isinstance(evens, KafkaRDD)
    assert evens.collect() == [0, 2, 4, 6, 8]
    assert evens.count() == 5  # a real job, not the offset arithmetic


def test_persisted_kafka_rdd_is_read_from_the_cache(sc, kafka, topic, unique):
    kafka.produce(topic, ["a", "b", "c"])
    rdd = KafkaUtils.createRDD(
        sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 3)]
    ).cache()
    try:
        assert rdd.map(lambda r: r.value).collect() == ["a", "b", "c"]
        assert rdd.map(lambda r: r.offset).collect() == [0, 1, 2]
        assert rdd.getStorageLevel().useMemory
    finally:
        rdd.unpersist()


def test_two_kafka_rdds_union_and_join(sc, kafka, topic, unique):
    kafka.produce(topic, [("a", "1"), ("b", "2"), ("a", "3")])
    params = string_params(kafka, unique("g"), **{"key.deserializer": STRING_DESERIALIZER})
    left = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 2)])
    right = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 2, 3)])
    union = left.union(right).map(lambda r: (r.key, int(r.value))).reduceByKey(lambda x, y: x + y)
    assert sorted(union.collect()) == [("a", 4), ("b", 2)]


def test_concurrent_jobs_on_the_same_partition_read_correctly(sc, kafka, topic, unique):
    kafka.produce(topic, [str(i) for i in range(200)])
    single = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 200)])
    # Two tasks per job on the same range: a union, since createRDD refuses overlapping ranges.
    rdd = single.union(single)
    results: list[Any] = []

    def run() -> None:
        results.append(rdd.map(lambda r: int(r.value)).sum())

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [2 * sum(range(200))] * 3


# -- placement ---------------------------------------------------------------------------------


@pytest.mark.smoke
def test_prefer_consistent_locations_are_real_spark_preferred_locations(sc, kafka, unique):
    name = unique("place")
    kafka.create_topic(name, partitions=2)
    rdd = KafkaUtils.createRDD(
        sc, string_params(kafka, unique("g")), [OffsetRange(name, 0, 0, 0), OffsetRange(name, 1, 0, 0)]
    )
    host = sc.getConf().get("spark.driver.host")
    expected = f"executor_{host}_driver"  # local mode: the driver is the only executor
    assert [rdd.preferredLocations(i) for i in range(2)] == [[expected], [expected]]
    # What the DAG scheduler uses for the Python RDD's tasks.
    scheduler_view = sc._jsc.sc().getPreferredLocs(rdd._jrdd.rdd(), 1)
    assert scheduler_view.apply(0).toString() == expected


def test_placement_follows_spark_hashing_over_sorted_executors(sc, kafka, unique):
    name = unique("hash")
    kafka.create_topic(name, partitions=4)
    executors = [
        ExecutorLocation("a", "3"),
        ExecutorLocation("b", "1"),
        ExecutorLocation("a", "4"),
        ExecutorLocation("b", "2"),
    ]
    ranges = [OffsetRange(name, p, 0, 0) for p in range(4)]
    params = fix_kafka_params(string_params(kafka, unique("g")))
    locations = preferred_locations_for(sc, ranges, {}, executors)
    rdd = KafkaRDD(sc, params, ranges, locations, read_settings(sc, params))
    ordered = sort_executors(executors)
    assert [str(e) for e in ordered] == [
        "executor_b_2",
        "executor_b_1",
        "executor_a_4",
        "executor_a_3",
    ]
    for p in range(4):
        index = TopicPartition(name, p).javaHash() % 4
        assert rdd.preferredLocations(p) == [str(ordered[index])]


def test_prefer_fixed_prefers_the_host_and_falls_back_to_all_executors(sc, kafka, unique):
    name = unique("fixed")
    kafka.create_topic(name, partitions=2)
    executors = [
        ExecutorLocation("h1", "1"),
        ExecutorLocation("h2", "2"),
        ExecutorLocation("h2", "3"),
    ]
    strategy = LocationStrategies.PreferFixed(
        {TopicPartition(name, 0): "h1", TopicPartition(name, 1): "nowhere"}
    )
    hosts = {TopicPartition(name, 0): "h1", TopicPartition(name, 1): "nowhere"}
    ranges = [OffsetRange(name, 0, 0, 0), OffsetRange(name, 1, 0, 0)]
    locations = preferred_locations_for(sc, ranges, hosts, executors)
    assert locations[0] == "executor_h1_1"
    assert locations[1] == preferred_location(TopicPartition(name, 1), executors)
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), ranges, strategy)
    assert rdd.preferredLocations(0) == [f"executor_{sc.getConf().get('spark.driver.host')}_driver"]


# -- bad input: a clear error before any job ---------------------------------------------------


def test_prefer_brokers_is_rejected_with_sparks_explanation(sc, kafka, topic, unique):
    with pytest.raises(
        ConfigurationError, match="A single KafkaRDD does not have a driver consumer"
    ):
        KafkaUtils.createRDD(
            sc,
            string_params(kafka, unique("g")),
            [OffsetRange(topic, 0, 0, 1)],
            LocationStrategies.PreferBrokers,
        )


def test_unknown_topic_is_rejected_before_any_job(sc, kafka, unique):
    missing = unique("missing")
    _, jobs = _jobs_during(
        sc,
        lambda: pytest.raises(
            UnknownTopicPartitionError,
            KafkaUtils.createRDD,
            sc,
            string_params(kafka, unique("g")),
            [OffsetRange(missing, 0, 0, 1)],
        ),
    )
    assert jobs == []


def test_unknown_partition_is_rejected_naming_the_existing_ones(sc, kafka, topic, unique):
    with pytest.raises(
        UnknownTopicPartitionError,
        match=f"Partition 3 of topic '{topic}' does not exist: the topic has partitions 0..0",
    ):
        KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [OffsetRange(topic, 3, 0, 1)])


def test_from_offset_after_until_offset_is_rejected_with_sparks_text():
    with pytest.raises(
        InvalidOffsetRangeError, match="Beginning offset 5 is after the ending offset 3"
    ):
        OffsetRange("t", 0, 5, 3)


def test_ranges_that_are_not_offset_ranges_are_rejected(sc, kafka, topic, unique):
    with pytest.raises(ConfigurationError, match="offsetRanges must hold OffsetRange objects"):
        KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [(topic, 0, 0, 1)])


def test_range_starting_below_the_log_start_is_data_loss_before_any_job(sc, kafka, topic, unique):
    kafka.produce(topic, [str(i) for i in range(10)])
    kafka.delete_records(topic, {0: 6})
    with pytest.raises(
        DataLossError, match=r"earliest offset still in Kafka \(6\).*records \[2, 6\) were removed"
    ):
        KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 2, 10)])


def test_non_serializable_deserializer_is_rejected_before_any_job(sc, kafka, topic, unique):
    lock = threading.Lock()
    params = string_params(kafka, unique("g"), **{"value.deserializer": lambda b: (lock, b)})
    with pytest.raises(
        ConfigurationError, match="value.deserializer cannot be serialized for executors"
    ):
        KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)])


def test_create_rdd_translates_the_kafka_params_once_on_the_driver(
    sc, kafka, topic, unique, monkeypatch
):
    from dstream_kafka.client import kafka_params

    translations = []
    translate = kafka_params.consumer_config
    monkeypatch.setattr(kafka_params, "consumer_config",
                        lambda params: translations.append(params) or translate(params))
    kafka.produce(topic, ["x"])
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 0, 1)])
    assert len(translations) == 1
    assert rdd.map(lambda r: r.value).collect() == ["x"]


def test_contradicting_params_are_overridden_with_a_warning_and_still_read(
    sc, kafka, topic, unique, caplog
):
    kafka.produce(topic, ["x"])
    params = string_params(
        kafka, unique("g"), **{"enable.auto.commit": "true", "auto.offset.reset": "earliest"}
    )
    with caplog.at_level(logging.INFO, logger="dstream_kafka.client.kafka_params"):
        rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 1)])
    levels = {r.getMessage().split(" (")[0]: r.levelname for r in caplog.records}
    assert levels["overriding enable.auto.commit to false for executor"] == "WARNING"
    assert levels["overriding auto.offset.reset to none for executor"] == "INFO"  # expected
    assert rdd.map(lambda r: r.value).collect() == ["x"]


def test_missing_bootstrap_servers_is_rejected(sc, topic):
    with pytest.raises(ConfigurationError, match="kafkaParams must set bootstrap.servers"):
        KafkaUtils.createRDD(sc, {"group.id": "g"}, [OffsetRange(topic, 0, 0, 1)])


def test_secrets_never_appear_in_errors(sc, kafka, unique):
    params = string_params(kafka, unique("g"), **{"sasl_plain_password": "s3cr3t-pw", "bogus.setting": 1})
    with pytest.raises(ConfigurationError) as info:
        KafkaUtils.createRDD(sc, params, [OffsetRange("t", 0, 0, 1)])
    assert "s3cr3t-pw" not in str(info.value)


def test_many_partitions_drain_in_one_job(sc, kafka, unique):
    name = unique("many")
    kafka.create_topic(name, partitions=6)
    for p in range(6):
        kafka.produce(name, [f"{p}:{i}" for i in range(50)], partition=p)
    ranges = [OffsetRange(name, p, 10, 50) for p in range(6)]
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), ranges)
    values = rdd.map(lambda r: r.value).collect()
    assert values == list(
        itertools.chain.from_iterable([f"{p}:{i}" for i in range(10, 50)] for p in range(6))
    )


def test_no_ranges_give_an_rdd_without_partitions(sc, kafka, unique):
    rdd = KafkaUtils.createRDD(sc, string_params(kafka, unique("g")), [])
    assert (rdd.getNumPartitions(), rdd.count(), rdd.take(5), rdd.collect()) == (0, 0, [], [])


def test_stream_batches_are_built_without_validation_and_honour_the_cache_flag(
    sc, kafka, topic, unique
):
    kafka.produce(topic, ["a", "b", "c"])
    rdd = KafkaRDD.create(
        sc, string_params(kafka, unique("g")), [OffsetRange(topic, 0, 1, 3)], use_consumer_cache=False
    )
    assert rdd.readSettings.useCache is False and rdd.readSettings.groupId.startswith(
        "spark-executor-"
    )
    assert rdd.readSettings.backend == sc.getConf().get(BACKEND)
    assert rdd.map(lambda r: r.value).collect() == ["b", "c"]
