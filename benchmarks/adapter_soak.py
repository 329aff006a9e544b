"""The soak workload (9): steady input for a long time through a stream with the PostgreSQL store.

Part of the adapter (:mod:`benchmarks.adapter` holds the shared helpers, :mod:`benchmarks.adapter_stores`
the offset stores): with them, the only modules that touch dstream_kafka's API. The pure
functions (:func:`soak_option_errors`, :func:`offset_runs`, :func:`check_offsets`,
:func:`verify_exactly_once`, :func:`cached_consumers`, :func:`split_password`) are unit tested;
:func:`run_soak` runs in the contender's child process.

One ``dk-stream`` direct stream (local[2]) reads an empty topic from its latest offsets while
Kafka's ProducerPerformance (:func:`benchmarks.steady._run_producer`) writes ``--soak-rate``
records/s for ``--soak-minutes``. Every batch runs one Spark job whose tasks return the runs of
consecutive offsets they read, and writes them, one row per run ``(batch_time_ms, part,
from_offset, until_offset)``, to a sink table in ``stream.transaction(time)``: the rows and the
batch's offsets commit in one PostgreSQL transaction (``OffsetStores.postgres``, as the
exactly-once workload's ``postgres-tx``). At the end every offset of every partition in
``[start, end)`` must be in exactly one sink row (:func:`check_offsets`).

Every ``--soak-sample-seconds`` a thread samples the contender's process tree
(:func:`benchmarks.monitor.tree_roles`): resident memory, open file descriptors and threads of the
driver's Python process, its JVM and the Python workers; TCP connections to the broker and to
PostgreSQL; consumers cached in the workers (``consumer_cache.stats()['cached']`` as the tasks
last reported it, summed over live worker processes); and the lag (records in the topic not yet
committed). Sample and batch times are seconds since the producer started.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping, Sequence

from benchmarks.adapter import CacheTracker, _cache_stats, create_direct_stream

__all__ = ["soak_option_errors", "offset_runs", "check_offsets", "verify_exactly_once",
           "cached_consumers", "split_password", "run_soak", "stream_soak", "SINK_DDL",
           "MIN_JUDGED_SAMPLES"]

#: The sink table: one row per run of consecutive offsets a task read in a batch.
SINK_DDL = ("CREATE TABLE {t} (batch_time_ms BIGINT NOT NULL, part INTEGER NOT NULL, "
            "from_offset BIGINT NOT NULL, until_offset BIGINT NOT NULL, "
            "PRIMARY KEY (batch_time_ms, part, from_offset))")
#: Samples needed after the warm-up: the growth checks compare thirds of at least 2 samples.
MIN_JUDGED_SAMPLES = 6
#: Seconds the stream may take, after the producer stopped, to commit everything produced.
DRAIN_SECONDS = 60.0
#: How many offset problems (duplicates, gaps) :func:`check_offsets` lists.
MAX_EXAMPLES = 10


# ---------------------------------------------------------------------------------------------
# Pure logic


def soak_option_errors(minutes: float, rate: int, interval: float, warmup_minutes: float,
                       sample_seconds: float) -> list[str]:
    """The problems of a set of soak options, one sentence each (empty when they are valid)."""
    errors = []
    if not minutes > 0:
        errors.append(f"--soak-minutes must be positive, got {minutes:g}")
    if rate < 1:
        errors.append(f"--soak-rate must be at least 1 record/s, got {rate}")
    if not interval > 0:
        errors.append(f"--soak-interval must be positive seconds, got {interval:g}")
    if not sample_seconds > 0:
        errors.append(f"--soak-sample-seconds must be positive, got {sample_seconds:g}")
    if not 0 <= warmup_minutes < minutes:
        errors.append(f"--soak-warmup-minutes must be at least 0 and below --soak-minutes "
                      f"({minutes:g}), got {warmup_minutes:g}")
    elif sample_seconds > 0 and (minutes - warmup_minutes) * 60.0 < MIN_JUDGED_SAMPLES * sample_seconds:
        errors.append(f"the {(minutes - warmup_minutes) * 60.0:g} s after the warm-up hold fewer than "
                      f"{MIN_JUDGED_SAMPLES} samples of --soak-sample-seconds {sample_seconds:g}: "
                      "lengthen --soak-minutes or shorten the warm-up or the sample interval")
    return errors


def offset_runs(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Split offsets, in the order read, into runs of consecutive offsets ``[from, until)``.

    ``[5, 6, 7, 9, 9]`` gives ``[(5, 8), (9, 10), (9, 10)]``: a gap or a repeat starts a new run,
    so the runs cover exactly the offsets read, each as often as it was read.
    """
    runs: list[tuple[int, int]] = []
    start = prev = -1
    for i, raw in enumerate(offsets):
        off = int(raw)
        if i and off != prev + 1:
            runs.append((start, prev + 1))
            start = off
        elif not i:
            start = off
        prev = off
    if start >= 0:
        runs.append((start, prev + 1))
    return runs


