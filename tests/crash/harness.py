"""One crash trial: produce, run the driver, SIGKILL it at seeded random points, restart, check.

A trial of store ``S`` with seed ``s``:

1. creates its own topic (``partitions`` partitions) and group, and produces ``records``
   records: half at once, the rest while the driver runs (:class:`Producer`);
2. runs :mod:`tests.crash.driver` ``kills`` times, each run ended by a SIGKILL of its whole
   process group (driver, Spark JVM, Python workers) as ``random.Random(f"{s}:{S}")`` plans it
   (or as ``plans`` fixes it): after a random delay from the run's first output or from its
   ``READY`` (lands anywhere: start, planning, output, commit, between batches), or by the
   driver itself at a crash point of its ``k``-th batch with records (see
   :data:`tests.crash.driver.CRASH_POINTS`);
3. runs the driver a last time until every record is committed, then it stops;
4. reads the effects: ``lost`` counts records with no effect, ``duplicated`` counts effects
   beyond the first. For at-least-once stores, a duplicate is *allowed* only when its earlier
   effect was written by a killed run in that run's last batch (the one batch that was output
   but not committed when the kill came); every other duplicate counts in ``outside``. For the
   checkpoint store the first batch of the next run must cover exactly the ranges of that
   uncommitted batch (``replay_mismatch`` otherwise). The store's final offsets must be the end
   offsets of the topic.

Which rule counts which store:

* ``sqlite``, ``postgres`` (transactional): the results table, exactly once (``lost`` and
  ``duplicated`` must be 0);
* ``checkpoint``, ``kafka``, ``zookeeper``: the effects file, at least once (``lost`` and
  ``outside`` must be 0; ``duplicated`` counts the allowed replays);
* ``kafka-eos`` (Kafka to Kafka, exactly-once ``KafkaOutput``): the output topic read by a
  ``read_committed`` consumer, exactly once (``lost`` and ``duplicated`` must be 0); the group's
  committed offsets must be the end offsets;
* ``hbase``: both. Its results are rows of an HBase table keyed by the record
  (:func:`~dstream_kafka.stores.hbase.result_row_key`), written before the offsets commit, so a
  replay overwrites them: the *exactly-once* rule applies to those rows (``rows_lost`` and
  ``rows_duplicated`` must be 0, every row's key is the one its value's record derives, no row
  of a record never produced). Its effects outside HBase (the effects file) get no more than any
  other non-transactional store, so the *at-least-once* rule applies to them (``lost`` and
  ``outside`` must be 0, replays of the last uncommitted batch are allowed).

A run that exits in any other way than its kill or a clean finish is an error of the trial.
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.crash.driver import EXACTLY_ONCE, KAFKA_EOS, TRANSACTIONAL

__all__ = ["STORES", "Services", "TrialResult", "TrialSpec", "run_trial"]

DRIVER = Path(__file__).resolve().with_name("driver.py")

#: Every store the crash tests cover, in report order.
STORES = ("sqlite", "postgres", "checkpoint", "kafka", "zookeeper", "hbase", KAFKA_EOS)

#: Crash points the driver's hook offers per store (``in-commit`` exists for the checkpoint only).
POINTS = {
    "sqlite": ("before-output", "mid-output", "after-output", "after-commit"),
    "postgres": ("before-output", "mid-output", "after-output", "after-commit"),
    "checkpoint": ("before-output", "mid-output", "after-output", "in-commit", "after-commit"),
    "kafka": ("before-output", "mid-output", "after-output", "after-commit"),
    "zookeeper": ("before-output", "mid-output", "after-output", "after-commit"),
    "hbase": ("before-output", "mid-output", "after-output", "after-commit"),
    KAFKA_EOS: ("before-output", "mid-output", "after-output", "after-commit"),
}

RUN_TIMEOUT = 150.0   # one driver run: JVM start, group join, the batches

#: What the stream logs when its driver consumer got no partitions within 60 s of joining. Seen
#: about once in 80 runs with kafka-python 3.0.12: the group leader's second JoinGroup (the
#: first assignment had no topic metadata yet) gets its SyncGroup answered by the broker but
#: never completes in the client, which stops heartbeating and stays without partitions. Not a
#: store failure: the run is killed at once (a crash like the planned ones), restarted, counted.
CLIENT_HANG = "No partitions assigned after"
MAX_CLIENT_HANGS = 3
GROUP_EXIT_TIMEOUT = 20.0


@dataclass
class Services:
    """The running services a trial uses (PostgreSQL, ZooKeeper and HBase only for their stores)."""

    kafka: Any
    postgres: Any = None
    zookeeper: Any = None
    hbase: Any = None


@dataclass(frozen=True)
class TrialSpec:
    """What one trial does. ``seed`` makes the kill plan reproducible."""

    store: str
    seed: int | str
    records: int = 2000
    partitions: int = 4
    kills: int = 2
    batch_seconds: float = 0.3
    max_per_batch: int = 150
    #: Records per second produced after the first half (0: every record before the first run);
    #: 60/s keeps records arriving through the first two runs.
    produce_rate: int = 60
    #: Fixed plans of the killed runs (e.g. ``("after-output:1", "timed-output:0.5")``) instead
    #: of random ones; ``"random"`` draws one from the seed; ``kills`` is then ``len(plans)``.
    plans: tuple[str, ...] | None = None
    #: Upper bound of the random delay of a timed kill (after READY or the first output), seconds.
    kill_window: float = 2.0
    #: spark.streaming.kafka.consumer.backend of the driver (and the kafka-eos output's producers).
    backend: str = "kafka-python"


@dataclass
class Run:
    """One run of the driver: how it was meant to end and how it ended."""

    plan: str                    # "timed-ready:<s>", "timed-output:<s>", "<point>:<k>" or "final"
    exit_code: int | None = None
    killed: bool = False         # ended by its SIGKILL (ours or the hook's)
    finished: bool = False       # committed up to the end offsets and stopped (exit 0)
    outputs: int = 0             # batches with records it output
    commits: int = 0             # batches with records it committed
    seconds: float = 0.0
    hung: bool = False                    # still running after RUN_TIMEOUT (then killed: an error)
    client_hang: bool = False             # killed because its Kafka client hung (see CLIENT_HANG)
    leaked: list[int] = field(default_factory=list)  # processes of its group still alive after it
    ready_s: float | None = None          # READY, seconds after the start (JVM, store, group join)
    first_output_s: float | None = None   # first batch with records output


@dataclass
class TrialResult:
    """The outcome of one trial (see the module docstring for the counts)."""

    spec: TrialSpec
    runs: list[Run] = field(default_factory=list)
    lost: int = 0
    duplicated: int = 0
    outside: int = 0
    replay_mismatch: int = 0
    #: hbase only: records without a row in the HBase results table, rows beyond one per record.
    rows_lost: int = 0
    rows_duplicated: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    workdir: str = ""

    @property
    def kills(self) -> int:
        """Runs that really ended by a SIGKILL."""
        return sum(run.killed for run in self.runs)

    @property
    def client_hangs(self) -> int:
        """Runs killed because the Kafka client hung in the group join (see CLIENT_HANG)."""
        return sum(run.client_hang for run in self.runs)

    @property
    def ok(self) -> bool:
        """True when the store kept its promise and nothing went wrong."""
        exactly_once = self.spec.store in EXACTLY_ONCE
        return (not self.errors and self.lost == 0 and self.outside == 0 and self.replay_mismatch == 0
                and self.rows_lost == 0 and self.rows_duplicated == 0
                and (self.duplicated == 0 or not exactly_once))

    def describe(self) -> str:
        """One line for logs: counts, then the run plans and their ends."""
        runs = ", ".join(f"{r.plan}->{_end(r)}({r.outputs}o/{r.commits}c {_s(r.ready_s)}/"
                         f"{_s(r.first_output_s)}/{r.seconds:.0f}s)" for r in self.runs)
        text = (f"{self.spec.store} seed={self.spec.seed} kills={self.kills} lost={self.lost} "
                f"dup={self.duplicated} outside={self.outside} mismatch={self.replay_mismatch} "
                + (f"rows_lost={self.rows_lost} rows_dup={self.rows_duplicated} "
                   if self.spec.store == "hbase" else "")
                + f"{self.seconds:.1f}s [{runs}]")
        if self.errors:
            text += " ERRORS: " + " | ".join(self.errors)
        return text


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f}"


def _end(run: Run) -> str:
    if run.client_hang:
        return "client-hang"
    return "killed" if run.killed else "done" if run.finished else str(run.exit_code)


# ------------------------------------------------------------------------------------------
# Processes


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``, read from /proc."""
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as handle:
                stat = handle.read()
        except OSError:
            continue
        # Fields after the command (which may hold spaces) start after the last ')'.
        fields = stat[stat.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(name))
    return members


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the group and wait until none is left (nothing leaks)."""
    deadline = time.monotonic() + GROUP_EXIT_TIMEOUT
    while True:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not _group_members(pgid) or time.monotonic() > deadline:
            return
        time.sleep(0.05)


class DriverProcess:
    """One driver run in its own session; stdout lines are collected by a thread."""

    def __init__(self, config_path: Path, log_path: Path, env: dict[str, str]) -> None:
        self._log = log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, str(DRIVER), str(config_path)], stdout=subprocess.PIPE,
            stderr=self._log, cwd=str(config_path.parent), env=env, start_new_session=True)
        self.started = time.monotonic()
        self.lines: list[str] = []
        self.first_seen: dict[str, float] = {}   # first word of a line -> seconds after the start
        self.ready = threading.Event()
        self.first_output = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.lines.append(line)
            self.first_seen.setdefault(line.split(" ", 1)[0], time.monotonic() - self.started)
            if line == "READY":
                self.ready.set()
            elif line.startswith("OUTPUT "):
                self.first_output.set()
        # The process ended: nobody should wait for these any longer.
        self.ready.set()
        self.first_output.set()

    def count(self, word: str) -> int:
        return sum(1 for line in list(self.lines) if line.split(" ", 1)[0] == word)

    def wait(self, timeout: float) -> int | None:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> None:
        kill_group(self.process.pid)
        self.process.wait()

    def close(self) -> None:
        """Make sure the run and everything it started are gone."""
        if self.process.poll() is None:
            self.kill()
        else:
            kill_group(self.process.pid)  # the JVM or a worker may outlive a dead driver
        self._reader.join(timeout=5)
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._log.close()


# ------------------------------------------------------------------------------------------
# A trial


def _choose_plan(rng: random.Random, spec: TrialSpec) -> str:
    """Pick how the next run ends: a timed kill (2 in 5) or one of the store's crash points.

    Timed kills mostly count from the first batch output, so they land inside the stream's
    batches (planning, output, commit, in between); one in five counts from READY and so also
    hits the start (store load, replay planning, the first job).
    """
    if rng.random() < 0.4:
        anchor = "ready" if rng.random() < 0.2 else "output"
        window = spec.kill_window * (3 if anchor == "ready" else 1)  # the first job takes seconds
        return f"timed-{anchor}:{rng.uniform(0.0, window):.3f}"
    return f"{rng.choice(POINTS[spec.store])}:{rng.randint(1, 3)}"


class Producer(threading.Thread):
    """Produces a trial's records: half at once, the rest at ``spec.produce_rate`` per second.

    Records trickling in while the driver runs make batch sizes depend on timing, so a batch
    planned before a kill and the batch a restarted driver plans at the same offsets differ,
    as in production (with every record produced up front, rate limits would plan identical
    batches and hide a replay over the wrong ranges). Each burst spreads its records over the
    partitions with random weights. When done, the end offsets go to ``end_file`` (atomically).
    """

    BURST_SECONDS = 0.25

    def __init__(self, kafka: Any, topic: str, spec: TrialSpec, end_file: Path, rng: random.Random) -> None:
        super().__init__(name=f"producer-{topic}", daemon=True)
        self.kafka, self.topic, self.spec, self.end_file, self.rng = kafka, topic, spec, end_file, rng
        self.end: dict[int, int] = {p: 0 for p in range(spec.partitions)}
        self.error: str | None = None

    def _send(self, count: int) -> None:
        weights = [self.rng.random() + 0.05 for _ in range(self.spec.partitions)]
        chosen = collections.Counter(self.rng.choices(range(self.spec.partitions), weights, k=count))
        for p, n in sorted(chosen.items()):
            start = self.end[p]
            self.kafka.produce(self.topic, [f"{p}-{i}" for i in range(start, start + n)], partition=p)
            self.end[p] = start + n

    def run(self) -> None:
        try:
            total = self.spec.records
            upfront = total // 2 if self.spec.produce_rate else total
            self._send(upfront)
            left = total - upfront
            burst = max(1, int(self.spec.produce_rate * self.BURST_SECONDS))
            while left > 0:
                time.sleep(self.BURST_SECONDS)
                self._send(min(burst, left))
                left -= min(burst, left)
            actual = self.kafka.end_offsets(self.topic)
            if {int(p): int(o) for p, o in actual.items()} != self.end:
                raise RuntimeError(f"the topic's end offsets {actual} are not the produced counts {self.end}")
            tmp = self.end_file.with_suffix(".tmp")
            tmp.write_text(json.dumps({str(p): o for p, o in self.end.items()}))
            os.replace(tmp, self.end_file)
        except Exception as exc:  # reported by the trial
            self.error = f"{type(exc).__name__}: {exc}"


def _config(spec: TrialSpec, services: Services, workdir: Path, topic: str, group: str) -> dict[str, Any]:
    token = uuid.uuid4().hex[:8]
    config: dict[str, Any] = {
        "store": spec.store, "bootstrap": services.kafka.bootstrap_servers, "topic": topic,
        "group": group, "end_file": str(workdir / "end_offsets.json"),
        "batch_seconds": spec.batch_seconds, "max_per_batch": spec.max_per_batch,
        "sink": str(workdir / "effects.jsonl"), "sqlite_path": str(workdir / "store.db"),
        "checkpoint_dir": str(workdir / "checkpoint"), "table_prefix": f"crash_{token}_",
        "effects_table": f"crash_{token}_effects", "backend": spec.backend,
        "output_topic": f"{topic}-out",
    }
    if spec.store == "postgres":
        config["postgres"] = services.postgres.dsn_params()
    if spec.store == "zookeeper":
        config["zookeeper"] = services.zookeeper.hosts
    if spec.store == "hbase":
        config["hbase"] = {"host": services.hbase.host, "port": services.hbase.thrift_port}
        config["hbase_table"] = f"crash_{token}_offsets"
        config["results_table"] = f"crash_{token}_results"
    return config


def _run(config_path: Path, workdir: Path, plan: str, incarnation: int) -> Run:
    """Run the driver once and end it as ``plan`` says."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "CRASH_INCARNATION": str(incarnation)}
    env.pop("CRASH_AT", None)
    kind, _, arg = plan.partition(":")
    timed = kind.startswith("timed")
    if not timed and kind != "final":
        env["CRASH_AT"] = plan
    run = Run(plan)
    started = time.monotonic()
    log = workdir / f"run-{incarnation}.log"
    driver = DriverProcess(config_path, log, env)
    try:
        anchor = driver.ready if kind == "timed-ready" else driver.first_output
        kill_at: float | None = None
        while True:
            if timed and kill_at is None and anchor.is_set():
                kill_at = time.monotonic() + float(arg)
            step = 0.2 if kill_at is None else min(0.2, max(0.0, kill_at - time.monotonic()))
            if driver.wait(step) is not None:
                break
            now = time.monotonic()
            if kill_at is not None and now >= kill_at:
                driver.kill()
            elif driver.ready.is_set() and CLIENT_HANG in log.read_text(errors="replace"):
                run.client_hang = True  # see CLIENT_HANG: a crash like any other, then a restart
                driver.kill()
            elif now - started > RUN_TIMEOUT:  # stuck: end it, the trial reports it
                run.hung = True
                driver.kill()
        run.exit_code = driver.process.returncode
    finally:
        driver.close()
        run.leaked = _group_members(driver.process.pid)
    run.seconds = time.monotonic() - started
    run.killed = run.exit_code == -signal.SIGKILL and not run.hung
    run.finished = run.exit_code == 0 and "DONE" in driver.lines
    run.outputs = driver.count("OUTPUT")
    run.commits = driver.count("COMMITTED")
    run.ready_s = driver.first_seen.get("READY")
    run.first_output_s = driver.first_seen.get("OUTPUT")
    return run


