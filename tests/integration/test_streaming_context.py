"""StreamingContext lifecycle: states, scheduling, input stream hooks, stops and SIGTERM."""

from __future__ import annotations

import collections
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime
from typing import Any

import pytest
from pyspark import RDD, SparkContext

from dstream_kafka.errors import ConfigurationError, OffsetStoreError, StreamingStateError
from dstream_kafka.streaming import InputDStream, StreamingContext, StreamingListener

from support import wait_until

BATCH = 0.1
TIMEOUT = 90.0


class RecordingSource(InputDStream[int]):
    """An input stream that logs every engine call into ``log`` (shared with outputs)."""

    def __init__(self, ssc: StreamingContext, log: list[tuple[str, int]]) -> None:
        super().__init__(ssc)
        self.log = log

    def start(self) -> None:
        self.log.append(("start", 0))

    def stop(self) -> None:
        self.log.append(("stop", 0))

    def compute(self, batch_time: int) -> RDD[int]:
        self.log.append(("compute", batch_time))
        return self._sc.parallelize([batch_time], 1)

    def on_batch_completed(self, batch_time: int, batch_info: Any) -> None:
        self.log.append(("completed", batch_time))

    def on_batch_failed(self, batch_time: int, error: BaseException) -> None:
        self.log.append(("failed", batch_time))


class Submitted(StreamingListener):
    def __init__(self) -> None:
        self.times: list[int] = []

    def onBatchSubmitted(self, batchSubmitted: Any) -> None:
        self.times.append(batchSubmitted.batchInfo().batch_time)


def times_of(log: list[tuple[str, int]], kind: str) -> list[int]:
    return [t for k, t in log if k == kind]


class TestConstruction:
    def test_batch_duration_accepts_fractions_of_a_second(self, sc: SparkContext) -> None:
        """Batch durations are seconds; fractions are kept to the millisecond."""
        ssc = StreamingContext(sc, 0.25)
        assert (ssc.batch_duration, ssc.graph.batch_ms) == (0.25, 250)
        assert ssc.sparkContext is sc and ssc.getState() == "INITIALIZED"

    @pytest.mark.parametrize("duration", [-1, 0.0001])
    def test_batch_duration_must_be_zero_or_at_least_a_millisecond(
            self, sc: SparkContext, duration: float) -> None:
        """A negative batch duration, or one that rounds to 0 ms, is refused (exactly 0 means
        no fixed interval: test_scheduler_zero_interval_stream)."""
        with pytest.raises(ConfigurationError, match="batchDuration"):
            StreamingContext(sc, duration)

    def test_streams_get_ids_in_creation_order(self, ssc: StreamingContext) -> None:
        """Every stream gets the next id; the graph lists inputs and outputs."""
        source = ssc.queueStream([[1]])
        mapped = source.map(str)
        mapped.foreachRDD(lambda rdd: None)
        assert (source.id, mapped.id) == (0, 1)
        assert ssc.graph.input_streams == [source]
        assert len(ssc.graph.output_streams) == 1


