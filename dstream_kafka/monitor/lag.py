"""Per-partition lag of one direct stream, measured on its own driver timer.

Every ``spark.streaming.kafka.lag.interval`` (default 5 s) a daemon thread asks Kafka once for
the log end of all the stream's partitions (the last stable offset under ``read_committed``),
through a pooled :func:`~dstream_kafka.client.offset_reader.offset_reader` (no new consumer
per tick), waiting at most one interval (at least 2 s) for the answer, and computes for each
partition:

* ``lagOffsets``: log end minus the stream's committed offset, floored at 0. The committed
  offset is what the stream's offset store last committed (the until offsets of its last
  committed batch); before the first commit it is where the stream planned to start. A
  stream without a store counts a batch as committed when it completed;
* ``lagSeconds``: how long ago the log reached the committed offset, interpolated from the
  log-end history (:class:`~dstream_kafka.monitor.lookup_table.LookupTable`, 60 samples), as
  kafka-lag-exporter does; 0 when caught up, unknown (None) until two samples exist. An offset
  older than the whole table is as old as the table's first sample at least (a lower bound,
  not kafka-lag-exporter's infinity).

The timer does not depend on batches: a batch stuck in its jobs or in its store commit commits
nothing, so its lag keeps growing. Each sample goes to the sample listeners (Prometheus, the
Streaming page), and :meth:`LagMonitor.verdict` judges the recent samples
(:mod:`dstream_kafka.monitor.verdict`); while the verdict is not OK one WARNING line says so,
repeated at most every :data:`WARN_EVERY_MS`.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from dstream_kafka.monitor.lookup_table import LAG_IS_ZERO, TOO_FEW_POINTS, LookupTable, Point
from dstream_kafka.monitor.verdict import STATUSES, PartitionWindow, StreamFacts, Verdict, judge
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.streaming.listener import (StreamingListener, StreamingListenerBatchCompleted,
                                              StreamingListenerBatchStarted)

__all__ = ["LagMonitor", "LagSample", "PartitionLag", "log_end_lookup"]

log = logging.getLogger(__name__)

#: Samples kept per stream (the verdict looks at the last :data:`WINDOW`).
HISTORY = 120
#: Samples a partition's verdict is judged on (Burrow's ``intervals``, default 10).
WINDOW = 10
#: While the verdict is not OK, its WARNING line is repeated at most this often.
WARN_EVERY_MS = 60_000

#: The shortest bound of one look-up of the timer (its interval when that is longer): a
#: look-up that a loaded machine (load 36 on 2 cores) stretched past 1 s is no outage.
MIN_LOOKUP_BOUND_MS = 2_000

#: ``lookup(partitions, timeout_ms)``: the log end of each partition, or an exception when the
#: brokers did not answer within ``timeout_ms``.
Lookup = Callable[[Sequence[TopicPartition], int], Mapping[TopicPartition, int]]


@dataclass(frozen=True)
class PartitionLag:
    """The lag of one partition at one sample."""

    topic: str
    partition: int
    logEndOffset: int
    committedOffset: int
    lagOffsets: int
    lagSeconds: float | None

    def jsonValue(self) -> dict[str, Any]:
        """This partition's figures under their JSON names (``lagSeconds`` null if unknown)."""
        return {"logEndOffset": self.logEndOffset, "committedOffset": self.committedOffset,
                "lagOffsets": self.lagOffsets, "lagSeconds": self.lagSeconds}


@dataclass(frozen=True)
class LagSample:
    """One tick of the lag timer: every partition's lag at ``time`` (epoch ms).

    ``lookupError`` is set when the log-end look-up failed; the partitions then carry the last
    log ends known and seconds that still grow with the committed offsets' age.
    """

    time: int
    partitions: tuple[PartitionLag, ...]
    lookupError: str | None = None

    @property
    def lagOffsets(self) -> int:
        """The lag in offsets summed over the partitions."""
        return sum(p.lagOffsets for p in self.partitions)

    @property
    def maxLagSeconds(self) -> float | None:
        """The largest known lag in seconds, or None when none is known."""
        known = [p.lagSeconds for p in self.partitions if p.lagSeconds is not None]
        return max(known) if known else None

    def jsonValue(self) -> dict[str, Any]:
        """``{"timestamp", "lagOffsets", "maxLagSeconds", "lookupError", "partitions"}``,
        partitions as ``{"topic": {"0": {...}}}``."""
        parts: dict[str, dict[str, Any]] = {}
        for p in sorted(self.partitions, key=lambda p: (p.topic, p.partition)):
            parts.setdefault(p.topic, {})[str(p.partition)] = p.jsonValue()
        when = datetime.fromtimestamp(self.time / 1000.0, tz=timezone.utc)
        return {"timestamp": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"), "lagOffsets": self.lagOffsets,
                "maxLagSeconds": self.maxLagSeconds, "lookupError": self.lookupError,
                "partitions": parts}