def run_trial(services: Services, spec: TrialSpec, workdir: Path) -> TrialResult:
    """Run one trial in ``workdir`` (created) and return its result; never raises for a finding."""
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    result = TrialResult(spec, workdir=str(workdir))
    rng = random.Random(f"{spec.seed}:{spec.store}")
    name = f"crash-{spec.store}-{uuid.uuid4().hex[:10]}"
    services.kafka.create_topic(name, partitions=spec.partitions)
    if spec.store == KAFKA_EOS:
        services.kafka.create_topic(f"{name}-out", partitions=spec.partitions)
    config = _config(spec, services, workdir, name, name)
    config_path = workdir / "config.json"
    config_path.write_text(json.dumps(config, indent=1))
    os.chmod(config_path, 0o600)  # it may hold the PostgreSQL password
    producer = Producer(services.kafka, name, spec, Path(config["end_file"]), random.Random(rng.random()))
    producer.start()
    try:
        plans = list(spec.plans) if spec.plans is not None else ["random"] * spec.kills
        plans = [_choose_plan(rng, spec) if plan == "random" else plan for plan in plans] + ["final"]
        step = 0
        for incarnation in itertools.count():
            final = step == len(plans) - 1
            run = _run(config_path, workdir, plans[step], incarnation)
            result.runs.append(run)
            if run.leaked:
                result.errors.append(f"run {incarnation} left processes {run.leaked} behind")
            if run.finished:
                break
            if run.client_hang and result.client_hangs <= MAX_CLIENT_HANGS:
                continue  # the plan did not get its chance: same plan again
            step += 1
            if final or not run.killed:
                what = (f"hung for {RUN_TIMEOUT:.0f}s" if run.hung
                        else f"ended with exit code {run.exit_code} after {run.seconds:.1f}s")
                result.errors.append(
                    f"run {incarnation} ({run.plan}) {what}; see {workdir}/run-{incarnation}.log")
                break
    finally:
        producer.join()
    end = producer.end
    if producer.error:
        result.errors.append(f"producing failed: {producer.error}")
    try:
        if spec.store == KAFKA_EOS:
            _check_output_topic(result, config, end)
        elif spec.store in TRANSACTIONAL:
            _check_exactly_once(result, config, end)
        else:
            _check_at_least_once(result, config, end)
        if spec.store == "hbase":
            _check_hbase_results(result, config, end)
        _check_final_offsets(result, config, services, end)
    except Exception as exc:  # a broken sink or store is a finding, reported with the others
        result.errors.append(f"checking failed: {type(exc).__name__}: {exc}")
    result.seconds = time.monotonic() - started
    return result


