"""The commitAsync queue: merged offsets, answers delivered on the caller's thread, never lost."""

from __future__ import annotations

import threading
from typing import Any, Callable

import pytest

from dstream_kafka.plan.commit_queue import CommitQueue
from dstream_kafka.errors import OffsetCommitError
from dstream_kafka.offsets import OffsetRange, TopicPartition


class _Future:
    """kafka-python's Future as the queue uses it: add_both, is_done, completed later."""

    def __init__(self) -> None:
        self.is_done = False
        self._fns: list[Callable[[Any], None]] = []

    def add_both(self, fn: Callable[[Any], None]) -> None:
        self._fns.append(fn)

    def complete(self, outcome: Any = None) -> None:
        self.is_done = True
        for fn in self._fns:
            fn(outcome)


class _Client:
    def __init__(self) -> None:
        self.sent: list[dict] = []
        self.futures: list[_Future] = []

    def commit_async(self, offsets: dict) -> _Future:
        self.sent.append({(tp.topic, tp.partition): om.offset for tp, om in offsets.items()})
        self.futures.append(_Future())
        return self.futures[-1]


def test_queued_ranges_are_sent_as_the_highest_until_offset_per_partition() -> None:
    queue, client = CommitQueue("g"), _Client()
    queue.add([OffsetRange("t", 0, 0, 5), OffsetRange("t", 1, 0, 3)])
    queue.add([OffsetRange("t", 0, 5, 9)])
    queue.send(client.commit_async)
    assert client.sent == [{("t", 0): 9, ("t", 1): 3}]
    queue.send(client.commit_async)  # nothing queued since: nothing sent
    assert len(client.sent) == 1


def test_the_callback_runs_on_deliver_not_on_the_thread_that_completes_the_commit() -> None:
    queue, client = CommitQueue("g"), _Client()
    seen: list[tuple[dict, Any, str]] = []
    queue.add([OffsetRange("t", 0, 0, 5)],
              lambda offsets, err: seen.append((offsets, err, threading.current_thread().name)))
    queue.send(client.commit_async)
    io = threading.Thread(target=client.futures[0].complete, name="kafka-io-test")
    io.start()
    io.join()
    assert seen == []
    queue.deliver()
    assert seen == [({TopicPartition("t", 0): 5}, None, threading.current_thread().name)]


def test_a_failed_or_unsendable_commit_reaches_the_callback_as_an_offset_commit_error() -> None:
    queue, client = CommitQueue("g"), _Client()
    errors: list[Any] = []
    queue.add([OffsetRange("t", 0, 0, 5)], lambda offsets, err: errors.append(err))
    queue.send(client.commit_async)
    client.futures[0].complete(RuntimeError("rebalance in progress"))

    def refuse(offsets: dict) -> Any:
        raise RuntimeError("no coordinator")

    queue.add([OffsetRange("t", 0, 5, 7)])
    queue.send(refuse)
    queue.deliver()
    assert [type(e) for e in errors] == [OffsetCommitError, OffsetCommitError]
    assert "rebalance in progress" in str(errors[0]) and "group g" in str(errors[1])


def test_deliver_waits_for_commits_in_flight_up_to_its_limit() -> None:
    queue, client = CommitQueue("g"), _Client()
    done: list[Any] = []
    queue.add([OffsetRange("t", 0, 0, 1)], lambda offsets, err: done.append(err))
    queue.send(client.commit_async)
    timer = threading.Timer(0.05, client.futures[0].complete)
    timer.start()
    queue.deliver(wait_s=5)
    assert done == [None] and queue.in_flight() == 0
    queue.add([OffsetRange("t", 0, 1, 2)])
    queue.send(client.commit_async)  # never answered: deliver gives up after wait_s
    queue.deliver(wait_s=0.05)
    assert queue.in_flight() == 1 and done == [None]


def test_only_the_last_callback_is_kept() -> None:
    queue, client = CommitQueue("g"), _Client()
    first: list[Any] = []
    last: list[Any] = []
    queue.add([OffsetRange("t", 0, 0, 1)], lambda o, e: first.append(o))
    queue.add([OffsetRange("t", 0, 1, 2)], lambda o, e: last.append(o))
    queue.send(client.commit_async)
    client.futures[0].complete()
    queue.deliver()
    assert first == [] and last == [{TopicPartition("t", 0): 2}]


def test_a_callback_that_raises_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    queue, client = CommitQueue("g"), _Client()
    calls: list[int] = []

    def flaky(offsets: dict, err: Any) -> None:
        calls.append(1)
        raise ValueError("user bug")

    queue.add([OffsetRange("t", 0, 0, 1)], flaky)
    queue.send(client.commit_async)
    queue.add([OffsetRange("t", 0, 1, 2)])
    queue.send(client.commit_async)
    for f in client.futures:
        f.complete()
    queue.deliver()
    assert calls == [1, 1] and "commitAsync callback" in caplog.text
