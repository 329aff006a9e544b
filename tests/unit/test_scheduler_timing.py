"""Batch-time arithmetic and the batch loop, without Spark."""

from __future__ import annotations

import math
import threading
import time
from datetime import datetime
from typing import Any

import pytest

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.streaming.listener import BatchInfo, ListenerBus, StreamingListener, Time
from dstream_kafka.streaming.clock import (
    datetime_to_ms,
    due_batch_times,
    first_batch_time,
    graceful_stop_timeout_ms,
    is_valid_time,
    ms_to_datetime,
    parse_duration_ms,
    seconds_to_ms,
    slice_times,
)
from dstream_kafka.streaming.scheduler import JobScheduler, OutputJob


class TestBatchTimes:
    def test_first_batch_is_the_next_multiple_of_the_interval(self) -> None:
        """The first batch time is the next multiple of the interval after now."""
        assert first_batch_time(1_234, 500) == 1_500

    def test_a_now_on_a_multiple_moves_to_the_next_one(self) -> None:
        """A now that is itself a multiple gives the following multiple (RecurringTimer)."""
        assert first_batch_time(1_500, 500) == 2_000

    def test_due_times_include_every_missed_interval_in_order(self) -> None:
        """A late loop generates every missed batch time, oldest first, never skipping."""
        assert due_batch_times(1_000, 2_250, 500) == [1_000, 1_500, 2_000]

    def test_nothing_is_due_before_the_next_time(self) -> None:
        """No batch time is due before it is reached."""
        assert due_batch_times(1_000, 999, 500) == []

    def test_valid_times_are_whole_slides_after_zero(self) -> None:
        """A stream produces RDDs only at whole slides after the zero time."""
        assert is_valid_time(1_400, 1_000, 200)
        assert not is_valid_time(1_300, 1_000, 200)
        assert not is_valid_time(1_000, 1_000, 200)

    def test_slice_times_are_aligned_to_the_slide(self) -> None:
        """Slicing returns the valid times inside the closed interval."""
        assert slice_times(1_050, 1_600, 1_000, 200) == [1_200, 1_400, 1_600]

    def test_slice_times_never_reach_the_zero_time(self) -> None:
        """Slicing never returns the zero time or earlier."""
        assert slice_times(0, 1_400, 1_000, 200) == [1_200, 1_400]

    def test_empty_slice_for_a_reversed_interval(self) -> None:
        """An interval that ends before it starts holds no times."""
        assert slice_times(2_000, 1_000, 0, 100) == []


class TestDurations:
    @pytest.mark.parametrize(("seconds", "ms"), [(0.5, 500), (0.1, 100), (1.001, 1001),
                                                 (2, 2000), (0.0015, 2)])
    def test_seconds_are_rounded_to_whole_milliseconds(self, seconds: float, ms: int) -> None:
        """Durations in seconds round to the nearest millisecond."""
        assert seconds_to_ms(seconds) == ms

    @pytest.mark.parametrize("bad", [0, -1, 0.0004, math.nan, math.inf, True, "1"])
    def test_invalid_durations_are_refused(self, bad: Any) -> None:
        """Non-positive, non-finite and non-numeric durations raise ConfigurationError."""
        with pytest.raises(ConfigurationError):
            seconds_to_ms(bad, "batchDuration")

    @pytest.mark.parametrize(("text", "ms"), [("5000", 5000), ("250ms", 250), ("10s", 10_000),
                                              ("2min", 120_000), (1500, 1500)])
    def test_spark_duration_strings_are_parsed(self, text: Any, ms: int) -> None:
        """Spark-style durations parse; a bare number is milliseconds."""
        assert parse_duration_ms(text) == ms

    def test_unparsable_duration_is_refused(self) -> None:
        """A duration with an unknown unit raises ConfigurationError."""
        with pytest.raises(ConfigurationError):
            parse_duration_ms("ten seconds")

    def test_graceful_stop_waits_ten_batches_by_default(self) -> None:
        """Without spark.streaming.gracefulStopTimeout the wait is 10 batch intervals."""
        assert graceful_stop_timeout_ms(None, 200) == 2_000
        assert graceful_stop_timeout_ms("30s", 200) == 30_000