# ------------------------------------------------------------------------------------------
# Checks


def _expected(end: dict[int, int]) -> set[tuple[int, int]]:
    return {(p, o) for p, n in end.items() for o in range(n)}


def _check_exactly_once(result: TrialResult, config: dict[str, Any], end: dict[int, int]) -> None:
    """Every record's row exists exactly once in the results table."""
    query = f'SELECT "partition", "offset" FROM "{config["effects_table"]}"'
    import tests.crash.driver as driver

    conn = driver.connect_results(config)
    try:
        cur = conn.cursor()
        cur.execute(query)
        rows = cur.fetchall()
        if config["store"] == "postgres":
            cur.execute(f'DROP TABLE "{config["effects_table"]}"')  # keep the shared server small
        conn.commit()
    finally:
        conn.close()
    _count_effects(result, [(int(p), int(o)) for p, o in rows], end)


def _count_effects(result: TrialResult, effects: list[tuple[int, int]], end: dict[int, int]) -> None:
    counts = collections.Counter(effects)
    expected = _expected(end)
    result.lost = len(expected - set(counts))
    result.duplicated = sum(n - 1 for n in counts.values() if n > 1)
    stray = set(counts) - expected
    if stray:
        result.errors.append(f"{len(stray)} effects of records never produced, e.g. {sorted(stray)[:3]}")


