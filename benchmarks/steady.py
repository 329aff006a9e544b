"""Workload 4, steady rate: a producer at fixed rates, end-to-end latency and lag per rate step.

A contender process (dk-stream, dk-stream-fast or ss-stream) starts its stream at the topic's
latest offsets and then runs the rate steps of :func:`run_steps`: for each step, Kafka's
``ProducerPerformance`` writes ``rate x seconds`` records at ``--throughput rate`` in its own JVM
(it holds a fixed rate on 2 cores far better than a Python producer, and stamps every record's
CreateTime when it is sent). The stream reports every batch it committed to a
:class:`SteadyRecorder`: the wall time of the commit (dstream_kafka: when the batch's progress
is reported, after its output and once its commitAsync was sent; Structured Streaming: at the end of
``foreachBatch``), a histogram of the batch's record timestamps (ms -> count) and the offsets it
read up to. An :class:`EndOffsetProbe` thread samples the topic's end offsets, so the lag at each
commit is "records in the topic but not yet committed".

Per step the result holds end-to-end latency percentiles (commit wall time - record timestamp,
every record), the lag at each commit and whether it stayed stable (:func:`lag_trend`), the
producer's achieved rate, and CPU seconds per million records of the contender alone (the
producer's CPU, reaped with ``wait4``, is subtracted).

The pure functions (:func:`weighted_percentile`, :func:`latency_histogram`,
:func:`lag_at_commits`, :func:`lag_trend`, :func:`parse_producer_perf`,
:func:`highest_rate_held`) are unit tested.
"""

from __future__ import annotations

import bisect
import os
import re
import subprocess
import threading
import time
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Sequence

from benchmarks.monitor import LOAD_GENERATOR_MARK

__all__ = ["weighted_percentile", "latency_histogram", "lag_at_commits", "lag_trend",
           "parse_producer_perf", "highest_rate_held", "SteadyRecorder", "EndOffsetProbe",
           "run_steps", "PRODUCER_MARK", "timestamp_histogram"]

#: The producer's main class; the monitor leaves processes running it out of peak memory.
PRODUCER_MARK = LOAD_GENERATOR_MARK
#: Batches at the start of every step left out of the lag trend (the step's first records).
TREND_SKIP_BATCHES = 1
#: Seconds the warm-up step may take to drain (its first batches create the consumers).
WARMUP_DRAIN_SECONDS = 60.0


# ---------------------------------------------------------------------------------------------
# Pure logic


