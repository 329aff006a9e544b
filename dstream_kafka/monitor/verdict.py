"""Why a stream is behind: Burrow's status words per partition, and the likely cause.

Each partition is judged on its window of lag samples (time, log end, committed offset) by
Burrow's rules (``linkedin/Burrow``, ``core/internal/evaluator/caching.go``), in order:

1. the current lag is 0: ``OK``;
2. a committed offset went down: ``REWIND`` (an offsets reset);
3. the stream has committed nothing for longer than its stop bound (three batch intervals, at
   least three lag samples and :data:`STUCK_MIN_MS`): ``STOP``;
4. any lag in the window is 0: ``OK``. (Burrow checks this first; its window holds commits,
   ours timer samples, so a zero lag before a stream stopped committing must not hide the stop);
5. the committed offset did not move over the window while lag stayed: ``STALL``;
6. the lag grew over the window and rose in more steps than it fell: ``WARN`` (Burrow asks
   that it never fell between two commits; timer samples fall now and then while a stream
   commits in steps and a producer pauses, so a majority of rising steps stands for it);
7. else ``OK``.

The stream takes its worst partition's status, or ``ERR`` when the latest look-up of the log
end failed. :func:`judge` then names the cause from the evidence, first match wins: the broker
is unreachable; a store commit has been running too long (stuck store); a batch has been in its
Spark jobs too long (stuck Spark job); reading is capped by ``maxRatePerPartition`` below the
production rate (rate limit); batches take longer than the batch interval (slow processing);
records arrive faster than they are processed (input above processing). Everything here is pure:
the facts come from :mod:`dstream_kafka.monitor.lag`.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

__all__ = ["STATUSES", "PartitionWindow", "StreamFacts", "Verdict", "judge", "partition_status"]

#: Status words from best to worst (Burrow's, with ERR for an unreachable broker).
STATUSES = ("OK", "WARN", "REWIND", "STALL", "STOP", "ERR")

#: A stuck store or Spark job is one running longer than this many batch intervals...
STUCK_INTERVALS = 3
#: ...and at least this long (ms), so that short intervals do not call every hiccup stuck.
STUCK_MIN_MS = 5_000


@dataclass(frozen=True)
class PartitionWindow:
    """The recent samples of one partition, oldest first: ``(time ms, log end, committed)``."""

    topic: str
    partition: int
    points: tuple[tuple[int, int, int], ...]

    @property
    def name(self) -> str:
        """``topic-partition``."""
        return f"{self.topic}-{self.partition}"

    @property
    def lags(self) -> list[int]:
        """The lag in offsets of each sample (floored at 0)."""
        return [max(end - committed, 0) for _, end, committed in self.points]


@dataclass(frozen=True)
class StreamFacts:
    """What the lag timer knows about one stream when it judges it (times in epoch ms).

    ``last_commit`` is when the stream last committed a batch (or started); ``commit_since``
    when the store commit still running began (None: none running); ``processing_since`` and
    ``processing_batch`` the start and batch time of the oldest batch still in its jobs;
    ``rate_cap`` the records/s ``maxRatePerPartition`` allows over all partitions (None: no
    cap) and ``capped_batches`` how many of the recent planned batches read a range as long as
    the cap allows (of how many); ``largest_task`` the partition that read the most records
    of the last batch, its records and the batch's; ``task_times`` the wall time (ms) of each
    task of the last batch whose jobs ended, by what it read (read and the processing
    pipelined after it); ``time_split`` the recent batches' mean ``durationMs`` entries.
    """

    now: int
    batch_ms: int
    interval_ms: int
    windows: tuple[PartitionWindow, ...]
    lookup_error: str | None = None
    last_commit: int | None = None
    commit_since: int | None = None
    processing_since: int | None = None
    processing_batch: int | None = None
    queued_batches: int = 0
    rate_cap: float | None = None
    capped_batches: tuple[int, int] = (0, 0)
    largest_task: tuple[str, int, int] | None = None
    task_times: tuple[tuple[str, float], ...] = ()
    time_split: Mapping[str, float] = field(default_factory=dict)
    store: str = "none"


@dataclass(frozen=True)
class Verdict:
    """A stream's status word, the cause found and the evidence behind it."""

    status: str
    cause: str
    evidence: tuple[str, ...] = ()
    partitions: Mapping[str, str] = field(default_factory=dict)

    def line(self) -> str:
        """The verdict as one log line: status, cause, then the evidence."""
        return f"{self.status}: {self.cause}" + "".join(f"; {e}" for e in self.evidence)

    def jsonValue(self) -> dict[str, Any]:
        """``{"status", "cause", "evidence", "partitions"}`` (partition names to status)."""
        return {"status": self.status, "cause": self.cause, "evidence": list(self.evidence),
                "partitions": dict(self.partitions)}


def _stop_after_ms(facts: StreamFacts) -> int:
    return max(STUCK_INTERVALS * facts.batch_ms, 3 * facts.interval_ms, STUCK_MIN_MS)