def check_offsets(start: Mapping[int, int], end: Mapping[int, int],
                  rows: Iterable[tuple[int, int, int]]) -> dict[str, Any]:
    """Is every offset of every partition in ``[start, end)`` in exactly one sink row?

    ``rows`` are ``(partition, from_offset, until_offset)``. Returns ``stored`` (offsets the rows
    cover, repeats counted), ``expected`` (``sum(end - start)``), ``duplicates`` (extra copies of
    offsets stored more than once), ``missing`` (offsets of ``[start, end)`` in no row),
    ``outside`` (offsets stored outside ``[start, end)`` or for an unknown partition),
    ``examples`` (the first problems, as text) and ``ok`` (no duplicate, missing or outside).
    """
    by_part: dict[int, list[tuple[int, int]]] = {}
    for part, lo, hi in rows:
        by_part.setdefault(int(part), []).append((int(lo), int(hi)))
    stored = duplicates = missing = outside = 0
    examples: list[str] = []

    def note(text: str) -> None:
        if len(examples) < MAX_EXAMPLES:
            examples.append(text)

    for part in sorted(set(start) | set(end) | set(by_part)):
        runs = sorted(by_part.get(part, []))
        stored += sum(hi - lo for lo, hi in runs)
        if part not in start or part not in end:
            outside += sum(hi - lo for lo, hi in runs)
            note(f"partition {part}: {len(runs)} row(s) of a partition outside the topic's offsets")
            continue
        lo_bound, hi_bound = int(start[part]), int(end[part])
        cursor = lo_bound  # everything below it is covered (or outside)
        for lo, hi in runs:
            if lo < lo_bound or hi > hi_bound:
                out = max(0, min(hi, lo_bound) - lo) + max(0, hi - max(lo, hi_bound))
                outside += out
                note(f"partition {part}: [{lo}, {hi}) reaches outside [{lo_bound}, {hi_bound})")
                lo, hi = max(lo, lo_bound), min(hi, hi_bound)
                if lo >= hi:
                    continue
            if lo > cursor:
                missing += lo - cursor
                note(f"partition {part}: offsets [{cursor}, {lo}) missing")
            elif lo < cursor:
                dup = min(hi, cursor) - lo
                duplicates += dup
                note(f"partition {part}: offsets [{lo}, {lo + dup}) stored more than once")
            cursor = max(cursor, hi)
        if cursor < hi_bound:
            missing += hi_bound - cursor
            note(f"partition {part}: offsets [{cursor}, {hi_bound}) missing")
    expected = sum(max(0, int(end[p]) - int(start.get(p, end[p]))) for p in end)
    return {"stored": stored, "expected": expected, "duplicates": duplicates, "missing": missing,
            "outside": outside, "examples": examples,
            "ok": duplicates == 0 and missing == 0 and outside == 0}


