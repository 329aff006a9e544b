"""The output registry of dstream_kafka.streaming.outputs: outputs that register themselves hear a
stream's events without the planner or the engine naming them."""

from __future__ import annotations

from typing import Any

import pytest

from dstream_kafka.offsets import OffsetRange
from dstream_kafka.plan.progress import BatchProgress, ProgressTracker
from dstream_kafka.streaming.outputs import (ContextOutput, DataLoss, StreamOutput, StreamRun,
                                             context_outputs, register_context_output,
                                             register_stream_output)

# Only a run or a context whose conf holds this key gets the test outputs: the registry is
# process-wide, and every other test's streams must not meet them.
MARKER = "spark.test.outputs.marker"


class Recorder(StreamOutput):
    def __init__(self, run: StreamRun) -> None:
        self.run = run
        self.events: list[tuple[str, Any]] = []

    def onProgress(self, progress: Any) -> None:
        self.events.append(("progress", progress.batchId))

    def onLagMonitor(self, monitor: Any) -> None:
        self.events.append(("lag", monitor))

    def onDataLoss(self, loss: DataLoss) -> None:
        self.events.append(("loss", loss))

    def close(self) -> None:
        self.events.append(("close", None))


class Broken(StreamOutput):
    def onProgress(self, progress: Any) -> None:
        raise RuntimeError("a broken output")


made: list[Recorder] = []


def _recorder(run: StreamRun) -> StreamOutput | None:
    if run.conf.get(MARKER) != "record":
        return None
    made.append(Recorder(run))
    return made[-1]


def _broken(run: StreamRun) -> StreamOutput | None:
    return Broken() if run.conf.get(MARKER) == "record" else None


register_stream_output(_broken)  # before the recorder: its failure must not reach it
register_stream_output(_recorder)


class _Monitor:
    latest = None  # no sample yet: the progress has no lag

    def on_progress(self, progress: BatchProgress) -> None:
        pass


def test_a_registered_output_hears_progress_lag_timer_data_loss_and_stop_in_order() -> None:
    tracker = ProgressTracker()
    tracker.start({MARKER: "record"}, "stream [3]", "g/3", 3, group="g")
    output = made[-1]
    assert (output.run.label, output.run.stream, output.run.description) == (
        tracker.label, 3, "stream [3]")
    monitor = _Monitor()
    tracker.watch_lag(monitor)
    tracker.notify(tracker.record(1000, [OffsetRange("t", 0, 0, 5)], {}, 1.0, 10, 0, 1.0, 1.0))
    tracker.data_loss("t", 0, 5, 9)
    tracker.stop()
    assert output.events == [("lag", monitor), ("progress", 0),
                             ("loss", DataLoss(tracker.label, "t", 0, 5, 9)), ("close", None)]


def test_an_output_that_raises_stops_neither_the_others_nor_the_users_listeners(
        caplog: pytest.LogCaptureFixture) -> None:
    tracker = ProgressTracker()
    heard: list[int] = []
    tracker.add_listener(lambda p: heard.append(p.batchId))
    tracker.start({MARKER: "record"}, "d", "g/0", 0)
    tracker.notify(tracker.record(1000, [], {}, 1.0, 10, 0, 1.0, 1.0))
    assert made[-1].events == [("progress", 0)] and heard == [0]
    assert "a broken output" in caplog.text
    tracker.stop()


def test_a_run_whose_conf_asks_for_no_output_gets_none() -> None:
    tracker = ProgressTracker()
    tracker.start({}, "d", "g/0", 0)
    assert tracker._outputs == []


class _Served(ContextOutput):
    def job_description_setter(self) -> Any:
        return print


def _served(sc: Any, batch_ms: int, conf: Any) -> ContextOutput | None:
    return _Served() if conf.get(MARKER) == "serve" else None


register_context_output(_served)


def test_a_registered_context_output_is_made_only_for_a_context_whose_conf_asks() -> None:
    outputs = context_outputs(None, 1000, {MARKER: "serve"})
    assert [type(o) for o in outputs] == [_Served]
    assert outputs[0].listener is None and outputs[0].job_description_setter() is print
    assert context_outputs(None, 1000, {}) == []