def partition_status(window: PartitionWindow, now: int, last_commit: int | None,
                     stop_after_ms: int) -> str:
    """Burrow's status of one partition (see the module's rules)."""
    lags = window.lags
    if not lags or lags[-1] == 0:
        return "OK"
    committed = [c for _, _, c in window.points]
    if any(b < a for a, b in zip(committed, committed[1:])):
        return "REWIND"
    if last_commit is not None and now - last_commit > stop_after_ms:
        return "STOP"
    if 0 in lags:
        return "OK"
    if len(committed) > 1 and committed[0] == committed[-1]:
        return "STALL"
    steps = [b - a for a, b in zip(lags, lags[1:])]
    if lags[-1] > lags[0] and sum(d > 0 for d in steps) > sum(d < 0 for d in steps):
        return "WARN"
    return "OK"


def _rate(windows: Sequence[PartitionWindow], column: int) -> float | None:
    """Records/s over the windows of column 1 (log end) or 2 (committed), summed."""
    total, span = 0, 0
    for w in windows:
        if len(w.points) > 1:
            total += w.points[-1][column] - w.points[0][column]
            span = max(span, w.points[-1][0] - w.points[0][0])
    return total * 1000.0 / span if span > 0 else None


def _clock_time(ms: int | None) -> str:
    """A batch time as ``HH:MM:SS.mmm UTC``."""
    if ms is None:
        return "?"
    when = datetime.fromtimestamp(ms / 1000.0, tz=timezone.utc)
    return when.strftime("%H:%M:%S.") + f"{ms % 1000:03d} UTC"


def _seconds(ms: float) -> str:
    return f"{ms / 1000.0:.1f} s"


def judge(facts: StreamFacts) -> Verdict:
    """The stream's :class:`Verdict`: status, cause and evidence."""
    statuses = {w.name: partition_status(w, facts.now, facts.last_commit, _stop_after_ms(facts))
                for w in facts.windows}
    worst = max(statuses.values(), key=STATUSES.index, default="OK")
    status = "ERR" if facts.lookup_error else worst
    evidence: list[str] = []
    produced, consumed = _rate(facts.windows, 1), _rate(facts.windows, 2)
    if produced is not None and consumed is not None:
        evidence.append(f"input rate {produced:.1f} records/s, processing rate "
                        f"{consumed:.1f} records/s")
    lags = {w.name: w.lags[-1] for w in facts.windows if w.points}
    if lags and max(lags.values()) > 0:
        slowest = max(lags, key=lambda n: lags[n])
        mean = sum(lags.values()) / len(lags)
        evidence.append(f"slowest partition {slowest} ({lags[slowest]} offsets behind, "
                        f"skew {lags[slowest] / mean:.1f}x the mean)")
    largest = None
    if facts.largest_task is not None and facts.largest_task[1] > 0:
        name, records, total = facts.largest_task
        largest = f"{name} with {records:,} of {total:,} records"
    if facts.task_times:
        name, took = max(facts.task_times, key=lambda kv: kv[1])
        median = statistics.median(ms for _, ms in facts.task_times)
        skew = f", {took / median:.1f}x the median" if median > 0 else ""
        evidence.append(f"slowest task of the last batch: {name} took {_seconds(took)}{skew}"
                        + ("" if largest is None else f" (largest: {largest})"))
    elif largest is not None:
        evidence.append(f"largest task of the last batch: {largest}")
    capped, planned = facts.capped_batches
    if facts.rate_cap is not None and planned:
        evidence.append(f"{capped} of the last {planned} batches read as much as "
                        "maxRatePerPartition allows")
    if facts.time_split:
        evidence.append("time per batch: " + ", ".join(
            f"{k} {v:.0f} ms" for k, v in facts.time_split.items()))
    stuck = max(STUCK_INTERVALS * facts.batch_ms, STUCK_MIN_MS)
    if facts.lookup_error:
        cause = f"broker unreachable: the log-end look-up failed ({facts.lookup_error})"
    elif facts.commit_since is not None and facts.now - facts.commit_since > stuck:
        cause = (f"stuck store: a commit to the {facts.store} offset store has been running "
                 f"for {_seconds(facts.now - facts.commit_since)}")
    elif facts.processing_since is not None and facts.now - facts.processing_since > stuck:
        cause = (f"stuck Spark job: the batch of {_clock_time(facts.processing_batch)} has been "
                 f"in its jobs for {_seconds(facts.now - facts.processing_since)}, "
                 f"{facts.queued_batches} batches queued behind it")
    elif worst == "OK":
        cause = "keeping up"
    elif (facts.rate_cap is not None and planned and 2 * capped >= planned
          and (produced is None or produced > facts.rate_cap)):
        rate = "" if produced is None else f", below the input rate of {produced:.1f} records/s"
        cause = (f"rate limit: spark.streaming.kafka.maxRatePerPartition caps reading at "
                 f"{facts.rate_cap:.1f} records/s{rate}")
    elif facts.time_split.get("addBatch", 0.0) > facts.batch_ms:
        cause = (f"slow processing: batches spend {_seconds(facts.time_split['addBatch'])} in "
                 f"their jobs, longer than the batch interval of {_seconds(facts.batch_ms)}")
    elif produced is not None and consumed is not None and produced > consumed:
        cause = (f"input above processing: {produced:.1f} records/s arrive, "
                 f"{consumed:.1f} records/s are processed")
    else:
        cause = "behind, cause not found in the evidence"
    return Verdict(status, cause, tuple(evidence), statuses)
