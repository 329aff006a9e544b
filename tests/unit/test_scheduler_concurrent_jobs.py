"""``spark.streaming.concurrentJobs``: batches run at once, complete in batch-time order."""

from __future__ import annotations

import threading
import time
from typing import Any

from dstream_kafka.streaming.clock import first_batch_time
from dstream_kafka.streaming.listener import BatchInfo, ListenerBus
from dstream_kafka.streaming.scheduler import JobScheduler, OutputJob


class _Loop:
    """Batches whose one job blocks until released; the first batch's job is the slowest."""

    def __init__(self, concurrent_jobs: int, fail_first: bool = False) -> None:
        self.bus = ListenerBus()
        self.bus.start()
        self.lock = threading.Lock()
        self.running = 0
        self.most_at_once = 0
        self.first: int | None = None
        self.first_release = threading.Event()
        self.fail_first = fail_first
        self.finished: list[int] = []
        self.completed: list[int] = []
        self.failed: list[int] = []
        self.scheduler = JobScheduler(
            20, self.generate, lambda t, info: self.completed.append(t),
            lambda t, e: self.failed.append(t), lambda e: None, self.bus,
            graceful_timeout_ms=10_000, concurrent_jobs=concurrent_jobs)
        self.scheduler.start(first_batch_time(int(time.time() * 1000), 20))

    def generate(self, t: int) -> tuple[list[OutputJob], dict[int, Any]]:
        return [OutputJob(0, "job", "test", lambda: self.run(t))], {}

    def run(self, t: int) -> None:
        with self.lock:
            if self.first is None:
                self.first = t
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        if t == self.first:
            self.first_release.wait(10)
        else:
            time.sleep(0.01)
        with self.lock:
            self.running -= 1
            self.finished.append(t)
        if t == self.first and self.fail_first:
            raise RuntimeError("first batch fails")

    def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.005)

    def stop(self) -> None:
        self.first_release.set()
        self.scheduler.stop(False)
        self.bus.stop()


def test_one_job_at_a_time_by_default() -> None:
    loop = _Loop(concurrent_jobs=1)
    time.sleep(0.2)
    assert loop.most_at_once == 1 and loop.finished == []
    loop.first_release.set()
    loop.wait_for(lambda: len(loop.completed) >= 3)
    loop.stop()
    assert loop.completed == sorted(loop.completed)


def test_later_batches_run_beside_a_slow_one_but_complete_after_it() -> None:
    loop = _Loop(concurrent_jobs=3)
    loop.wait_for(lambda: len(loop.finished) >= 2)  # two later batches ran meanwhile
    assert loop.most_at_once >= 2 and loop.completed == []
    loop.first_release.set()
    loop.wait_for(lambda: len(loop.completed) >= 3)
    loop.stop()
    assert loop.completed[0] == loop.first
    assert loop.completed == sorted(loop.completed)


def test_no_batch_completes_after_a_failed_one() -> None:
    loop = _Loop(concurrent_jobs=3, fail_first=True)
    loop.wait_for(lambda: len(loop.finished) >= 2)
    loop.first_release.set()
    loop.wait_for(lambda: loop.failed == [loop.first])
    time.sleep(0.1)
    loop.stop()
    assert loop.completed == []
