"""A thin adapter for the dstream_kafka contenders: drains, empty-batch overhead, steady rate.

With :mod:`benchmarks.adapter_stores` (the offset stores of the exactly-once workload) it is the
only code that touches dstream_kafka's API, so an API rename breaks these files, not the harness.
Functions run in the contender's child process (see :mod:`benchmarks.runner`).

Per-task work returns ``(records, checksum, pid, cache_stats, ...)`` so the driver learns, with no
extra job, how many consumers each Python worker created and how often it seeked: the consumer
cache counters (:func:`dstream_kafka.read.consumer_cache.stats`) live in each worker process.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from typing import Any, Callable, Iterable, Iterator

__all__ = ["drain_rdd", "stream_drain", "partition_worker", "kafka_params", "create_direct_stream",
           "CacheTracker", "stream_overhead", "stream_steady", "job_phases", "work_ms",
           "OVERHEAD_OUTPUTS", "overhead_cap_seconds"]


def kafka_params(bootstrap: str, group: str) -> dict[str, Any]:
    """Kafka parameters of every dstream_kafka contender (byte values, no auto commit)."""
    return {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest"}


def partition_worker(kind: str) -> Callable[[Iterable[Any]], Iterator[tuple]]:
    """Return the per-partition function for workload ``kind`` (``drain`` or ``json``).

    ``drain`` counts records and value bytes; ``json`` runs ``json.loads`` on each value and adds
    up fields ``a`` and ``b``. Both yield one ``(records, checksum, pid, cache_stats)`` tuple.
    """
    def drain(records: Iterable[Any]) -> Iterator[tuple]:
        n = total = 0
        for rec in records:
            n += 1
            total += len(rec.value)
        yield n, total, os.getpid(), _cache_stats()

    def json_sum(records: Iterable[Any]) -> Iterator[tuple]:
        n = total = 0
        loads = json.loads
        for rec in records:
            doc = loads(rec.value)
            n += 1
            total += doc["a"] + doc["b"]
        yield n, total, os.getpid(), _cache_stats()

    return json_sum if kind == "json" else drain


def _cache_stats() -> dict[str, Any]:
    """This worker's consumer cache counters, its TCP connections and its resident memory.

    Workers talk to the JVM over a Unix socket (the low-overhead settings), so every
    established TCP connection of a worker process is a Kafka client's.
    """
    try:
        from dstream_kafka.read.consumer_cache import stats

        out = stats()
    except Exception:  # an older or newer cache without stats(): report nothing, not fail
        return {}
    try:
        import psutil

        me = psutil.Process()
        conns = me.net_connections("tcp") if hasattr(me, "net_connections") else me.connections("tcp")
        out["tcp"] = sum(1 for c in conns if c.status == psutil.CONN_ESTABLISHED)
        out["rss_mb"] = me.memory_info().rss / 2**20
    except Exception:  # psutil missing or refused: the counters still count
        pass
    return out


class CacheTracker:
    """Turn per-worker cumulative cache counters into per-batch deltas."""

    KEYS = ("creations", "seeks", "misses", "hits", "polls", "prepositions")

    def __init__(self) -> None:
        self._last: dict[int, dict[str, int]] = {}
        self.per_batch: list[dict[str, int]] = []

    def add_batch(self, parts: list[tuple]) -> dict[str, int]:
        latest: dict[int, dict[str, int]] = {}
        for part in parts:
            pid, st = part[2], part[3]
            prev = latest.get(pid)
            # Later snapshots of the same worker have larger counters; keep the largest.
            if prev is None or st.get("polls", 0) >= prev.get("polls", 0):
                latest[pid] = st
        delta = dict.fromkeys(self.KEYS, 0)
        for pid, st in latest.items():
            before = self._last.get(pid, {})
            for key in self.KEYS:
                delta[key] += int(st.get(key, 0)) - int(before.get(key, 0))
            self._last[pid] = st
        self.per_batch.append(delta)
        return delta

    def resources(self) -> dict[str, Any]:
        """The workers' latest state, summed over every worker seen: consumers in their caches,
        established TCP connections (the Kafka clients') and resident memory (MiB).

        A worker's figures are those of its latest task; workers of one executor (local mode:
        the only one) add up to the executor's.
        """
        def total(key: str) -> float | None:
            vals = [st[key] for st in self._last.values() if st.get(key) is not None]
            return sum(vals) if vals else None

        return {"workers": len(self._last), "consumers_cached": total("cached"),
                "tcp_connections": total("tcp"), "workers_rss_mb": total("rss_mb")}

    def summary(self, since: int = 0) -> dict[str, Any]:
        """First batch, and the steady state after it (totals and per-batch maxima), and the
        workers' :meth:`resources` at the end.

        ``since`` starts the summary at that batch: one tracker shared by several streams of a
        process (the workers' counters are cumulative) summarizes each stream's own batches.
        """
        batches = self.per_batch[since:]
        first = batches[0] if batches else {}
        rest = batches[1:]
        return {
            "resources": self.resources(),
            "workers_seen": len(self._last),
            "first_batch": first,
            "after_first_total": {k: sum(b[k] for b in rest) for k in self.KEYS},
            "after_first_max_per_batch": {k: max((b[k] for b in rest), default=0) for k in self.KEYS},
            "per_batch": {k: [b[k] for b in batches] for k in ("creations", "seeks")},
            "batches": len(batches),
        }


def drain_rdd(sc: Any, bootstrap: str, topic: str, ends: dict[int, int], kind: str) -> dict[str, Any]:
    """Read ``[0, end)`` of every partition with ``KafkaUtils.createRDD`` and apply ``kind``."""
    from dstream_kafka.kafka_utils import KafkaUtils
    from dstream_kafka.offsets import OffsetRange

    ranges = [OffsetRange.create(topic, p, 0, e) for p, e in sorted(ends.items())]
    rdd = KafkaUtils.createRDD(sc, kafka_params(bootstrap, "bench-dk-rdd"), ranges)
    # KafkaRDD.count() sums the offset ranges without reading (as Spark's does): walk the records.
    parts = rdd.mapPartitions(partition_worker(kind)).collect()
    tracker = CacheTracker()
    tracker.add_batch(parts)
    return {"records": sum(p[0] for p in parts), "checksum": sum(p[1] for p in parts),
            "cache": tracker.summary()}


def create_direct_stream(ssc: Any, bootstrap: str, topic: str, ends: dict[int, int],
                         group: str, offset_store: Any = None,
                         start: dict[int, int] | None = None) -> Any:
    """Create a direct stream over the partitions of ``ends``, starting at ``start`` (default 0)."""
    from dstream_kafka.plan.consumer_strategy import ConsumerStrategies
    from dstream_kafka.offsets import TopicPartition
    from dstream_kafka.read.placement import LocationStrategies

    tps = [TopicPartition(topic, p) for p in sorted(ends)]
    strategy = ConsumerStrategies.Assign(tps, kafka_params(bootstrap, group),
                                        {tp: (start or {}).get(tp.partition, 0) for tp in tps})
    try:
        from dstream_kafka.kafka_utils import KafkaUtils

        create = KafkaUtils.createDirectStream
    except AttributeError:  # streaming work not wired into KafkaUtils yet
        from dstream_kafka.plan.direct_stream import DirectKafkaInputDStream

        create = DirectKafkaInputDStream
    if offset_store is not None:
        return create(ssc, LocationStrategies.PreferConsistent, strategy, offsetStore=offset_store)
    return create(ssc, LocationStrategies.PreferConsistent, strategy)


def stream_drain(sc: Any, bootstrap: str, topic: str, ends: dict[int, int], kind: str,
                 batch_seconds: float, timeout: float = 1800.0, *,
                 worker: Callable[[Iterable[Any]], Iterator[tuple]] | None = None,
                 on_parts: Callable[[int, list[tuple]], None] | None = None) -> dict[str, Any]:
    """Stream every record present now through ``foreachRDD`` and time it.

    The batch size is bounded by ``spark.streaming.kafka.maxRatePerPartition`` in the
    SparkConf (set by the caller). The clock starts at ``ssc.start()`` and stops when the
    batch that brings the count to the expected total has finished its output. ``worker``
    replaces :func:`partition_worker` (its tuples start the same way); ``on_parts`` receives
    every non-empty batch's index and tuples.
    """
    from dstream_kafka.streaming.context import StreamingContext

    expected = sum(ends.values())
    ssc = StreamingContext(sc, batch_seconds)
    # A group of its own: no committed offsets or coordinator state left by an earlier run.
    group = f"bench-dk-stream-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    stream = create_direct_stream(ssc, bootstrap, topic, ends, group)
    tracker = CacheTracker()
    state = {"records": 0, "checksum": 0, "nonempty": 0, "done_at": None}
    done = threading.Event()
    walk = worker or partition_worker(kind)

    def per_batch(rdd: Any) -> None:
        if done.is_set() or rdd.isEmpty():
            return
        parts = rdd.mapPartitions(walk).collect()
        tracker.add_batch(parts)
        if on_parts is not None:
            on_parts(state["nonempty"], parts)
        state["records"] += sum(p[0] for p in parts)
        state["checksum"] += sum(p[1] for p in parts)
        state["nonempty"] += 1
        if state["records"] >= expected:
            state["done_at"] = time.perf_counter()
            done.set()

    stream.foreachRDD(per_batch)
    t0 = time.perf_counter()
    ssc.start()
    finished = done.wait(timeout)
    seconds = (state["done_at"] or time.perf_counter()) - t0
    batch_infos = [_batch_info(b) for b in list(getattr(ssc, "completed_batches", []))]
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
    if not finished:
        raise TimeoutError(f"stream drain read {state['records']} of {expected} records in {timeout}s")
    return {"records": state["records"], "checksum": state["checksum"], "seconds": seconds,
            "batches": state["nonempty"], "cache": tracker.summary(), "batch_infos": batch_infos}


def _batch_info(info: Any) -> dict[str, Any]:
    try:
        return {"batch_time": info.batch_time, "records": info.num_records,
                "scheduling_delay_ms": info.scheduling_delay,
                "processing_delay_ms": info.processing_delay, "total_delay_ms": info.total_delay}
    except AttributeError:
        return {}


# ---------------------------------------------------------------------------------------------
# Workload 3: empty-batch overhead


#: Output operations of the overhead workload (no offset store in any of them).
OVERHEAD_OUTPUTS = {
    "count": "foreachRDD: rdd.count() (summed from the offset ranges, no Spark job) + commitAsync",
    "job": "foreachRDD: rdd.mapPartitions(walk).collect() (a Spark job over the empty partitions) "
           "+ commitAsync",
    "job-nocommit": "the same Spark job; no commitAsync, no offset store",
}


def _timed_walk(records: Iterable[Any]) -> Iterator[tuple]:
    """Walk a partition, timing the read and the (trivial) user function with the wall clock.

    Yields ``(records, value_bytes, pid, cache_stats, started, read_done, ended)``; the three
    times are ``time.time()`` seconds, comparable with the driver's clock on one machine.
    """
    started = time.time()
    rows = list(records)
    read_done = time.time()
    n = total = 0
    for rec in rows:
        n += 1
        total += len(rec.value)
    ended = time.time()
    yield n, total, os.getpid(), _cache_stats(), started, read_done, ended


def job_phases(submitted: float, returned: float, parts: list[tuple]) -> dict[str, float]:
    """Split one Spark job's wall time into launch, tasks and return (milliseconds).

    ``submitted``/``returned`` are the driver's ``time.time()`` around ``collect()``; ``parts``
    are :func:`_timed_walk` tuples. ``job_launch`` runs from submission to the first task body,
    ``job_tasks`` from the first task body to the last one's end (both waves of tasks on 2 cores),
    ``job_return`` from there to ``collect()`` returning. ``task_read`` and ``task_fn`` add up
    the in-task read and user-function time over all tasks.
    """
    out = {"job": (returned - submitted) * 1000.0}
    if not parts:
        return out
    first = min(p[4] for p in parts)
    last = max(p[6] for p in parts)
    out.update(job_launch=(first - submitted) * 1000.0, job_tasks=(last - first) * 1000.0,
               job_return=(returned - last) * 1000.0,
               task_read=sum(p[5] - p[4] for p in parts) * 1000.0,
               task_fn=sum(p[6] - p[5] for p in parts) * 1000.0)
    return out


class _PlanTimer:
    """Split ``planMs`` by timing the stream's ``latestOffsets`` and ``_make_rdd`` per batch.

    Wraps the methods on this one stream instance (measurement from outside, no change to
    dstream_kafka); ``compute(batch_time)`` marks which batch the inner calls belong to. When a
    method is missing (renamed internals) its phase is simply absent.
    """

    PHASES = {"latestOffsets": "plan_offsets", "_make_rdd": "plan_rdd"}

    def __init__(self, stream: Any) -> None:
        self.times: dict[int, dict[str, float]] = {}
        self._current: int | None = None
        compute = getattr(stream, "compute", None)
        if compute is None:
            return

        def marked(batch_time: int, *args: Any, **kwargs: Any) -> Any:
            self._current = int(batch_time)
            try:
                return compute(batch_time, *args, **kwargs)
            finally:
                self._current = None

        stream.compute = marked
        for name, phase in self.PHASES.items():
            fn = getattr(stream, name, None)
            if fn is not None:
                setattr(stream, name, self._wrap(fn, phase))

    def _wrap(self, fn: Callable[..., Any], phase: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                if self._current is not None:
                    entry = self.times.setdefault(self._current, {})
                    entry[phase] = entry.get(phase, 0.0) + (time.perf_counter() - t0) * 1000.0
        return timed

    def pop(self, batch_time: int) -> dict[str, float]:
        return self.times.pop(int(batch_time), {})


def work_ms(row: dict[str, Any]) -> float | None:
    """The batch's own work, without waiting: plan + output + commit (ms; None if unknown)."""
    parts = [row.get(k) for k in ("plan", "output")]
    if None in parts:
        return None
    return float(sum(parts)) + float(row.get("commit") or 0.0)


def _batch_end_times(ssc: Any) -> dict[int, int]:
    ends = {}
    for info in list(getattr(ssc, "completed_batches", [])):
        end = getattr(info, "processing_end_time", None)
        if end is not None:
            ends[int(info.batch_time)] = int(end)
    return ends


#: A configuration that cannot keep up stops after this many measured batches, at the cap.
MIN_CAPPED_BATCHES = 3


def overhead_cap_seconds(batch_seconds: float, planned_batches: int) -> float:
    """How long one overhead configuration may run before a backlogged stream is cut short:
    twice its planned length, at least 5 s. More batches of a stream that fell behind only
    measure a longer queue."""
    return max(5.0, 2.0 * planned_batches * batch_seconds)


def stream_overhead(sc: Any, bootstrap: str, topic: str, partitions: list[int], batch_seconds: float,
                    output: str, batches: int, warmup: int = 2, timeout: float = 300.0, *,
                    make_stream: Callable[[Any, str], Any] | None = None,
                    probe: Callable[[], dict[str, float]] | None = None) -> dict[str, Any]:
    """Run a direct stream over an idle topic for ``warmup + batches`` batches; time every phase.

    Each batch yields a row of milliseconds: ``plan`` (BatchProgress.planMs: latest offsets, rate
    limits, RDD creation), ``queue`` (schedulingDelay), ``output`` (processingDelay: the output
    operation's wall time, 1 ms resolution), the job split of :func:`job_phases` for ``job``
    outputs, ``commit`` (commitMs: commitAsync's Kafka commit), ``output_end`` (processing end
    minus batch time) and ``total``: the wall clock when the batch's progress is reported (after
    its commit) minus the batch time. ``other`` is ``total - plan - queue - output - commit``:
    the timer's wake-up lag, job generation and thread hand-offs; ``work`` = plan + output +
    commit, the batch's own cost without waiting. ``plan_offsets``/``plan_rdd`` split the plan
    (:class:`_PlanTimer`). A stream that falls behind stops once :func:`overhead_cap_seconds`
    have passed and :data:`MIN_CAPPED_BATCHES` batches are measured (``capped``).

    ``make_stream(ssc, group)`` replaces the default stream (``Assign`` of ``partitions`` of
    ``topic`` from offset 0); ``probe()`` adds its figures to every batch's row.
    """
    from dstream_kafka.streaming import datetime_to_ms
    from dstream_kafka.streaming.context import StreamingContext

    if output not in OVERHEAD_OUTPUTS:
        raise ValueError(f"unknown output {output!r}; choose from {', '.join(OVERHEAD_OUTPUTS)}")
    ssc = StreamingContext(sc, batch_seconds)
    group = f"bench-overhead-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    stream = (make_stream(ssc, group) if make_stream is not None
              else create_direct_stream(ssc, bootstrap, topic, {p: 0 for p in partitions}, group))
    plan_timer = _PlanTimer(stream)
    tracker = CacheTracker()
    jobs: dict[int, dict[str, float]] = {}
    rows: list[dict[str, Any]] = []
    done, enough = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def per_batch(batch_time: Any, rdd: Any) -> None:
        try:
            ms = datetime_to_ms(batch_time)
            t0 = time.time()
            if output == "count":
                rdd.count()
                phases = {"job": (time.time() - t0) * 1000.0}
            else:
                parts = rdd.mapPartitions(_timed_walk).collect()
                phases = job_phases(t0, time.time(), parts)
                tracker.add_batch(parts)
            if output != "job-nocommit":
                c0 = time.time()
                stream.commitAsync(rdd.offsetRanges())
                phases["commit_call"] = (time.time() - c0) * 1000.0
            jobs[ms] = phases
        except BaseException as exc:  # reported by the caller, not swallowed by the scheduler
            errors.append(exc)
            done.set()
            enough.set()
            raise

    def on_progress(progress: Any) -> None:
        now_ms = time.time() * 1000.0
        row = {"batch_time": progress.batchTime, "records": progress.numRecords,
               "plan": progress.planMs, "queue": progress.schedulingDelay,
               "output": progress.processingDelay, "commit": progress.commitMs,
               "total": now_ms - progress.batchTime, **jobs.pop(progress.batchTime, {}),
               **plan_timer.pop(progress.batchTime)}
        known = [row[k] for k in ("plan", "queue", "output", "commit")]
        if None not in known:
            row["other"] = row["total"] - sum(known)
        row["work"] = work_ms(row)
        if probe is not None:
            row.update(probe())
        rows.append(row)
        if len(rows) >= warmup + MIN_CAPPED_BATCHES:
            enough.set()
        if len(rows) >= warmup + batches:
            done.set()

    stream.foreachRDD(per_batch)
    stream.addProgressListener(on_progress)
    ssc.start()
    cap = overhead_cap_seconds(batch_seconds, warmup + batches)
    finished = done.wait(cap)
    if not finished:  # fell behind: stop as soon as a few batches are measured
        enough.wait(max(0.0, timeout - cap))
        finished = done.is_set()
    capped = not finished and len(rows) >= warmup + MIN_CAPPED_BATCHES
    ends = _batch_end_times(ssc)
    ssc.stop(stopSparkContext=False, stopGraceFully=False)
    if errors:
        raise errors[0]
    if not finished and not capped:
        raise TimeoutError(f"overhead at {batch_seconds}s/{output}: {len(rows)} of "
                           f"{warmup + batches} batches in {timeout}s")
    for row in rows:
        end = ends.get(int(row["batch_time"]))
        if end is not None:
            row["output_end"] = end - row["batch_time"]
    rows = rows[:warmup + batches]
    return {"records": sum(r["records"] for r in rows), "rows": rows[warmup:],
            "warmup_rows": rows[:warmup], "cache": tracker.summary(), "capped": capped}