def _check_output_topic(result: TrialResult, config: dict[str, Any], end: dict[int, int]) -> None:
    """kafka-eos: a read_committed consumer of the output topic sees every record once."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=config["bootstrap"], group_id=None,
                             enable_auto_commit=False, isolation_level="read_committed")
    try:
        parts = [TopicPartition(config["output_topic"], p) for p in end]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        stable = consumer.end_offsets(parts)  # the last stable offsets: no open transaction left
        effects: list[tuple[int, int]] = []
        deadline = time.monotonic() + 120
        while any(consumer.position(tp) < stable[tp] for tp in parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the output topic was not read up to {stable} in 120 s")
            for records in consumer.poll(timeout_ms=500).values():
                effects.extend(tuple(json.loads(r.value)[:2]) for r in records)
    finally:
        consumer.close(autocommit=False)
    _count_effects(result, effects, end)


def read_sink(path: str) -> list[dict[str, Any]]:
    """The complete lines of the effects file (a torn last line is not an effect)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        return []
    lines = data.split(b"\n")
    return [json.loads(line) for line in lines[:-1] if line]  # the part after the last newline is torn


def _check_at_least_once(result: TrialResult, config: dict[str, Any], end: dict[int, int]) -> None:
    """Nothing lost; a duplicate's earlier effects all come from a killed run's last batch."""
    lines = read_sink(config["sink"])
    killed = {i for i, run in enumerate(result.runs) if run.killed}
    last_batch: dict[int, int] = {}          # incarnation -> its last batch with effects
    for line in lines:
        last_batch[line["inc"]] = line["batch"]
    occurrences: dict[tuple[int, int], list[tuple[int, int]]] = collections.defaultdict(list)
    for line in lines:
        for p, o in line["records"]:
            occurrences[(p, o)].append((line["inc"], line["batch"]))
    expected = _expected(end)
    result.lost = len(expected - set(occurrences))
    for record, seen in occurrences.items():
        result.duplicated += len(seen) - 1
        # All effects but the last must be replays: from a killed run, in its last batch.
        for inc, batch in seen[:-1]:
            if not (inc in killed and last_batch.get(inc) == batch):
                result.outside += 1
    stray = set(occurrences) - expected
    if stray:
        result.errors.append(f"{len(stray)} effects of records never produced, e.g. {sorted(stray)[:3]}")
    if config["store"] == "checkpoint":
        result.replay_mismatch = _replay_mismatches(lines, killed, last_batch, occurrences)