def weighted_percentile(hist: Mapping[float, int], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of a histogram ``{value: count}``, nearest rank.

    The smallest value whose cumulative count reaches ``q`` percent of the total (the
    "nearest-rank" definition: the p50 of 1, 2, 3, 4 is 2). None for an empty histogram.
    """
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q!r}")
    items = sorted((float(v), int(n)) for v, n in hist.items() if n > 0)
    total = sum(n for _, n in items)
    if not total:
        return None
    rank = max(1, -(-total * q // 100))  # ceil(total * q / 100), at least the first value
    seen = 0
    for value, n in items:
        seen += n
        if seen >= rank:
            return value
    return items[-1][0]


def timestamp_histogram(timestamps: Iterable[int]) -> dict[int, int]:
    """Count record timestamps per millisecond (what each task sends to the driver)."""
    return dict(Counter(int(t) for t in timestamps))


def latency_histogram(batches: Iterable[tuple[float, Mapping[int, int]]]) -> Counter:
    """Latency of every record, in whole milliseconds: ``commit_ms - timestamp`` per batch.

    ``batches`` are ``(commit wall time in ms, {record timestamp ms: count})``.
    """
    out: Counter = Counter()
    for commit_ms, hist in batches:
        for ts, n in hist.items():
            out[int(round(commit_ms - int(ts)))] += int(n)
    return out


def lag_at_commits(commits: Sequence[tuple[float, int]],
                   ends: Sequence[tuple[float, int]]) -> list[tuple[float, float]]:
    """Records in the topic but not yet committed, at each commit.

    ``commits`` are ``(commit wall time s, total offsets committed up to)``; ``ends`` the probe's
    ``(wall time s, total end offset)`` samples in time order. The end offset at a commit is
    interpolated linearly between the samples around it (held at the first/last sample
    outside them). Returns ``(commit time, lag)`` for every commit, or nothing without samples.
    """
    if not ends:
        return []
    times = [t for t, _ in ends]
    out = []
    for t, committed in commits:
        i = bisect.bisect_left(times, t)
        if i == 0:
            end = float(ends[0][1])
        elif i == len(ends):
            end = float(ends[-1][1])
        else:
            (t0, e0), (t1, e1) = ends[i - 1], ends[i]
            end = e0 + (e1 - e0) * ((t - t0) / (t1 - t0) if t1 > t0 else 1.0)
        out.append((t, max(0.0, end - committed)))
    return out


def lag_trend(samples: Sequence[tuple[float, float]], rate: float, interval: float,
              expected: float | None = None) -> dict[str, Any]:
    """Did the lag stay stable over the last half of a step?

    ``samples`` are ``(time s, lag records)`` at each commit while the producer was writing.
    A least-squares line is fitted to the samples of the last half (by time); the lag is stable
    when it grew by at most one batch interval's worth of records over that half
    (``slope x half duration <= rate x interval``), i.e. the stream consumed at the produced
    rate. Fewer than half the ``expected`` commits (the step's seconds / interval) is not
    stable either: the batches took over two intervals each. Otherwise fewer than 4 samples in
    the step, or fewer than 2 in the half: ``stable`` is None (not judged).
    """
    out: dict[str, Any] = {"samples": len(samples), "slope_per_s": None, "growth": None,
                           "limit": rate * interval, "stable": None,
                           "final_lag": samples[-1][1] if samples else None}
    if expected is not None and len(samples) < expected / 2.0:
        out.update(stable=False, reason=f"{len(samples)} commits while producing, "
                                        f"fewer than half of {expected:g}")
        return out
    if len(samples) < 4:
        return out
    t_first, t_last = samples[0][0], samples[-1][0]
    half = [(t, v) for t, v in samples if t >= (t_first + t_last) / 2.0]
    if len(half) < 2:
        return out
    mt = sum(t for t, _ in half) / len(half)
    mv = sum(v for _, v in half) / len(half)
    var = sum((t - mt) ** 2 for t, _ in half)
    slope = sum((t - mt) * (v - mv) for t, v in half) / var if var else 0.0
    growth = slope * (half[-1][0] - half[0][0])
    out.update(slope_per_s=slope, growth=growth, stable=growth <= rate * interval)
    return out


_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec .*?([\d.]+) ms avg latency, "
                      r"([\d.]+) ms max latency(?:, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th)?")


def parse_producer_perf(output: str) -> dict[str, Any]:
    """Parse ProducerPerformance's final summary line (the last one with percentiles).

    Returns records, records/s, average and maximum send latency and, when printed, the p50 and
    p99 send latency (ms). Raises ValueError when no summary line is found.
    """
    found = None
    for line in output.splitlines():
        m = _SUMMARY.search(line)
        if m and m.group(5) is not None:
            found = m
    if found is None:
        raise ValueError(f"no ProducerPerformance summary in output: {output[-400:]!r}")
    return {"records": int(found.group(1)), "records_per_s": float(found.group(2)),
            "send_avg_ms": float(found.group(3)), "send_max_ms": float(found.group(4)),
            "send_p50_ms": float(found.group(5)), "send_p99_ms": float(found.group(7))}


def highest_rate_held(steps: Sequence[Mapping[str, Any]]) -> float | None:
    """The highest target rate among the steps whose lag was stable (None if none was)."""
    held = [float(s["rate"]) for s in steps if s.get("stable")]
    return max(held) if held else None


# ---------------------------------------------------------------------------------------------
# Run time: recorder, probe, producer, steps


class SteadyRecorder:
    """Collects the committed batches of a stream, per step; thread-safe.

    The contender calls :meth:`add_batch` from its output (Spark's scheduler or query thread);
    :func:`run_steps` moves it from step to step with :meth:`begin`.
    """

    def __init__(self, start: Mapping[int, int]) -> None:
        self._lock = threading.Lock()
        self.until = {int(p): int(o) for p, o in start.items()}
        self.step: str | None = None
        self.batches: dict[str, list[dict[str, Any]]] = {}

    def begin(self, step: str) -> None:
        with self._lock:
            self.step = step
            self.batches.setdefault(step, [])

    def committed(self) -> int:
        with self._lock:
            return sum(self.until.values())

    def add_batch(self, commit_ms: float, hist: Mapping[int, int], until: Mapping[int, int],
                  records: int, **extra: Any) -> None:
        """One committed batch: commit wall time (ms), timestamp histogram, offsets read up to
        (only the partitions it read need to be present), records, anything else per batch."""
        with self._lock:
            for p, o in until.items():
                self.until[int(p)] = max(self.until.get(int(p), 0), int(o))
            if self.step is None:
                return
            self.batches[self.step].append({"commit_ms": commit_ms, "hist": dict(hist),
                                            "committed": sum(self.until.values()),
                                            "records": int(records), **extra})


class EndOffsetProbe:
    """Sample the topic's total end offset every ``every`` seconds on a thread (kafka-python)."""

    def __init__(self, bootstrap: str, topic: str, partitions: Sequence[int], every: float = 0.2) -> None:
        from kafka import KafkaConsumer, TopicPartition

        self._consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                       group_id=None)
        self._tps = [TopicPartition(topic, int(p)) for p in partitions]
        self.every = every
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="end-offset-probe", daemon=True)

    def latest(self) -> dict[int, int]:
        """End offset per partition, now (only called while the thread is not running)."""
        return {tp.partition: int(o) for tp, o in self._consumer.end_offsets(self._tps).items()}

    def start(self) -> "EndOffsetProbe":
        self._thread.start()
        return self

    def last_total(self) -> int | None:
        return self.samples[-1][1] if self.samples else None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                ends = self._consumer.end_offsets(self._tps)
                self.samples.append((time.time(), sum(int(o) for o in ends.values())))
            except Exception:  # one failed look-up leaves a gap in the samples, no more
                pass
            self._stop.wait(self.every)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # the soak workload reads latest() without the thread
            self._thread.join(timeout=10)
        self._consumer.close()


def _run_producer(bootstrap: str, topic: str, rate: int, seconds: float, value_bytes: int,
                  log: Any) -> tuple[dict[str, Any], float]:
    """Write ``rate x seconds`` records at ``rate``/s; return the parsed summary and its CPU s.

    The child is reaped with ``wait4`` so its CPU can be subtracted from the contender's.
    """
    from dstream_kafka.operate.services.environment import require_java
    from dstream_kafka.operate.services.kafka import kafka_classpath

    argv = [require_java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", kafka_classpath(),
            PRODUCER_MARK, "--topic", topic, "--num-records", str(int(rate * seconds)),
            "--throughput", str(int(rate)), "--record-size", str(value_bytes),
            "--producer-props", f"bootstrap.servers={bootstrap}", "acks=1", "linger.ms=5",
            "compression.type=none",
            "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
    reader.start()
    deadline = time.monotonic() + 3 * seconds + 60
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(timeout=10)
    output = b"".join(chunks).decode(errors="replace")
    if log is not None:
        log.write(output)
        log.flush()
    if proc.returncode != 0:
        raise RuntimeError(f"ProducerPerformance exited {proc.returncode}: {output[-400:]}")
    return parse_producer_perf(output), usage.ru_utime + usage.ru_stime


def _step_result(name: str, rate: int, seconds: float, interval: float, batches: list[dict[str, Any]],
                 window: tuple[float, float], ends: list[tuple[float, int]],
                 producing_seconds: float) -> dict[str, Any]:
    """Latency percentiles, lag at each commit and its trend for one step's batches.

    ``window`` is the producer process's start and end (wall s); ``producing_seconds`` the time it
    actually sent records (its JVM start-up is not part of it).
    """
    hist = latency_histogram((b["commit_ms"], b["hist"]) for b in batches)
    data = [b for b in batches if b["records"]]
    producing = [b for b in data if window[0] <= b["commit_ms"] / 1000.0 <= window[1] + interval]
    lags = lag_at_commits([(b["commit_ms"] / 1000.0, b["committed"]) for b in producing], ends)
    trend = lag_trend(lags[TREND_SKIP_BATCHES:], rate, interval,
                      expected=producing_seconds / interval - TREND_SKIP_BATCHES)
    delays = [b["scheduling_delay_ms"] for b in data if b.get("scheduling_delay_ms") is not None]
    return {"step": name, "rate": rate, "seconds": seconds, "records": sum(b["records"] for b in batches),
            "batches": len(data), "latency_ms": {f"p{q}": weighted_percentile(hist, q) for q in (50, 90, 99)}
            | {"max": max(hist) if hist else None},
            "lag": [[round(t - window[0], 3), v] for t, v in lags], "trend": trend,
            "stable": trend["stable"], "lag_seconds_final": (trend["final_lag"] / rate
                                                              if trend["final_lag"] is not None else None),
            "scheduling_delay_ms_max": max(delays) if delays else None,
            "creations": sum(int(b.get("creations") or 0) for b in data),
            "seeks": sum(int(b.get("seeks") or 0) for b in data)}


def run_steps(bootstrap: str, topic: str, rates: Sequence[int], seconds: float, interval: float,
              value_bytes: int, recorder: SteadyRecorder, probe: EndOffsetProbe,
              cpu: Callable[[], float], warmup_seconds: float = 4.0, log: Any = None) -> list[dict[str, Any]]:
    """Run a warm-up step and then every rate step against a started stream.

    Each step: the producer writes for ``seconds``; then the stream gets up to
    ``max(10, seconds)`` s (the warm-up step: :data:`WARMUP_DRAIN_SECONDS`, as it includes
    consumer creation and the first jobs) to commit everything produced (``drained``). A step
    that does not drain leaves a backlog that would be read by the next step, so the remaining
    steps are skipped (recorded with ``skipped``). Returns one dict per step, the warm-up step
    first (``warmup: True``).
    """
    plan = [("warm-up", int(rates[0]), warmup_seconds, True)] + \
        [(f"{int(r)}/s", int(r), seconds, False) for r in rates]
    results: list[dict[str, Any]] = []
    skip_reason = None
    for name, rate, step_seconds, warm in plan:
        if skip_reason:
            results.append({"step": name, "rate": rate, "skipped": skip_reason, "stable": None})
            continue
        recorder.begin(name)
        cpu0 = cpu()
        started = time.time()
        producer, producer_cpu = _run_producer(bootstrap, topic, rate, step_seconds, value_bytes, log)
        stopped = time.time()
        drain_limit = WARMUP_DRAIN_SECONDS if warm else max(10.0, step_seconds)
        drain_deadline = time.monotonic() + drain_limit
        time.sleep(probe.every * 2)  # the probe's next sample includes the producer's last write
        target = probe.last_total() or 0
        while recorder.committed() < target and time.monotonic() < drain_deadline:
            time.sleep(0.1)
        drained = recorder.committed() >= target
        drain_s = time.time() - stopped
        time.sleep(interval)  # any empty batch still in flight lands in this step
        step_cpu = cpu() - cpu0 - producer_cpu
        # Every batch the stream completed in the step, empty ones included: none at all means
        # the stream was stuck (planning or the first job), not merely slow.
        completed = len(recorder.batches[name])
        result = _step_result(name, rate, step_seconds, interval, recorder.batches[name],
                              (started, stopped), [s for s in list(probe.samples) if s[0] >= started - 1],
                              producer["records"] / producer["records_per_s"]
                              if producer.get("records_per_s") else stopped - started)
        result.update(warmup=warm, producer=producer, drained=drained, drain_seconds=drain_s,
                      completed_batches=completed,
                      cpu_seconds=step_cpu,
                      cpu_s_per_million=step_cpu / result["records"] * 1e6 if result["records"] else None)
        if not drained:
            result["stable"] = False
            skip_reason = (f"the {name} step did not drain its backlog within {drain_limit:g} s "
                           f"({completed} batches completed in the step)")
        results.append(result)
    return results