class TestTimeValues:
    def test_batch_times_round_trip_through_datetime(self) -> None:
        """ms -> local datetime -> ms is the identity (PySpark passes local datetimes)."""
        assert datetime_to_ms(ms_to_datetime(1_700_000_000_250)) == 1_700_000_000_250

    def test_epoch_seconds_convert_to_ms(self) -> None:
        """A number given to slice is epoch seconds."""
        assert datetime_to_ms(12.5) == 12_500

    def test_time_is_an_int_with_spark_accessors(self) -> None:
        """Time behaves as int milliseconds and has milliseconds() and to_datetime()."""
        t = Time(1_500)
        assert t == 1_500 and t.milliseconds() == 1_500 and str(t) == "1500 ms"
        assert t.to_datetime() == datetime.fromtimestamp(1.5)


class TestBatchInfo:
    def test_unknown_values_are_minus_one_like_pyspark(self) -> None:
        """Before processing, delays read -1 through the camelCase accessors."""
        info = BatchInfo(1_000, {}, submission_time=1_010)
        assert (info.schedulingDelay(), info.processingDelay(), info.totalDelay()) == (-1, -1, -1)
        assert info.processingStartTime() == -1 and info.numRecords() == 0

    def test_delays_follow_spark_definitions(self) -> None:
        """Scheduling = start - submission; processing = end - start; total = sum."""
        info = BatchInfo(1_000, {}, submission_time=1_010, processing_start_time=1_110,
                         processing_end_time=1_410)
        assert (info.schedulingDelay(), info.processingDelay(), info.totalDelay()) == (
            100, 300, 400)
        assert info.to_dict()["totalDelay"] == 400


class _Recorder(StreamingListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, int]] = []
        self.infos: list[BatchInfo] = []

    def onBatchSubmitted(self, batchSubmitted: Any) -> None:
        self.events.append(("submitted", batchSubmitted.batchInfo().batch_time))

    def onBatchStarted(self, batchStarted: Any) -> None:
        self.events.append(("started", batchStarted.batchInfo().batch_time))

    def onBatchCompleted(self, batchCompleted: Any) -> None:
        self.events.append(("completed", batchCompleted.batchInfo().batch_time))
        self.infos.append(batchCompleted.batchInfo())


class _Loop:
    """A JobScheduler with one output job per batch that sleeps ``job_seconds``."""

    def __init__(self, batch_ms: int = 20, job_seconds: float = 0.0,
                 released: bool = True) -> None:
        self.bus = ListenerBus()
        self.listener = _Recorder()
        self.bus.add(self.listener)
        self.bus.start()
        self.ran: list[int] = []
        self.completed: list[int] = []
        self.release = threading.Event()
        if released:
            self.release.set()
        self.job_seconds = job_seconds
        self.scheduler = JobScheduler(batch_ms, self.generate, self.complete,
                                      lambda t, e: None, lambda e: None, self.bus,
                                      graceful_timeout_ms=10_000)
        self.scheduler.start(first_batch_time(int(time.time() * 1000), batch_ms))

    def generate(self, t: int) -> tuple[list[OutputJob], dict[int, Any]]:
        return [OutputJob(0, "job", "test", lambda: self.run(t))], {}

    def run(self, t: int) -> None:
        self.release.wait()
        time.sleep(self.job_seconds)
        self.ran.append(t)

    def complete(self, t: int, info: BatchInfo) -> None:
        self.completed.append(t)

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.005)

    def stop(self, graceful: bool) -> None:
        self.release.set()
        self.scheduler.stop(graceful)
        self.bus.stop()