def log_end_lookup(configs: Any) -> Lookup:
    """The look-up of the log ends through the pooled offset reader of ``configs``."""
    from dstream_kafka.client.offset_reader import offset_reader

    def lookup(parts: Sequence[TopicPartition], timeout_ms: int) -> Mapping[TopicPartition, int]:
        with offset_reader(configs) as reader:
            return reader.latest(list(parts), timeout_ms)
    return lookup


class _BatchWatch(StreamingListener):
    """Which batches are in their jobs, and since when (from the context's listener bus)."""

    def __init__(self, monitor: LagMonitor) -> None:
        self.monitor = monitor

    def onBatchStarted(self, batchStarted: StreamingListenerBatchStarted) -> None:
        info = batchStarted.batchInfo()
        with self.monitor._lock:
            self.monitor._processing[info.batch_time] = info.processing_start_time or _now()

    def onBatchCompleted(self, batchCompleted: StreamingListenerBatchCompleted) -> None:
        with self.monitor._lock:
            self.monitor._processing.pop(batchCompleted.batchInfo().batch_time, None)


def _largest(ranges: Sequence[OffsetRange]) -> tuple[str, int, int] | None:
    """The range with the most records: its name, its records, and the batch's."""
    largest = max(ranges, key=lambda r: r.count(), default=None)
    return None if largest is None else (f"{largest.topic}-{largest.partition}",
                                         largest.count(), sum(r.count() for r in ranges))


def _now() -> int:
    return int(time.time() * 1000)