class TestStates:
    def test_start_without_output_operations_is_refused(self, ssc: StreamingContext) -> None:
        """A graph without output operations cannot start (Spark's message)."""
        ssc.queueStream([[1]]).map(str)
        with pytest.raises(StreamingStateError,
                           match="No output operations registered, so nothing to execute"):
            ssc.start()

    def test_adding_a_stream_after_start_is_refused(self, ssc: StreamingContext) -> None:
        """New streams cannot join a started context (Spark's message)."""
        stream = ssc.queueStream([[1]])
        stream.foreachRDD(lambda rdd: None)
        ssc.start()
        with pytest.raises(StreamingStateError, match="after starting a context is not "
                                                      "supported"):
            stream.map(str)

    def test_starting_a_stopped_context_is_refused(self, ssc: StreamingContext) -> None:
        """A stopped context cannot start again."""
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        ssc.start()
        ssc.stop(stopSparkContext=False)
        assert ssc.getState() == "STOPPED"
        with pytest.raises(StreamingStateError, match="has already been stopped"):
            ssc.start()

    def test_starting_an_active_context_again_only_warns(
            self, ssc: StreamingContext, caplog: pytest.LogCaptureFixture) -> None:
        """A second start of an active context logs a warning, as in Spark."""
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        ssc.start()
        with caplog.at_level(logging.WARNING):
            ssc.start()
        assert "has already been started" in caplog.text
        assert ssc.getState() == "ACTIVE"

    def test_only_one_context_can_be_active(self, ssc: StreamingContext,
                                            sc: SparkContext) -> None:
        """A second context cannot start while one is active."""
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        ssc.start()
        other = StreamingContext(sc, BATCH)
        other.queueStream([[1]]).foreachRDD(lambda rdd: None)
        with pytest.raises(StreamingStateError, match="Only one StreamingContext may be "
                                                      "started"):
            other.start()

    def test_get_active_returns_the_started_context_until_it_stops(
            self, ssc: StreamingContext) -> None:
        """getActive is the started context, and None again after stop."""
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        assert StreamingContext.getActive() is None
        ssc.start()
        assert StreamingContext.getActive() is ssc
        ssc.stop(stopSparkContext=False)
        assert StreamingContext.getActive() is None

    def test_get_active_or_create_prefers_the_active_context(
            self, ssc: StreamingContext) -> None:
        """getActiveOrCreate returns the active context without calling setupFunc."""
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        ssc.start()
        assert StreamingContext.getActiveOrCreate(None, lambda: pytest.fail("called")) is ssc

    def test_get_active_or_create_calls_setup_without_a_context(
            self, sc: SparkContext) -> None:
        """Without an active context and a path, setupFunc creates the context."""
        created = StreamingContext.getActiveOrCreate(None, lambda: StreamingContext(sc, BATCH))
        assert created.getState() == "INITIALIZED"
        with pytest.raises(TypeError, match="setupFunc should be callable"):
            StreamingContext.getActiveOrCreate(None, "not callable")  # type: ignore[arg-type]

    def test_stopping_before_start_moves_to_stopped(self, ssc: StreamingContext) -> None:
        """stop on a context that never started makes it STOPPED."""
        ssc.stop(stopSparkContext=False)
        assert ssc.getState() == "STOPPED"

    def test_remember_after_start_is_refused(self, ssc: StreamingContext) -> None:
        """The remember duration is fixed once the context runs."""
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        ssc.start()
        with pytest.raises(StreamingStateError):
            ssc.remember(1)


class TestScheduling:
    def test_batch_times_are_consecutive_multiples_of_the_interval(
            self, ssc: StreamingContext) -> None:
        """Batch times are multiples of the batch duration since the epoch."""
        times: list[datetime] = []
        ssc.queueStream([[1]]).foreachRDD(lambda t, rdd: times.append(t))
        ssc.start()
        wait_until(lambda: len(times) >= 3)
        ms = [int(round(t.timestamp() * 1000)) for t in times[:3]]
        assert all(m % 100 == 0 for m in ms) and [b - a for a, b in zip(ms, ms[1:])] == [100, 100]

    def test_input_stream_hooks_run_in_batch_order(self, ssc: StreamingContext) -> None:
        """start, then per batch compute before its outputs and the completion hook after
        them and before the next batch's outputs; stop at the end."""
        log: list[tuple[str, int]] = []
        source = RecordingSource(ssc, log)
        source.foreachRDD(lambda t, rdd: log.append(("output", rdd.first())))
        ssc.start()
        wait_until(lambda: len(times_of(log, "completed")) >= 3)
        ssc.stop(stopSparkContext=False)
        assert log[0] == ("start", 0) and log[-1] == ("stop", 0)
        first, second = times_of(log, "completed")[:2]
        assert log.index(("compute", first)) < log.index(("output", first)) \
            < log.index(("completed", first)) < log.index(("output", second))
        computed = times_of(log, "compute")
        assert computed == sorted(set(computed))  # once per batch, in order

    def test_queue_stream_can_take_every_queued_item_at_once(
            self, ssc: StreamingContext) -> None:
        """With oneAtATime=False the first batch holds all queued items."""
        batches: list[list[int]] = []
        ssc.queueStream([[1], [2, 3]], oneAtATime=False).foreachRDD(
            lambda rdd: batches.append(sorted(rdd.collect())))
        ssc.start()
        wait_until(lambda: len(batches) >= 2)
        assert batches[:2] == [[1, 2, 3], []]

    def test_queue_stream_uses_the_default_when_empty(self, ssc: StreamingContext) -> None:
        """An empty queue gives the default RDD."""
        batches: list[list[int]] = []
        ssc.queueStream([[1]], default=[0]).foreachRDD(lambda rdd: batches.append(rdd.collect()))
        ssc.start()
        wait_until(lambda: len(batches) >= 3)
        assert batches[:3] == [[1], [0], [0]]

    def test_queue_stream_takes_items_appended_while_running(
            self, ssc: StreamingContext) -> None:
        """A deque passed to queueStream is read live."""
        queue: collections.deque[list[int]] = collections.deque()
        seen: list[int] = []
        ssc.queueStream(queue).foreachRDD(lambda rdd: seen.extend(rdd.collect()))
        ssc.start()
        wait_until(lambda: len(ssc.completed_batches) >= 1)
        queue.append([42])
        wait_until(lambda: seen == [42])

    def test_remember_controls_how_long_rdds_stay_cached(self, ssc: StreamingContext) -> None:
        """RDDs older than the remember duration are dropped and unpersisted."""
        rdds: list[RDD[Any]] = []
        stream = ssc.queueStream([[1]] * 10).map(lambda x: x).cache()
        stream.foreachRDD(lambda rdd: (rdd.count(), rdds.append(rdd)))
        ssc.remember(0.3)
        ssc.start()
        wait_until(lambda: len(ssc.completed_batches) >= 8)
        last = ssc.completed_batches[-1].batch_time
        assert not rdds[0].getStorageLevel().useMemory
        assert rdds[-1].getStorageLevel().useMemory
        held = stream.slice(0, last / 1000)  # later batches may be generated already
        assert 1 <= len(held) <= 4


