"""The scheduler without a fixed interval (``batchDuration=0``): batches back to back, only
when an input has new data, the empty checks bounded by the polling delay."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from dstream_kafka.streaming.listener import ListenerBus
from dstream_kafka.streaming.scheduler import JobScheduler, OutputJob

POLL_MS = 20


class _Loop:
    """A continuous scheduler whose input has data while ``self.data`` is positive."""

    def __init__(self, concurrent_jobs: int = 1,
                 ready: Callable[[], bool] | None = None) -> None:
        self.bus = ListenerBus()
        self.bus.start()
        self.lock = threading.Lock()
        self.data = 0
        self.generated: list[int] = []
        self.completed: list[int] = []
        self.running = 0
        self.most_at_once = 0
        self.generated_while_running = 0
        self.release = threading.Event()
        self.release.set()
        self.scheduler = JobScheduler(
            1, self.generate, lambda t, info: self.completed.append(t), lambda t, e: None,
            lambda e: None, self.bus, graceful_timeout_ms=10_000,
            concurrent_jobs=concurrent_jobs, has_new_data=ready or self.ready, poll_ms=POLL_MS)
        self.scheduler.start(int(time.time() * 1000))

    def ready(self) -> bool:
        with self.lock:
            return self.data > 0

    def generate(self, t: int) -> tuple[list[OutputJob], dict[int, Any]]:
        with self.lock:
            self.data = max(self.data - 1, 0)
            self.generated.append(t)
            if self.running:
                self.generated_while_running += 1
        return [OutputJob(0, "job", "test", self.run)], {}

    def run(self) -> None:
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        self.release.wait(10)
        time.sleep(0.005)
        with self.lock:
            self.running -= 1

    def add(self, batches: int) -> None:
        with self.lock:
            self.data += batches

    def stop(self) -> None:
        self.release.set()
        self.scheduler.stop(False)
        self.bus.stop()


def wait_for(predicate: Callable[[], object], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.002)


def test_no_batch_is_generated_while_no_input_has_new_data() -> None:
    loop = _Loop()
    try:
        wait_for(lambda: loop.scheduler.empty_polls >= 5)
        assert loop.generated == []
    finally:
        loop.stop()


def test_the_empty_checks_are_at_most_one_per_polling_delay() -> None:
    loop = _Loop()
    try:
        started = time.monotonic()
        wait_for(lambda: loop.scheduler.empty_polls >= 10)
        elapsed_ms = (time.monotonic() - started) * 1000.0
        polls = loop.scheduler.empty_polls
        # the first check is at once, each later one a polling delay after the previous
        assert elapsed_ms >= (polls - 2) * POLL_MS
    finally:
        loop.stop()


def test_a_batch_is_generated_once_data_arrives() -> None:
    loop = _Loop()
    try:
        wait_for(lambda: loop.scheduler.empty_polls >= 2)
        loop.add(1)
        wait_for(lambda: loop.completed)
        assert len(loop.generated) == 1
    finally:
        loop.stop()


def test_batches_run_back_to_back_one_after_the_other_with_increasing_times() -> None:
    loop = _Loop()
    try:
        loop.add(5)
        wait_for(lambda: len(loop.completed) >= 5)
        assert loop.generated == sorted(set(loop.generated))
        assert loop.completed == loop.generated[:len(loop.completed)]
        assert loop.most_at_once == 1 and loop.generated_while_running == 0
        # no data left: the loop checks again without generating more
        polls = loop.scheduler.empty_polls
        wait_for(lambda: loop.scheduler.empty_polls >= polls + 2)
        assert len(loop.generated) == 5
    finally:
        loop.stop()


def test_with_two_concurrent_jobs_the_next_batch_is_planned_while_the_previous_runs() -> None:
    loop = _Loop(concurrent_jobs=2)
    loop.release.clear()
    try:
        loop.add(3)
        wait_for(lambda: loop.most_at_once >= 2)  # batch 2 planned and running beside batch 1
        assert loop.completed == []
        loop.release.set()
        wait_for(lambda: len(loop.completed) >= 3)
        assert loop.completed == sorted(loop.completed)
    finally:
        loop.stop()


def test_a_failing_check_for_new_data_lets_the_batch_report_the_error() -> None:
    def broken() -> bool:
        raise RuntimeError("broker unreachable")

    loop = _Loop(ready=broken)
    try:
        wait_for(lambda: loop.generated)
    finally:
        loop.stop()