class LagMonitor:
    """The lag timer of one stream (thread-safe).

    Parameters
    ----------
    stream : int
        The stream's number (the ``stream`` label of its metrics).
    lookup : callable
        Returns the log end of each partition asked (one call per tick for all of them), within
        the timeout in ms it is given (:attr:`lookup_bound_ms`).
    interval_ms : int
        Time between two ticks.

    Attributes
    ----------
    lookup_bound_ms : int
        How long one tick's look-up may wait for the brokers: the interval, at least
        :data:`MIN_LOOKUP_BOUND_MS`. Not the 30 s of the offset reader: when the brokers go
        down, the next tick fails within this bound, so the verdict is ``ERR`` within one
        interval plus this bound (two intervals from 2 s up), instead of staying OK for as
        long as a look-up waited.
    batch_ms : int
        The context's batch interval (the verdict's stuck bounds are multiples of it).
    rate_cap : float or None
        Records/s per partition allowed by ``maxRatePerPartition`` (None: not capped).
    store : str
        The offset store's class name, for the verdict's words.
    """

    def __init__(self, stream: int, lookup: Lookup, interval_ms: int, batch_ms: int, *,
                 rate_cap: float | None = None, store: str = "none",
                 clock: Callable[[], int] = _now) -> None:
        self.stream = stream
        self.interval_ms = interval_ms
        self.lookup_bound_ms = max(interval_ms, MIN_LOOKUP_BOUND_MS)
        self.batch_ms = batch_ms
        self.rate_cap = rate_cap
        self.store = store
        self._lookup = lookup
        self._clock = clock
        self._lock = threading.Lock()
        self._committed: dict[TopicPartition, int] = {}
        self._tables: dict[TopicPartition, LookupTable] = {}
        self._log_ends: dict[TopicPartition, int] = {}
        self._history: collections.deque[LagSample] = collections.deque(maxlen=HISTORY)
        self._split: collections.deque[Mapping[str, float]] = collections.deque(maxlen=WINDOW)
        self._processing: dict[int, int] = {}
        self._capped: collections.deque[bool] = collections.deque(maxlen=WINDOW)
        self._largest: tuple[str, int, int] | None = None
        self._task_times: tuple[tuple[str, float], ...] = ()
        self._queued = 0
        self._last_commit: int | None = None
        self._commit_since: int | None = None
        self._listeners: list[Callable[[LagSample, Verdict], None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned_status: str | None = None  # the status last warned of, while not OK
        self._warned_at: int | None = None
        self.listener = _BatchWatch(self)

    # -- fed by the stream (its scheduler thread) ------------------------------------------

    def started(self, positions: Mapping[TopicPartition, int]) -> None:
        """The stream starts at ``positions``: its committed offsets until the first commit."""
        with self._lock:
            self._committed.update(positions)
            self._last_commit = self._clock()

    def planned(self, ranges: Iterable[OffsetRange], queued: int) -> None:
        """A batch was planned (one range per partition of the stream): a partition new to the
        stream starts at its range's start, one without a range (deleted, given up) is no
        longer watched. ``queued`` is the number of the stream's batches planned and not
        completed."""
        ranges = list(ranges)
        with self._lock:
            planned = {r.topicPartition() for r in ranges}
            for tp in [tp for tp in self._committed if tp not in planned]:
                del self._committed[tp]
                self._tables.pop(tp, None)
                self._log_ends.pop(tp, None)
            for r in ranges:
                self._committed.setdefault(r.topicPartition(), r.fromOffset)
            self._queued = queued
            self._largest = _largest(ranges)
            if self.rate_cap:
                # Spark's clamp: at most maxRatePerPartition * batch seconds per partition
                limit = int(self.rate_cap * self.batch_ms / 1000)
                self._capped.append(limit > 0 and any(r.count() >= limit for r in ranges))

    def tasks_timed(self, times: Mapping[str, float], ranges: Iterable[OffsetRange]) -> None:
        """A batch's jobs ended: ``times`` is the wall time in ms of each of its tasks, by
        what it read (:meth:`~dstream_kafka.read.kafka_rdd.KafkaRDD.taskTimes`), ``ranges``
        its ranges. A batch without records, or whose tasks were not timed (none read to its
        end), keeps the previous batch's: the times of empty tasks tell nothing."""
        ranges = list(ranges)
        with self._lock:
            if times and any(r.count() for r in ranges):
                self._task_times = tuple(sorted((str(k), float(v)) for k, v in times.items()))
                self._largest = _largest(ranges)

    def commit_started(self) -> None:
        """A batch's store commit begins (a commit that never ends is a stuck store)."""
        with self._lock:
            self._commit_since = self._clock()

    def committed(self, ranges: Iterable[OffsetRange]) -> None:
        """A batch's ranges were committed: their until offsets are the committed offsets."""
        with self._lock:
            for r in ranges:
                self._committed[r.topicPartition()] = r.untilOffset
            self._commit_since = None
            self._last_commit = self._clock()

    def on_progress(self, progress: Any) -> None:
        """Keep a completed batch's time split (its ``durationMs``) for the verdict."""
        durations = progress.jsonValue()["durationMs"]
        with self._lock:
            self._split.append({k: float(v) for k, v in durations.items()
                                if k in ("planBatch", "schedulingDelay", "addBatch",
                                         "commitOffsets")})

    def add_listener(self, listener: Callable[[LagSample, Verdict], None]) -> None:
        """Call ``listener(sample, verdict)`` after each tick, on the timer thread."""
        self._listeners.append(listener)

    # -- the timer --------------------------------------------------------------------------

    def start(self) -> None:
        """Take a first sample now, then one every interval, on a daemon thread."""
        self._thread = threading.Thread(target=self._run, name=f"dstream-lag-{self.stream}",
                                        daemon=True)
        self._thread.start()

    def stop(self, wait_s: float = 2.0) -> None:
        """Stop the timer; a look-up in flight is not waited for beyond ``wait_s``."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(wait_s)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                sample = self.sample()
                verdict = self.verdict()
                self._warn(verdict)
                for listener in self._listeners:
                    listener(sample, verdict)
            except Exception:  # the timer must outlive any one bad tick
                log.exception("Lag sample of stream %d failed", self.stream)
            self._stop.wait(self.interval_ms / 1000.0)

    def sample(self) -> LagSample:
        """Take one sample now: one look-up of every partition's log end."""
        with self._lock:
            parts = sorted(self._committed)
        error: str | None = None
        ends: Mapping[TopicPartition, int] = {}
        if parts:
            try:
                ends = self._lookup(parts, self.lookup_bound_ms)
            except Exception as exc:  # an unreachable broker is evidence, not a crash
                error = f"{type(exc).__name__}: {exc}"
        now = self._clock()
        with self._lock:
            rows = []
            for tp in parts:
                if tp in ends:
                    self._log_ends[tp] = int(ends[tp])
                    table = self._tables.setdefault(tp, LookupTable())
                    table.add_point(Point(int(ends[tp]), now))
                end = self._log_ends.get(tp)
                if end is None:
                    continue
                committed = self._committed[tp]
                behind = max(end - committed, 0)
                rows.append(PartitionLag(tp.topic, tp.partition, end, committed, behind,
                                         self._seconds(tp, committed, behind, now)))
            sample = LagSample(now, tuple(rows), error)
            self._history.append(sample)
        return sample

    def _seconds(self, tp: TopicPartition, committed: int, behind: int,
                 now: int) -> float | None:
        if behind == 0:
            return 0.0
        table = self._tables.get(tp)
        found = table.lookup(committed) if table is not None else TOO_FEW_POINTS
        if found == LAG_IS_ZERO:
            return 0.0
        if found == TOO_FEW_POINTS or isinstance(found, str):
            return None
        predicted = found.time
        if math.isinf(predicted) or (table is not None and predicted < table.points[0].time):
            # older than the table: at least as old as its first sample (a lower bound)
            predicted = table.points[0].time if table is not None else now
        return round(max(now - predicted, 0.0) / 1000.0, 3)

    # -- reading ----------------------------------------------------------------------------

    @property
    def latest(self) -> LagSample | None:
        """The most recent sample, or None before the first."""
        with self._lock:
            return self._history[-1] if self._history else None

    def history(self) -> list[LagSample]:
        """The samples kept, oldest first."""
        with self._lock:
            return list(self._history)

    def facts(self) -> StreamFacts:
        """What the verdict is judged on, as of now."""
        with self._lock:
            window = list(self._history)[-WINDOW:]
            names = sorted({(p.topic, p.partition) for s in window for p in s.partitions})
            windows = tuple(
                PartitionWindow(t, n, tuple((s.time, p.logEndOffset, p.committedOffset)
                                            for s in window for p in s.partitions
                                            if (p.topic, p.partition) == (t, n)))
                for t, n in names)
            split: dict[str, float] = {}
            for key in ("planBatch", "schedulingDelay", "addBatch", "commitOffsets"):
                values = [d[key] for d in self._split if key in d]
                if values:
                    split[key] = sum(values) / len(values)
            oldest = min(self._processing.items(), key=lambda kv: kv[1], default=None)
            cap = None if not self.rate_cap else self.rate_cap * max(len(self._committed), 1)
            return StreamFacts(
                now=self._clock(), batch_ms=self.batch_ms, interval_ms=self.interval_ms,
                windows=windows, lookup_error=window[-1].lookupError if window else None,
                last_commit=self._last_commit, commit_since=self._commit_since,
                processing_since=None if oldest is None else oldest[1],
                processing_batch=None if oldest is None else oldest[0],
                queued_batches=max(self._queued - (1 if oldest else 0), 0), rate_cap=cap,
                capped_batches=(sum(self._capped), len(self._capped)),
                largest_task=self._largest, task_times=self._task_times,
                time_split=split, store=self.store)

    def verdict(self) -> Verdict:
        """The stream's status, cause and evidence (:func:`~.verdict.judge`)."""
        return judge(self.facts())

    def _warn(self, verdict: Verdict) -> None:
        """One WARNING line while the verdict is not OK, at most every :data:`WARN_EVERY_MS`
        (sooner only when the status gets worse); one INFO line when OK again."""
        now = self._clock()
        if verdict.status == "OK":
            if self._warned_status is not None:
                log.info("Kafka direct stream %d is keeping up again", self.stream)
            self._warned_status = None
            return
        due = self._warned_at is None or now - self._warned_at >= WARN_EVERY_MS
        worse = self._warned_status is not None and (
            STATUSES.index(verdict.status) > STATUSES.index(self._warned_status))
        if due or worse:
            latest = self.latest
            lag = "" if latest is None else (
                f" (lag {latest.lagOffsets} offsets, "
                f"{'?' if latest.maxLagSeconds is None else latest.maxLagSeconds} s)")
            log.warning("Kafka direct stream %d is behind%s: %s", self.stream, lag,
                        verdict.line())
            self._warned_status, self._warned_at = verdict.status, now
