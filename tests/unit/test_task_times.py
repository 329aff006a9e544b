"""Kafka RDD task wall times: the executor report, the accumulator merge, the verdict's words."""

from __future__ import annotations

import types

import pytest
from pyspark.accumulators import Accumulator

from dstream_kafka.monitor.lag import LagMonitor
from dstream_kafka.monitor.verdict import StreamFacts, judge
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.read import task as read_task
from dstream_kafka.read.task import TASK_TIMES_KEPT, RangeTask, ReadSettings, TaskTimes, partition_reader


def _facts(**kw: object) -> StreamFacts:
    base: dict[str, object] = {"now": 10_000, "batch_ms": 1000, "interval_ms": 1000,
                               "windows": ()}
    base.update(kw)
    return StreamFacts(**base)  # type: ignore[arg-type]


def test_task_times_merge_per_rdd_tag_and_keep_only_the_most_recent_rdds() -> None:
    param = TaskTimes()
    value = param.zero({})
    param.addInPlace(value, {1: [(0, "t-0", 5.0)]})
    param.addInPlace(value, {1: [(1, "t-1", 7.0)], 2: [(0, "t-0", 3.0)]})
    assert value == {1: [(0, "t-0", 5.0), (1, "t-1", 7.0)], 2: [(0, "t-0", 3.0)]}
    for tag in range(3, TASK_TIMES_KEPT + 5):
        param.addInPlace(value, {tag: [(0, "t-0", 1.0)]})
    assert len(value) == TASK_TIMES_KEPT
    assert min(value) == 5  # the oldest tags went first


def test_a_task_reports_its_wall_time_from_its_start_to_the_end_of_its_records(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter([100.0, 104.2])  # the task's start, then the end of its records
    monkeypatch.setattr(read_task, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    times = Accumulator(7, {}, TaskTimes())
    settings = ReadSettings(groupId="g", pollTimeoutMs=1000, useCache=False)
    read = partition_reader({}, settings, [RangeTask(0, "t", 3, 5, 5)], None, None, times, 42)
    assert list(read(0, iter([(0, "t", 3)]))) == []  # an empty range: no consumer needed
    assert times.value == {42: [(0, "t-3", pytest.approx(4200.0))]}


def test_split_ranges_of_one_partition_are_named_by_their_split() -> None:
    times = Accumulator(8, {}, TaskTimes())
    settings = ReadSettings(groupId="g", pollTimeoutMs=1000, useCache=False)
    read = partition_reader({}, settings, [RangeTask(0, "t", 0, 5, 5), RangeTask(1, "t", 0, 5, 5)],
                            None, None, times, 1)
    list(read(1, iter([(1, "t", 0)])))
    assert [name for _, name, _ in times.value[1]] == ["t-0 split 1"]


@pytest.mark.parametrize(("task_times", "largest", "expected"), [
    # the slowest task, its skew over the median, and the largest task beside it
    ((("clicks-1", 1000.0), ("clicks-2", 1400.0), ("clicks-3", 4200.0)),
     ("clicks-3", 900, 1200),
     "slowest task of the last batch: clicks-3 took 4.2 s, 3.0x the median "
     "(largest: clicks-3 with 900 of 1,200 records)"),
    # the slowest task is not the largest one
    ((("t-0", 500.0), ("t-1", 3000.0)), ("t-0", 2000, 2100),
     "slowest task of the last batch: t-1 took 3.0 s, 1.7x the median "
     "(largest: t-0 with 2,000 of 2,100 records)"),
    # one task; no largest known
    ((("t-0", 250.0),), None, "slowest task of the last batch: t-0 took 0.2 s, 1.0x the median"),
    # tasks too fast to time: no skew
    ((("t-0", 0.0), ("t-1", 0.0)), None, "slowest task of the last batch: t-0 took 0.0 s"),
    # no task times yet: the largest task alone
    ((), ("t-3", 120, 200), "largest task of the last batch: t-3 with 120 of 200 records"),
])
def test_the_evidence_names_the_slowest_task_by_time_and_its_skew(
        task_times: tuple[tuple[str, float], ...], largest: tuple[str, int, int] | None,
        expected: str) -> None:
    evidence = judge(_facts(task_times=task_times, largest_task=largest)).evidence
    assert [e for e in evidence if "task of the last batch" in e] == [expected]


def test_the_monitor_keeps_the_last_timed_batch_with_records_and_its_largest_range() -> None:
    monitor = LagMonitor(0, lambda parts, timeout_ms: {}, 1000, 1000, clock=lambda: 0)
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 30)]
    monitor.tasks_timed({"t-1": 20.0, "t-0": 900.0}, ranges)
    monitor.tasks_timed({}, [OffsetRange("t", 0, 0, 99)])  # no task read to its end
    monitor.tasks_timed({"t-0": 1.0, "t-1": 1.0}, [OffsetRange("t", 0, 10, 10)])  # no records
    facts = monitor.facts()
    assert facts.task_times == (("t-0", 900.0), ("t-1", 20.0))
    assert facts.largest_task == ("t-1", 30, 40)