class TestJobScheduler:
    def test_batches_run_at_consecutive_aligned_times(self) -> None:
        """Batch times are consecutive multiples of the interval."""
        loop = _Loop(batch_ms=20)
        loop.wait_for(lambda: len(loop.completed) >= 4)
        loop.stop(graceful=False)
        times = loop.completed[:4]
        assert all(t % 20 == 0 for t in times)
        assert [b - a for a, b in zip(times, times[1:])] == [20, 20, 20]

    def test_slow_batches_queue_and_scheduling_delay_grows(self) -> None:
        """A batch slower than the interval delays later ones, which are never skipped."""
        loop = _Loop(batch_ms=20, job_seconds=0.06)
        loop.wait_for(lambda: len(loop.listener.infos) >= 4)
        loop.stop(graceful=False)
        infos = loop.listener.infos[:4]
        delays = [info.schedulingDelay() for info in infos]
        # the growth over the run, not each step: a loaded machine can delay any one batch
        assert delays[-1] >= delays[0] + 60, delays
        times = [info.batch_time for info in infos]
        assert [b - a for a, b in zip(times, times[1:])] == [20, 20, 20]

    def test_a_loop_planning_slower_than_the_interval_hands_each_batch_over_at_once(self) -> None:
        """Behind schedule, each batch goes to the job thread as soon as it is generated: its
        job never waits for the whole backlog to be planned."""
        order: list[tuple[str, int]] = []

        class SlowPlanning(_Loop):
            def generate(self, t: int) -> tuple[list[OutputJob], dict[int, Any]]:
                time.sleep(0.05)  # planning takes longer than the 20 ms interval
                order.append(("planned", t))
                return super().generate(t)

            def run(self, t: int) -> None:
                order.append(("ran", t))

        loop = SlowPlanning(batch_ms=20)
        loop.wait_for(lambda: len(loop.completed) >= 6)
        loop.stop(graceful=False)
        planned = [t for kind, t in order if kind == "planned"]
        for t in loop.completed[:6]:
            ran_at = order.index(("ran", t))
            planned_since = [u for kind, u in order[:ran_at] if kind == "planned" and u > t]
            assert len(planned_since) <= 2, (t, planned, order[:ran_at + 1])

    def test_events_of_a_batch_come_in_order(self) -> None:
        """Each batch is submitted, then started, then completed."""
        loop = _Loop(batch_ms=20)
        loop.wait_for(lambda: len(loop.completed) >= 2)
        loop.stop(graceful=False)
        first = loop.completed[0]
        kinds = [kind for kind, t in loop.listener.events if t == first]
        assert kinds == ["submitted", "started", "completed"]

    def test_graceful_stop_finishes_every_generated_batch(self) -> None:
        """A graceful stop processes and completes all queued batches."""
        loop = _Loop(batch_ms=10)
        loop.release.clear()
        loop.wait_for(lambda: sum(k == "submitted" for k, _ in loop.listener.events) >= 4)
        loop.release.set()
        loop.scheduler.stop(graceful=True)
        loop.bus.stop()
        submitted = [t for kind, t in loop.listener.events if kind == "submitted"]
        assert loop.completed == submitted

    def test_non_graceful_stop_drops_queued_batches(self) -> None:
        """A non-graceful stop completes nothing that had not finished, including the batch
        whose output operation returns after the stop came."""
        # Held from the start: a batch finishing before the hold would let a second one run.
        loop = _Loop(batch_ms=10, released=False)
        loop.wait_for(lambda: sum(k == "submitted" for k, _ in loop.listener.events) >= 4)
        stopper = threading.Thread(target=loop.scheduler.stop, args=(False,))
        stopper.start()
        loop.wait_for(lambda: loop.scheduler.stop_requested)
        loop.release.set()  # the running job ends; nothing else may start
        stopper.join(10)
        loop.bus.stop()
        assert len(loop.ran) == 1
        assert loop.completed == []
