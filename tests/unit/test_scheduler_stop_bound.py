"""A stop never waits without bound for a stuck batch, and never completes it afterwards."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from dstream_kafka.streaming import scheduler as scheduler_module
from dstream_kafka.streaming.clock import first_batch_time
from dstream_kafka.streaming.listener import ListenerBus
from dstream_kafka.streaming.scheduler import JobScheduler, OutputJob


def _stuck_scheduler(release: threading.Event, started: threading.Event,
                     completed: list[int]) -> tuple[JobScheduler, ListenerBus]:
    bus = ListenerBus()
    bus.start()

    def run() -> None:
        started.set()
        release.wait(30)

    def generate(t: int) -> tuple[list[OutputJob], dict[int, Any]]:
        return [OutputJob(0, "stuck", "test", run)], {}

    scheduler = JobScheduler(50, generate, lambda t, info: completed.append(t),
                             lambda t, e: None, lambda e: None, bus,
                             graceful_timeout_ms=200)
    scheduler.start(first_batch_time(int(time.time() * 1000), 50))
    return scheduler, bus


@pytest.mark.parametrize("graceful", [False, True])
def test_stop_returns_within_its_bound_while_an_output_operation_is_stuck(
        monkeypatch: pytest.MonkeyPatch, graceful: bool) -> None:
    monkeypatch.setattr(scheduler_module, "STOP_WAIT_SECONDS", 0.3)
    release, started, completed = threading.Event(), threading.Event(), []
    scheduler, bus = _stuck_scheduler(release, started, completed)
    try:
        assert started.wait(10)
        began = time.monotonic()
        scheduler.stop(graceful)
        waited = time.monotonic() - began
        assert 0.25 <= waited < 5.0
    finally:
        release.set()
        bus.stop()


def test_a_batch_left_running_by_a_bounded_stop_is_never_completed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scheduler_module, "STOP_WAIT_SECONDS", 0.2)
    release, started, completed = threading.Event(), threading.Event(), []
    scheduler, bus = _stuck_scheduler(release, started, completed)
    try:
        assert started.wait(10)
        scheduler.stop(graceful=True)
        release.set()  # the stuck output operation finishes after the stop returned
        thread = scheduler.threads[0]
        thread.join(10)
        assert not thread.is_alive()
        assert completed == []
    finally:
        release.set()
        bus.stop()


def test_a_bounded_stop_logs_where_the_stuck_thread_is(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(scheduler_module, "STOP_WAIT_SECONDS", 0.2)
    release, started, completed = threading.Event(), threading.Event(), []
    scheduler, bus = _stuck_scheduler(release, started, completed)
    try:
        assert started.wait(10)
        with caplog.at_level("WARNING", logger=scheduler_module.__name__):
            scheduler.stop(graceful=False)
        text = caplog.text
        assert "did not stop within" in text
        assert "dstream-jobs:" in text and "release.wait(30)" in text
    finally:
        release.set()
        bus.stop()