# ---------------------------------------------------------------------------------------------
# Workload 4: steady rate, end-to-end latency


def _timestamps(records: Iterable[Any]) -> Iterator[tuple]:
    """Count a partition's records per timestamp (ms): ``(records, 0, pid, cache_stats, hist)``."""
    hist: dict[int, int] = {}
    n = 0
    for rec in records:
        n += 1
        hist[rec.timestamp] = hist.get(rec.timestamp, 0) + 1
    yield n, 0, os.getpid(), _cache_stats(), hist


def stream_steady(sc: Any, bootstrap: str, topic: str, partitions: list[int], opts: dict[str, Any],
                  log: Any = None) -> dict[str, Any]:
    """A direct stream from the latest offsets through the rate steps of :mod:`benchmarks.steady`.

    Every batch with records runs one Spark job (timestamps per ms, the consumer cache counters)
    and ``commitAsync``; its commit time is the wall clock when its progress is reported, after
    the commit. Empty batches run no job. Returns ``{"steps": [...], "cache": ...}``.
    """
    from benchmarks.monitor import tree_cpu_seconds
    from benchmarks.steady import EndOffsetProbe, SteadyRecorder, run_steps
    from dstream_kafka.streaming import datetime_to_ms
    from dstream_kafka.streaming.context import StreamingContext

    interval = float(opts["steady_interval"])
    probe = EndOffsetProbe(bootstrap, topic, partitions)
    start = probe.latest()
    recorder = SteadyRecorder(start)
    ssc = StreamingContext(sc, interval)
    group = f"bench-steady-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    stream = create_direct_stream(ssc, bootstrap, topic, start, group, start=start)
    tracker = CacheTracker()
    outputs: dict[int, dict[str, Any]] = {}
    errors: list[BaseException] = []
    stopping = threading.Event()

    def per_batch(batch_time: Any, rdd: Any) -> None:
        try:
            ranges = rdd.offsetRanges()
            if sum(r.count() for r in ranges):
                parts = rdd.mapPartitions(_timestamps).collect()
                hist: dict[int, int] = {}
                for part in parts:
                    for ts, n in part[4].items():
                        hist[ts] = hist.get(ts, 0) + n
                delta = tracker.add_batch(parts)
                outputs[datetime_to_ms(batch_time)] = {"hist": hist, "creations": delta["creations"],
                                                       "seeks": delta["seeks"]}
            stream.commitAsync(ranges)
        except BaseException as exc:  # reported by the caller, not swallowed by the scheduler
            if not stopping.is_set():  # ssc.stop() may cut short the batch in flight
                errors.append(exc)
            raise

    def on_progress(progress: Any) -> None:
        now_ms = time.time() * 1000.0
        out = outputs.pop(progress.batchTime, {"hist": {}})
        recorder.add_batch(now_ms, out.pop("hist"), {r.partition: r.untilOffset for r in progress.ranges},
                           progress.numRecords, scheduling_delay_ms=progress.schedulingDelay, **out)

    stream.foreachRDD(per_batch)
    stream.addProgressListener(on_progress)
    ssc.start()
    try:
        steps = run_steps(bootstrap, topic, opts["steady_rates"], opts["steady_seconds"], interval,
                          opts["value_bytes"], recorder, probe.start(), tree_cpu_seconds,
                          opts.get("steady_warmup_seconds", 4.0), log)
    finally:
        stopping.set()
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
        probe.stop()
    if errors:
        raise errors[0]
    return {"steps": steps, "cache": tracker.summary()}
