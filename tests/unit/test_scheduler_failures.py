"""What the batch loop does after a failed batch: stop (the default, for committed
positions) or report the failure and go on (``on_error``, Spark's behaviour)."""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from dstream_kafka.streaming.clock import first_batch_time
from dstream_kafka.streaming.listener import ListenerBus
from dstream_kafka.streaming.scheduler import JobScheduler, OutputJob

BATCH_MS = 20


class Run:
    """A scheduler whose batch 1 fails in its output and batch ``generation_fails`` (3) in its
    generation; records every hook."""

    def __init__(self, on_error: Callable[[BaseException], None] | None,
                 generation_fails: int | None = 3) -> None:
        self.generation_fails = generation_fails
        self.completed: list[int] = []
        self.failed: list[int] = []
        self.fatal: list[BaseException] = []
        self.reported: list[BaseException] = []
        self.fatal_seen = threading.Event()
        self._count = 0
        self._times: dict[int, int] = {}
        self.bus = ListenerBus()
        self.bus.start()

        def report(error: BaseException) -> None:
            self.reported.append(error)
            if on_error is not None:
                on_error(error)

        self.scheduler = JobScheduler(
            BATCH_MS, self.generate, lambda t, info: self.completed.append(self.index(t)),
            lambda t, e: self.failed.append(self.index(t)), self.on_fatal, self.bus,
            graceful_timeout_ms=1000, on_error=None if on_error is None else report)
        self.scheduler.start(first_batch_time(int(time.time() * 1000), BATCH_MS))

    def index(self, t: int) -> int:
        return self._times[t]

    def on_fatal(self, error: BaseException) -> None:
        self.fatal.append(error)
        self.fatal_seen.set()

    def generate(self, t: int) -> tuple[list[OutputJob], dict[int, Any]]:
        i = self._count
        self._count += 1
        self._times[t] = i
        if i == self.generation_fails:
            raise ValueError(f"generation {i} fails")

        def run() -> None:
            if i == 1:
                raise ValueError("output 1 fails")

        return [OutputJob(0, "op", "test", run)], {}

    def wait(self, predicate: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not predicate():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.005)

    def close(self) -> None:
        self.scheduler.stop(graceful=False)
        self.bus.stop()


def test_with_on_error_failed_batches_are_reported_and_later_batches_complete() -> None:
    run = Run(on_error=lambda error: None)
    try:
        run.wait(lambda: len(run.completed) >= 4)
        assert run.completed[:4] == [0, 2, 4, 5]
        # batches are generated ahead of their jobs: on a loaded machine batch 3's generation
        # can fail before batch 1's output does, so the two reports come in either order
        assert sorted(run.failed) == [1, 3]
        assert sorted(str(e) for e in run.reported) == ["generation 3 fails", "output 1 fails"]
        assert run.fatal == []
    finally:
        run.close()


def test_without_on_error_the_first_failed_batch_stops_the_loop() -> None:
    # only batch 1 fails: a failing generation could otherwise come first on a loaded machine
    run = Run(on_error=None, generation_fails=None)
    try:
        assert run.fatal_seen.wait(30)
        time.sleep(10 * BATCH_MS / 1000)  # nothing may complete after the failure
        assert run.completed == [0]
        assert run.failed == [1]
        assert [str(e) for e in run.fatal] == ["output 1 fails"]
    finally:
        run.close()