class TestFailures:
    def test_await_termination_reraises_the_error_of_a_failed_batch(
            self, ssc: StreamingContext) -> None:
        """A failing output operation stops the context; awaitTermination raises it."""
        log: list[tuple[str, int]] = []
        source = RecordingSource(ssc, log)

        def output(t: datetime, rdd: RDD[int]) -> None:
            log.append(("output", rdd.first()))
            if len(times_of(log, "output")) == 2:
                raise ValueError("boom")

        source.foreachRDD(output)
        source.foreachRDD(lambda rdd: log.append(("second-op", rdd.first())))
        ssc.start()
        with pytest.raises(ValueError, match="boom"):
            ssc.awaitTermination()
        assert ssc.getState() == "STOPPED"
        failed = times_of(log, "output")[1]
        assert times_of(log, "failed") == [failed]
        assert failed not in times_of(log, "completed")
        assert failed not in times_of(log, "second-op")
        assert times_of(log, "output") == times_of(log, "output")[:2]

    def test_await_termination_or_timeout_reports_whether_stopped(
            self, ssc: StreamingContext) -> None:
        """awaitTerminationOrTimeout is False while running and True once stopped."""
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        ssc.start()
        assert ssc.awaitTerminationOrTimeout(0.05) is False
        ssc.stop(stopSparkContext=False)
        assert ssc.awaitTerminationOrTimeout(0.05) is True
        assert ssc.awaitTermination(0.05) is None


class TestStop:
    def test_graceful_stop_finishes_every_queued_batch(self, ssc: StreamingContext) -> None:
        """A graceful stop processes and commits every batch generated before it."""
        log: list[tuple[str, int]] = []
        listener = Submitted()
        ssc.addStreamingListener(listener)
        ssc.graceful_stop_timeout = TIMEOUT
        RecordingSource(ssc, log).foreachRDD(lambda rdd: time.sleep(0.3))
        ssc.start()
        wait_until(lambda: len(listener.times) >= 3 and times_of(log, "completed"))
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
        assert times_of(log, "completed") == times_of(log, "compute") == listener.times
        assert len(listener.times) >= 3

    def test_graceful_stop_gives_up_after_its_timeout(self, ssc: StreamingContext) -> None:
        """Batches still queued when the graceful timeout ends are dropped, uncommitted."""
        log: list[tuple[str, int]] = []
        ssc.graceful_stop_timeout = 0.2
        RecordingSource(ssc, log).foreachRDD(lambda rdd: time.sleep(0.5))
        ssc.start()
        wait_until(lambda: len(times_of(log, "compute")) >= 4)
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
        completed = times_of(log, "completed")
        assert len(completed) < len(times_of(log, "compute"))
        assert completed == times_of(log, "compute")[:len(completed)]

    def test_non_graceful_stop_starts_no_further_output_operation(
            self, ssc: StreamingContext) -> None:
        """The running operation ends; the batch's next one never starts and nothing of
        that batch is committed."""
        log: list[tuple[str, int]] = []
        running, release = threading.Event(), threading.Event()

        def blocking(rdd: RDD[int]) -> None:
            log.append(("first-op", rdd.first()))
            running.set()
            release.wait(TIMEOUT)

        source = RecordingSource(ssc, log)
        source.foreachRDD(blocking)
        source.foreachRDD(lambda rdd: log.append(("second-op", rdd.first())))
        ssc.start()
        assert running.wait(TIMEOUT)
        stopper = threading.Thread(target=ssc.stop, args=(False, False))
        stopper.start()
        time.sleep(0.3)
        assert stopper.is_alive()  # waits for the running operation
        release.set()
        stopper.join(TIMEOUT)
        assert ssc.getState() == "STOPPED"
        assert times_of(log, "first-op") and not times_of(log, "second-op")
        assert not times_of(log, "completed")

    def test_stop_from_inside_an_output_operation_returns(self, ssc: StreamingContext) -> None:
        """stop called by an output operation runs in the background and completes."""
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: ssc.stop(stopSparkContext=False))
        ssc.start()
        assert ssc.awaitTerminationOrTimeout(TIMEOUT) is True


