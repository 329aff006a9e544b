"""Issue #30 part 1: ``StreamingContext(sc, 0)``, batches back to back with no fixed interval,
against the real broker and Spark: an idle stream runs no Spark job and checks for data at the
polling delay; records are read exactly once and committed in order, also with two batches
in flight; what needs an interval is refused."""

from __future__ import annotations

import time
from typing import Any

import pytest

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, OffsetStores
from dstream_kafka.errors import ConfigurationError

from stream_runs import Run, params, values
from support import wait_until


def _jobs(sc: Any) -> set[int]:
    """Every Spark job the status tracker knows (none of ours sets a job group)."""
    return set(sc.statusTracker().getJobIdsForGroup(None))


def _start(make_ssc: Any, kafka: Any, topic: str, group: str, **stream_args: Any) -> Run:
    context = make_ssc(0)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], params(kafka, group)), **stream_args)
    run = Run(context, stream)
    context.start()
    return run


def test_an_idle_stream_of_batch_duration_zero_submits_no_spark_job_and_polls_at_the_delay(
        kafka, make_ssc, unique, sc, spark_conf):
    spark_conf("spark.streaming.pollingDelay", "20ms")
    topic = unique("idle")
    kafka.create_topic(topic, partitions=2)
    run = _start(make_ssc, kafka, topic, unique("g"))
    kafka.produce(topic, values("a", 4))
    assert run.wait_for(4) == values("a", 4)
    scheduler = run.context._scheduler
    # the batch that read them has completed, and the loop is back to checking for data
    wait_until(lambda: scheduler.empty_polls >= 1 and not sc.statusTracker().getActiveJobsIds(),
               "the stream to go idle")
    jobs, batches, polls = _jobs(sc), run.batches, scheduler.empty_polls
    assert jobs  # the tracker sees the jobs of the batch that read the records
    started = run.context.sparkContext._jvm.System.nanoTime()
    wait_until(lambda: scheduler.empty_polls >= polls + 30, "30 empty checks for data")
    elapsed_ms = (run.context.sparkContext._jvm.System.nanoTime() - started) / 1e6
    assert _jobs(sc) == jobs and run.batches == batches
    assert elapsed_ms >= 28 * 20  # at most one check per polling delay: no spin
    kafka.produce(topic, ["late"])
    assert run.wait_for(5) == sorted(values("a", 4) + ["late"])
    # the input rate is over the time since the previous batch, there being no interval
    wait_until(lambda: len(run.stream.recentProgress) >= 2, "the progress of both batches")
    assert run.stream.recentProgress[-1].inputRate > 0


def test_two_concurrent_jobs_of_batch_duration_zero_read_each_record_once_and_commit_in_order(
        kafka, make_ssc, unique, tmp_path, spark_conf):
    spark_conf("spark.streaming.concurrentJobs", "2")
    topic, group = unique("pipelined"), unique("g")
    kafka.create_topic(topic, partitions=2)
    store = OffsetStores.sqlite(str(tmp_path / "offsets.db"))
    run = _start(make_ssc, kafka, topic, group, offsetStore=store,
                 options={"startingOffsets": "earliest"})
    for chunk in range(6):  # while batches run
        kafka.produce(topic, values(f"c{chunk}-", 20))
    expected = sorted(v for chunk in range(6) for v in values(f"c{chunk}-", 20))
    assert run.wait_for(120) == expected
    wait_until(lambda: sum(store.load(group).values()) == 120, "every offset committed")
    run.context.stop(stopSparkContext=False, stopGraceFully=True)
    assert sorted(run.read()) == expected  # nothing read twice
    times = [record.batch_time_ms for record in reversed(store.history(group, limit=100))]
    assert times == sorted(times) and len(set(times)) == len(times)


def test_batch_duration_zero_refuses_a_window_operation_at_start(make_ssc):
    context = make_ssc(0)
    context.queueStream([[1]]).window(1.0).pprint()
    with pytest.raises(ConfigurationError, match="fixed batch interval"):
        context.start()


def test_batch_duration_zero_refuses_a_source_that_cannot_tell_when_data_arrives(make_ssc, tmp_path):
    context = make_ssc(0)
    context.textFileStream(str(tmp_path)).pprint()
    with pytest.raises(ConfigurationError, match="cannot tell when new data arrives"):
        context.start()


def test_batch_duration_zero_refuses_backpressure_when_the_stream_is_created(
        kafka, make_ssc, unique, spark_conf):
    spark_conf("spark.streaming.backpressure.enabled", "true")
    with pytest.raises(ConfigurationError, match="maxOffsetsPerTrigger"):
        KafkaUtils.createDirectStream(
            make_ssc(0), LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([unique("t")], params(kafka, unique("g"))))