def _replay_mismatches(lines: list[dict[str, Any]], killed: set[int], last_batch: dict[int, int],
                       occurrences: dict[tuple[int, int], list[tuple[int, int]]]) -> int:
    """Killed runs whose uncommitted batch was not re-run over exactly its ranges next."""
    def non_empty(ranges: list[list[int]]) -> list[tuple[int, int, int]]:
        return sorted((p, a, b) for p, a, b in ranges if b > a)

    ranges_of: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    first_batch: dict[int, int] = {}
    for line in lines:
        ranges_of[(line["inc"], line["batch"])] = non_empty(line["ranges"])
        first_batch.setdefault(line["inc"], line["batch"])
    mismatches = 0
    for inc in sorted(killed):
        batch = last_batch.get(inc)
        if batch is None:
            continue
        replayed = any((inc, batch) in seen[:-1] for seen in occurrences.values())
        if not replayed:
            continue  # committed before the kill: nothing to re-run
        following = [i for i in first_batch if i > inc]
        rerun = ranges_of[(min(following), first_batch[min(following)])] if following else None
        if rerun != ranges_of[(inc, batch)]:
            mismatches += 1
    return mismatches


def _check_hbase_results(result: TrialResult, config: dict[str, Any], end: dict[int, int]) -> None:
    """hbase: every record has exactly one row in the HBase results table, under its own key."""
    import tests.crash.driver as driver
    from dstream_kafka.stores.hbase import result_row_key

    conn = driver.connect_hbase(config)
    try:
        rows = list(conn.table(config["results_table"]).scan()) \
            if config["results_table"].encode() in conn.tables() else []
    finally:
        conn.close()
    counts: collections.Counter[tuple[int, int]] = collections.Counter()
    misplaced = []
    for key, columns in rows:
        p, _, o = columns.get(driver.RESULT_COLUMN, b"/").decode().partition("/")
        if not (p.isdigit() and o.isdigit()):
            misplaced.append(key)
            continue
        record = (int(p), int(o))
        counts[record] += 1
        if key != result_row_key(config["topic"], *record):
            misplaced.append(key)
    expected = _expected(end)
    result.rows_lost = len(expected - set(counts))
    result.rows_duplicated = sum(n - 1 for n in counts.values() if n > 1)
    if misplaced:
        result.errors.append(f"{len(misplaced)} result rows not under their record's key, e.g. {misplaced[:3]}")
    stray = set(counts) - expected
    if stray:
        result.errors.append(f"{len(stray)} result rows of records never produced, e.g. {sorted(stray)[:3]}")


def _check_final_offsets(result: TrialResult, config: dict[str, Any], services: Services,
                         end: dict[int, int]) -> None:
    """The store's committed offsets are the topic's end offsets."""
    import tests.crash.driver as driver

    store = driver.make_store(config)
    try:
        stored = store.load(config["group"], [config["topic"]])
    finally:
        store.close()
    got = {tp.partition: off for tp, off in stored.items()}
    if got != end:
        result.errors.append(f"final stored offsets {got} are not the end offsets {end}")