SIGTERM_PROGRAM = textwrap.dedent('''
    import json, sys, time
    from pyspark import SparkContext
    from dstream_kafka.spark_settings import local_spark_conf
    from dstream_kafka.streaming import InputDStream, StreamingContext, StreamingListener

    conf = local_spark_conf("local[1]", "sigterm-test",
                            extra={"spark.streaming.gracefulStopTimeout": "120s",
                                   "spark.streaming.stopGracefullyOnShutdown": "true"})
    sc = SparkContext(conf=conf)
    sc.setLogLevel("ERROR")
    sc.parallelize([0], 1).count()  # start the Python workers before the first batch
    ssc = StreamingContext(sc, 0.3)
    events = {"submitted": [], "completed": [], "committed": []}

    class Source(InputDStream):
        def compute(self, batch_time):
            return sc.parallelize([batch_time], 1)

        def on_batch_completed(self, batch_time, batch_info):
            events["committed"].append(batch_time)

    class Events(StreamingListener):
        def onBatchSubmitted(self, e):
            events["submitted"].append(e.batchInfo().batch_time)

        def onBatchCompleted(self, e):
            events["completed"].append(e.batchInfo().batch_time)

    def slow(rdd):
        rdd.count()
        time.sleep(0.6)  # slower than the interval: batches queue up
        print("PROCESSED", flush=True)

    Source(ssc).foreachRDD(slow)
    ssc.addStreamingListener(Events())
    ssc.start()
    ssc.awaitTermination()
    print("RESULT " + json.dumps(events), flush=True)
    sc.stop()
''')


def test_sigterm_stops_gracefully_and_finishes_queued_batches(tmp_path: Any) -> None:
    """SIGTERM makes a streaming program stop gracefully: every generated batch is
    processed and committed, then the program ends normally."""
    script = tmp_path / "program.py"
    script.write_text(SIGTERM_PROGRAM)
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, cwd=os.getcwd())
    try:
        assert process.stdout is not None
        processed = 0
        while processed < 2:
            line = process.stdout.readline()
            assert line, "the program ended before processing two batches"
            processed += line.strip() == "PROCESSED"
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=TIMEOUT)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0
    result = json.loads(next(line for line in output.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    assert len(result["submitted"]) > processed  # batches were queued at SIGTERM
    assert result["completed"] == result["submitted"] == result["committed"]


def test_a_streaming_checkpoint_under_a_regular_file_raises_a_clear_error(make_ssc, tmp_path):
    (tmp_path / "file").write_text("x")
    ssc = make_ssc()
    with pytest.raises(OffsetStoreError, match=r"(?s)file/checkpoint.*not a directory"):
        ssc.checkpoint(str(tmp_path / "file" / "checkpoint"))


def test_a_streaming_checkpoint_on_a_read_only_file_system_raises_a_clear_error(make_ssc, read_only):
    ssc = make_ssc()
    with pytest.raises(OffsetStoreError, match="read-only"):
        ssc.checkpoint(str(read_only / "checkpoint"))