def verify_exactly_once(start: Mapping[int, int], end: Mapping[int, int],
                        rows: Iterable[tuple[int, int, int]], produced: int | None,
                        committed: Mapping[int, int]) -> dict[str, Any]:
    """The soak's end check: :func:`check_offsets`, the sink total equals the records the producer
    wrote, and the store's committed offsets equal the end offsets.

    ``exactly_once`` is true only when all three hold; ``problems`` says which did not.
    """
    out = check_offsets(start, end, rows)
    problems = []
    if not out["ok"]:
        problems.append(f"{out['duplicates']} duplicate, {out['missing']} missing, "
                        f"{out['outside']} outside offsets in the sink")
    if produced is None:
        problems.append("the producer's record count is unknown")
    elif out["stored"] != produced:
        problems.append(f"the sink holds {out['stored']} records, the producer wrote {produced}")
    behind = {int(p): (int(committed.get(p, -1)), int(e)) for p, e in end.items()
              if int(committed.get(p, -1)) != int(e)}
    if behind:
        problems.append("committed offsets differ from the end offsets: " + ", ".join(
            f"partition {p}: {c if c >= 0 else 'none'} != {e}" for p, (c, e) in sorted(behind.items())))
    out.update(produced=produced, committed={int(p): int(o) for p, o in committed.items()},
               end={int(p): int(o) for p, o in end.items()},
               start={int(p): int(o) for p, o in start.items()},
               committed_equals_end=not behind, problems=problems, exactly_once=not problems)
    return out


def cached_consumers(latest: Mapping[int, Mapping[str, Any]], alive: Collection[int]) -> int:
    """Consumers cached in the Python workers: the ``cached`` count each live worker (pid) last
    reported from a task, summed. A worker that exited took its consumers with it."""
    return sum(int(stats.get("cached") or 0) for pid, stats in latest.items() if pid in alive)