def test_a_queue_stream_of_batch_duration_zero_runs_one_batch_per_queued_item(make_ssc):
    context = make_ssc(0)
    batches: list[list[int]] = []
    context.queueStream([[1, 2], [3]]).foreachRDD(lambda rdd: batches.append(rdd.collect()))
    context.start()
    wait_until(lambda: len(batches) >= 2, "both queued items")
    wait_until(lambda: context._scheduler.empty_polls >= 5, "the queue to be checked again")
    assert batches == [[1, 2], [3]]


def test_an_idle_zero_interval_stream_checks_for_data_without_waiting_for_a_metadata_refresh(
        kafka, make_ssc, unique, spark_conf):
    spark_conf("spark.streaming.pollingDelay", "10ms")
    topic = unique("quick")
    kafka.create_topic(topic, partitions=2)
    run = _start(make_ssc, kafka, topic, unique("g"))
    scheduler = run.context._scheduler
    wait_until(lambda: scheduler.empty_polls >= 5, "the first checks")
    polls, started = scheduler.empty_polls, time.monotonic()
    wait_until(lambda: scheduler.empty_polls >= polls + 50, "50 more checks")
    # a check that refreshed the metadata waited kafka-python's 100 ms metadata backoff
    assert time.monotonic() - started < 4.0


def test_a_partition_added_to_a_zero_interval_streams_topic_is_read(kafka, make_ssc, unique):
    topic = unique("grow")
    kafka.create_topic(topic, partitions=1)
    run = _start(make_ssc, kafka, topic, unique("g"))
    kafka.produce(topic, ["p0"], partition=0)
    run.wait_for(1)
    kafka.add_partitions(topic, 2)
    kafka.produce(topic, ["p1"], partition=1)
    assert run.wait_for(2) == ["p0", "p1"]


def test_a_checkpointed_zero_interval_stream_resumes_after_a_restart_where_it_stopped(
        kafka, sc, contexts, unique, tmp_path):
    from dstream_kafka.streaming import StreamingContext

    topic, group, folder = unique("resume"), unique("g"), str(tmp_path / "checkpoint")
    kafka.create_topic(topic, partitions=2)
    runs: list[Run] = []

    def setup() -> StreamingContext:
        context = StreamingContext(sc, 0)
        contexts.append(context)
        stream = KafkaUtils.createDirectStream(
            context, LocationStrategies.PreferConsistent,
            ConsumerStrategies.Subscribe([topic], params(kafka, group)),
            options={"startingOffsets": "earliest"})
        runs.append(Run(context, stream))
        return context

    kafka.produce(topic, values("a", 6))
    StreamingContext.getOrCreate(folder, setup).start()
    assert runs[0].wait_for(6) == values("a", 6)
    runs[0].context.stop(stopSparkContext=False, stopGraceFully=True)
    kafka.produce(topic, values("b", 4))
    StreamingContext.getOrCreate(folder, setup).start()
    assert runs[1].wait_for(4) == values("b", 4)  # nothing of the first run again


@pytest.mark.parametrize("interval", [0, 0.2])
def test_a_non_graceful_stop_during_a_batchs_output_commits_nothing_of_it_with_or_without_interval(
        kafka, make_ssc, unique, tmp_path, interval):
    import threading

    topic, group = unique("abort"), unique("g")
    kafka.create_topic(topic)
    kafka.produce(topic, values("a", 5))
    store = OffsetStores.sqlite(str(tmp_path / "o.db"))
    context = make_ssc(interval)
    stream = KafkaUtils.createDirectStream(
        context, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], params(kafka, group, **{"auto.offset.reset": "earliest"})),
        offsetStore=store)
    # Spark's non-graceful stop sends no commit queue; both kinds of context commit nothing.
    running, release = threading.Event(), threading.Event()

    def output(rdd: Any) -> None:
        if rdd.count():
            running.set()
            release.wait(60)

    stream.foreachRDD(output)
    context.start()
    assert running.wait(60), "no batch with records"
    stopper = threading.Thread(target=context.stop, args=(False, False))
    stopper.start()
    wait_until(lambda: context._scheduler.stop_requested, "the stop to begin")
    release.set()  # the output returns after the stop came: the batch is not finished
    stopper.join(60)
    assert context.getState() == "STOPPED"
    assert OffsetStores.sqlite(str(tmp_path / "o.db")).load(group, [topic]) == {}
    assert not stream.recentProgress  # the batch was not completed either
