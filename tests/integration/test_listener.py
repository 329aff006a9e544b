"""StreamingListener events and BatchInfo progress records on the real local Spark."""

from __future__ import annotations

import json
import time
from collections import deque
from typing import Any

import pytest
from pyspark import RDD, SparkContext

from dstream_kafka.streaming import BatchInfo, InputDStream, StreamingContext, StreamingListener

from support import wait_until

TIMEOUT = 90.0


class Collector(StreamingListener):
    """Records every event as (callback, batch time, output operation id or None)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, int | None]] = []
        self.started: list[int] = []
        self.submitted: list[BatchInfo] = []
        self.batch_started: list[BatchInfo] = []
        self.completed: list[BatchInfo] = []
        self.ops_completed: list[Any] = []

    def onStreamingStarted(self, streamingStarted: Any) -> None:
        self.started.append(streamingStarted.time)

    def onBatchSubmitted(self, batchSubmitted: Any) -> None:
        info = batchSubmitted.batchInfo()
        self.submitted.append(info)
        self.events.append(("onBatchSubmitted", info.batchTime().milliseconds(), None))

    def onBatchStarted(self, batchStarted: Any) -> None:
        info = batchStarted.batchInfo()
        self.batch_started.append(info)
        self.events.append(("onBatchStarted", info.batchTime().milliseconds(), None))

    def onBatchCompleted(self, batchCompleted: Any) -> None:
        info = batchCompleted.batchInfo()
        self.completed.append(info)
        self.events.append(("onBatchCompleted", info.batchTime().milliseconds(), None))

    def onOutputOperationStarted(self, outputOperationStarted: Any) -> None:
        op = outputOperationStarted.outputOperationInfo()
        self.events.append(("onOutputOperationStarted", op.batchTime().milliseconds(), op.id()))

    def onOutputOperationCompleted(self, outputOperationCompleted: Any) -> None:
        op = outputOperationCompleted.outputOperationInfo()
        self.ops_completed.append(op)
        self.events.append(("onOutputOperationCompleted", op.batchTime().milliseconds(),
                            op.id()))


class SizedSource(InputDStream[int]):
    """Emits one queued list per batch and reports its size, as a Kafka stream would."""

    def __init__(self, ssc: StreamingContext, batches: list[list[int]]) -> None:
        super().__init__(ssc)
        self.batches = deque(batches)

    def compute(self, batch_time: int) -> RDD[int]:
        data = self.batches.popleft() if self.batches else []
        self.report_input_info(batch_time, len(data), {"Description": f"{len(data)} records"})
        return self._sc.parallelize(data, 1)


class TestEvents:
    def test_events_of_a_batch_arrive_in_order(self, ssc: StreamingContext) -> None:
        """Submitted, started, each output operation started and completed, completed."""
        collector = Collector()
        ssc.addStreamingListener(collector)
        stream = ssc.queueStream([[1]])
        stream.foreachRDD(lambda rdd: rdd.count())
        stream.foreachRDD(lambda rdd: None)
        ssc.start()
        wait_until(lambda: len(collector.completed) >= 1)
        first = collector.completed[0].batch_time
        assert [(name, op) for name, t, op in collector.events if t == first] == [
            ("onBatchSubmitted", None), ("onBatchStarted", None),
            ("onOutputOperationStarted", 0), ("onOutputOperationCompleted", 0),
            ("onOutputOperationStarted", 1), ("onOutputOperationCompleted", 1),
            ("onBatchCompleted", None)]

    def test_streaming_started_is_reported_once(self, ssc: StreamingContext) -> None:
        """onStreamingStarted is called once with the start time in ms."""
        collector = Collector()
        ssc.addStreamingListener(collector)
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        before = int(time.time() * 1000)
        ssc.start()
        wait_until(lambda: len(collector.completed) >= 2)
        assert len(collector.started) == 1 and collector.started[0] >= before

    def test_a_failing_listener_does_not_stop_streaming(self, ssc: StreamingContext) -> None:
        """An exception in a listener is logged; batches and other listeners go on."""
        class Broken(StreamingListener):
            def onBatchCompleted(self, batchCompleted: Any) -> None:
                raise RuntimeError("listener bug")

        collector = Collector()
        ssc.addStreamingListener(Broken())
        ssc.addStreamingListener(collector)
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        ssc.start()
        wait_until(lambda: len(collector.completed) >= 3)
        assert ssc.getState() == "ACTIVE"

    def test_a_removed_listener_gets_no_more_events(self, ssc: StreamingContext) -> None:
        """removeStreamingListener stops delivery to that listener."""
        kept, removed = Collector(), Collector()
        ssc.addStreamingListener(kept)
        ssc.addStreamingListener(removed)
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        ssc.start()
        wait_until(lambda: len(removed.completed) >= 1)
        ssc.removeStreamingListener(removed)
        count = len(removed.completed)
        wait_until(lambda: len(kept.completed) >= count + 3)
        assert len(removed.completed) <= count + 1


class TestBatchInfo:
    def test_batch_infos_report_delays_like_pyspark(self, ssc: StreamingContext) -> None:
        """Delays are -1 until known, then non-negative; queueStream reports no records."""
        collector = Collector()
        ssc.addStreamingListener(collector)
        ssc.queueStream([[1], [2]]).foreachRDD(lambda rdd: rdd.count())
        ssc.start()
        wait_until(lambda: len(collector.completed) >= 2)
        for info in collector.submitted[:2]:
            assert info.submissionTime() >= info.batchTime().milliseconds() > 0
            assert (info.schedulingDelay(), info.processingDelay(), info.totalDelay()) == (
                -1, -1, -1)
        for info in collector.batch_started[:2]:
            assert info.schedulingDelay() >= 0 and info.processingDelay() == -1
        for info in collector.completed[:2]:
            assert info.schedulingDelay() >= 0 and info.processingDelay() >= 0
            assert info.totalDelay() == info.schedulingDelay() + info.processingDelay()
            assert info.numRecords() == 0 and dict(info.streamIdToInputInfo()) == {}
            op = info.outputOperationInfos()[0]
            assert op.startTime() >= info.processingStartTime()
            assert op.endTime() <= info.processingEndTime()
            assert op.failureReason() is None

    def test_num_records_come_from_the_input_streams(self, ssc: StreamingContext) -> None:
        """numRecords sums what input streams reported; each stream's info is kept."""
        collector = Collector()
        ssc.addStreamingListener(collector)
        source = SizedSource(ssc, [[1, 2, 3], [4]])
        source.foreachRDD(lambda rdd: None)
        ssc.start()
        wait_until(lambda: len(collector.completed) >= 2)
        assert [i.numRecords() for i in collector.submitted[:2]] == [3, 1]
        assert [i.numRecords() for i in collector.completed[:2]] == [3, 1]
        info = collector.completed[0].streamIdToInputInfo()[source.id]
        assert (info.inputStreamId(), info.numRecords(), info.metadataDescription()) == (
            source.id, 3, "3 records")

    def test_output_operations_are_named_with_their_call_site(
            self, ssc: StreamingContext) -> None:
        """Output operation names are the API names; descriptions point at the caller."""
        collector = Collector()
        ssc.addStreamingListener(collector)
        stream = ssc.queueStream([[1]])
        stream.foreachRDD(lambda rdd: None)
        stream.pprint()
        ssc.start()
        wait_until(lambda: len(collector.completed) >= 1)
        ops = collector.completed[0].outputOperationInfos()
        assert [ops[0].name(), ops[1].name()] == ["foreachRDD", "pprint"]
        assert "test_listener.py" in ops[1].description()

    def test_a_failed_output_operation_carries_the_failure(
            self, ssc: StreamingContext) -> None:
        """The failing operation's info holds the formatted exception."""
        collector = Collector()
        ssc.addStreamingListener(collector)

        def fail(rdd: Any) -> None:
            raise ValueError("boom")

        ssc.queueStream([[1]]).foreachRDD(fail)
        ssc.start()
        with pytest.raises(ValueError, match="boom"):
            ssc.awaitTerminationOrTimeout(TIMEOUT)
        # A queue stream's failure is raised as soon as it is reported (Spark's rule), before
        # the listener bus has necessarily delivered the batch's completion: wait for it.
        wait_until(lambda: collector.ops_completed and collector.completed, "the batch's events")
        assert "ValueError: boom" in collector.ops_completed[0].failureReason()
        assert collector.completed[0].outputOperationInfos()[0].failureReason() is not None

    def test_slow_batches_make_the_scheduling_delay_grow(self, sc: SparkContext) -> None:
        """Batches slower than the interval queue up: no batch time is skipped and the
        scheduling delay grows."""
        ssc = StreamingContext(sc, 0.2)
        collector = Collector()
        ssc.addStreamingListener(collector)
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: time.sleep(0.5))
        try:
            ssc.start()
            wait_until(lambda: len(collector.completed) >= 4)
        finally:
            ssc.stop(stopSparkContext=False)
        infos = collector.completed[:4]
        times = [i.batchTime().milliseconds() for i in infos]
        assert [b - a for a, b in zip(times, times[1:])] == [200, 200, 200]
        delays = [i.schedulingDelay() for i in infos]
        # the growth over the run, not each step: a loaded machine can delay any one batch
        assert delays[-1] > delays[0] + 150 * (len(delays) - 1), delays

    def test_progress_records_are_json_and_kept_by_the_context(
            self, ssc: StreamingContext) -> None:
        """BatchInfo.to_dict is JSON-able; the context keeps recent completed batches."""
        ssc.queueStream([[1]]).foreachRDD(lambda rdd: None)
        ssc.start()
        wait_until(lambda: len(ssc.completed_batches) >= 2)
        record = json.loads(json.dumps(ssc.completed_batches[0].to_dict()))
        assert record["numRecords"] == 0 and record["processingDelay"] >= 0
        assert record["outputOperationInfos"]["0"]["name"] == "foreachRDD"