def split_password(services: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Take the PostgreSQL password out of the services' connection parameters.

    Returns the parameters without it (safe to write to a spec file, results or logs) and the
    environment that carries it to a child process (``PGPASSWORD``, which libpq reads), empty
    when there is no password.
    """
    public = dict(services)
    env: dict[str, str] = {}
    params = public.get("postgres")
    if isinstance(params, Mapping) and "password" in params:
        params = dict(params)
        env["PGPASSWORD"] = str(params.pop("password"))
        public["postgres"] = params
    return public, env


# ---------------------------------------------------------------------------------------------
# Run time


def _sink_task(index: int, records: Iterable[Any]) -> Iterator[tuple]:
    """One partition of a batch: ``(records, 0, pid, cache_stats, index, offset runs)``."""
    n = 0

    def offsets() -> Iterator[int]:
        nonlocal n
        for rec in records:
            n += 1
            yield rec.offset

    runs = offset_runs(offsets())
    yield n, 0, os.getpid(), _cache_stats(), index, runs


class _Sampler:
    """Call ``sample()`` every ``every`` seconds on a thread and keep what it returns."""

    def __init__(self, every: float, sample: Callable[[], dict[str, Any]]) -> None:
        self.every = every
        self._sample = sample
        self.samples: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-sampler", daemon=True)

    def take(self) -> None:
        try:
            self.samples.append(self._sample())
        except Exception as exc:  # one failed sample leaves a gap, no more
            self.errors.append(f"{type(exc).__name__}: {exc}")

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.take()
            self._stop.wait(max(0.0, self.every - (time.monotonic() - started)))

    def start(self) -> "_Sampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _ports(bootstrap: str) -> set[int]:
    return {int(hp.rsplit(":", 1)[1]) for hp in bootstrap.split(",") if ":" in hp}


def _tcp_to(procs: Sequence[Any], ports: Collection[int]) -> int:
    """Established or opening TCP connections of ``procs`` to any of ``ports``."""
    import psutil

    n = 0
    for proc in procs:
        try:
            conns = proc.net_connections(kind="tcp")
        except psutil.Error:
            continue
        n += sum(1 for c in conns if c.raddr and c.raddr.port in ports)
    return n


def _kill_producers() -> None:
    """Stop a producer JVM this process started (the soak is being cut short)."""
    import psutil

    from benchmarks.monitor import LOAD_GENERATOR_MARK

    for child in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if any(LOAD_GENERATOR_MARK in part for part in child.cmdline()):
                child.kill()
        except psutil.Error:
            continue


def stream_soak(sc: Any, bootstrap: str, topic: str, partitions: list[int], opts: dict[str, Any],
                workdir: Path, log: Any = None) -> dict[str, Any]:
    """Run the soak (see the module text); return the records read, CPU seconds without the
    producer's, the consumer cache summary and ``soak``: parameters, samples, batches, the
    producer's summary, whether the stream drained and the exactly-once verification."""
    import psutil

    from benchmarks.adapter_stores import _make_store, _results_connection, _timed_transaction
    from benchmarks.monitor import role_usage, tree_cpu_seconds, tree_roles
    from benchmarks.steady import EndOffsetProbe, SteadyRecorder, _run_producer
    from dstream_kafka.streaming import datetime_to_ms
    from dstream_kafka.streaming.context import StreamingContext

    services = opts.get("services") or {}
    if not services.get("postgres"):
        raise RuntimeError("no PostgreSQL server: " + str(services.get("postgres_error")))
    minutes, rate = float(opts["soak_minutes"]), int(opts["soak_rate"])
    interval, every = float(opts["soak_interval"]), float(opts["soak_sample_seconds"])
    seconds = minutes * 60.0
    tag = f"{os.getpid()}_{uuid.uuid4().hex[:8]}"
    group, table = f"bench-soak-{tag}", f"bench_soak_{tag}"
    probe = EndOffsetProbe(bootstrap, topic, partitions)
    probe_lock = threading.Lock()  # the probe's consumer serves the sampler and this thread

    def end_offsets() -> dict[int, int]:
        with probe_lock:
            return probe.latest()

    start = end_offsets()
    recorder = SteadyRecorder(start)
    recorder.begin("soak")
    conn = _results_connection("postgres-tx", services, workdir, group)
    cur = conn.cursor()
    cur.execute(SINK_DDL.format(t=table))
    conn.commit()
    store = _make_store("postgres-tx", services, workdir, bootstrap, group)
    ssc = StreamingContext(sc, interval)
    stream = create_direct_stream(ssc, bootstrap, topic, start, group, offset_store=store, start=start)
    tracker = CacheTracker()
    latest_stats: dict[int, dict[str, Any]] = {}
    stats_lock = threading.Lock()
    outputs: dict[int, dict[str, Any]] = {}
    errors: list[BaseException] = []
    stopping = threading.Event()
    t0 = time.time()  # reset when the producer starts: every time is seconds since then

    def per_batch(batch_time: Any, rdd: Any) -> None:
        try:
            ms = datetime_to_ms(batch_time)
            ranges = rdd.offsetRanges()
            parts = rdd.mapPartitionsWithIndex(_sink_task).collect() if sum(
                r.count() for r in ranges) else []
            # Empty batches run no job: the tracker's first batch is the first that read records.
            delta = tracker.add_batch(parts) if parts else dict.fromkeys(CacheTracker.KEYS, 0)
            with stats_lock:
                for part in parts:
                    prev = latest_stats.get(part[2])
                    if prev is None or part[3].get("polls", 0) >= prev.get("polls", 0):
                        latest_stats[part[2]] = part[3]
            rows = [(ms, ranges[p[4]].partition, lo, hi) for p in parts for lo, hi in p[5]]
            tx = _timed_transaction(stream, batch_time, table, rows)
            outputs[ms] = {"tx_ms": tx["tx_total"], "sink_rows": len(rows),
                           "creations": delta["creations"], "seeks": delta["seeks"]}
        except BaseException as exc:  # reported by the caller, not swallowed by the scheduler
            if not stopping.is_set():  # ssc.stop() may cut short the batch in flight
                errors.append(exc)
            raise

    def on_progress(progress: Any) -> None:
        out = outputs.pop(progress.batchTime, {})
        recorder.add_batch(time.time() * 1000.0, {}, {r.partition: r.untilOffset for r in progress.ranges},
                           progress.numRecords, t=round(progress.batchTime / 1000.0 - t0, 3),
                           processing_ms=progress.processingDelay,
                           scheduling_ms=progress.schedulingDelay, **out)

    me = psutil.Process(os.getpid())
    seen: dict[int, bool] = {}
    broker_ports = _ports(bootstrap)
    pg_ports = {int(services["postgres"]["port"])}

    def sample() -> dict[str, Any]:
        roles = tree_roles(me, seen)
        row: dict[str, Any] = {"t": round(time.time() - t0, 3)}
        for role, procs in roles.items():
            usage = role_usage(procs, counts=True)
            row[f"{role}_mb"] = round(usage["rss_mb"], 2)
            row[f"{role}_fds"] = int(usage["fds"])
            row[f"{role}_threads"] = int(usage["threads"])
        row["worker_processes"] = len(roles["workers"])
        every_proc = [p for procs in roles.values() for p in procs]
        row["broker_tcp"] = _tcp_to(every_proc, broker_ports)
        row["postgres_tcp"] = _tcp_to(every_proc, pg_ports)
        with stats_lock:
            row["consumers"] = cached_consumers(latest_stats, {p.pid for p in roles["workers"]})
        end = sum(end_offsets().values())
        row["committed"] = recorder.committed()
        row["lag"] = max(0, end - row["committed"])
        return row

    stream.foreachRDD(per_batch)
    stream.addProgressListener(on_progress)
    sampler = _Sampler(every, sample)
    produced: dict[str, Any] = {}

    def produce() -> None:
        try:
            produced["summary"], produced["cpu"] = _run_producer(
                bootstrap, topic, rate, seconds, int(opts.get("value_bytes", 100)), log)
        except BaseException as exc:
            produced["error"] = exc
        produced["stopped"] = time.time()

    producer = threading.Thread(target=produce, name="soak-producer", daemon=True)
    cpu0, wall0 = tree_cpu_seconds(), time.perf_counter()
    ssc.start()
    drained, drain_seconds = False, None
    try:
        t0 = time.time()
        sampler.start()
        producer.start()
        while producer.is_alive():
            producer.join(timeout=1.0)
            if errors:
                _kill_producers()
                break
        if errors:
            raise errors[0]
        if "error" in produced:
            raise produced["error"]
        drain_started = time.monotonic()
        target = sum(end_offsets().values())
        while recorder.committed() < target and time.monotonic() - drain_started < DRAIN_SECONDS:
            if errors:
                raise errors[0]
            time.sleep(0.1)
        drained = recorder.committed() >= target
        drain_seconds = time.monotonic() - drain_started
        time.sleep(interval)  # one more (empty) batch: the sample below sees the steady state
        sampler.stop()
        sampler.take()
    finally:
        sampler.stop()
        stopping.set()
        ssc.stop(stopSparkContext=False, stopGraceFully=False)
    wall = time.perf_counter() - wall0
    cpu = tree_cpu_seconds() - cpu0 - float(produced.get("cpu") or 0.0)
    if errors:
        raise errors[0]
    try:
        end = end_offsets()
    finally:
        probe.stop()
    try:
        cur = conn.cursor()
        cur.execute(f"SELECT part, from_offset, until_offset FROM {table}")
        rows = [(int(p), int(lo), int(hi)) for p, lo, hi in cur.fetchall()]
    finally:
        conn.close()
    check_store = _make_store("postgres-tx", services, workdir, bootstrap, group)
    try:
        committed = {tp.partition: int(o) for tp, o in check_store.load(group, [topic]).items()}
    finally:
        check_store.close()
    summary = produced.get("summary") or {}
    verified = verify_exactly_once(start, end, rows, summary.get("records"), committed)
    batches = [{k: v for k, v in b.items() if k != "hist"} for b in recorder.batches["soak"]]
    return {"records": sum(b["records"] for b in batches), "seconds": wall, "cpu_seconds": cpu,
            "cache": tracker.summary(),
            "soak": {"params": {"minutes": minutes, "rate": rate, "interval": interval,
                                "warmup_minutes": float(opts["soak_warmup_minutes"]),
                                "sample_seconds": every, "partitions": len(partitions),
                                "store": "OffsetStores.postgres, sink rows + offsets in "
                                         "stream.transaction()"},
                     "warmup_seconds": float(opts["soak_warmup_minutes"]) * 60.0,
                     "producing_seconds": float(produced.get("stopped", time.time())) - t0,
                     "producer": summary, "drained": drained, "drain_seconds": drain_seconds,
                     "samples": sampler.samples, "sample_errors": sampler.errors[:10],
                     "batches": batches, "exactly_once": verified, "sink_rows": len(rows),
                     "table": table, "group": group}}


def run_soak(sc: Any, spec: dict[str, Any], workdir: str) -> dict[str, Any]:
    """The soak for ``dk-stream``; the producer's output goes to ``logs/<run>.producer.log``."""
    result = Path(spec["result_path"])
    log_path = result.with_name(result.name.replace(".result.json", "") + ".producer.log")
    topic = spec["topic"]
    with open(log_path, "w") as log:
        return stream_soak(sc, spec["bootstrap"], topic["name"],
                           sorted(int(p) for p in topic["end_offsets"]), spec["options"],
                           Path(workdir), log)
