"""The ``python -m benchmarks`` command: broker, topics, alternating runs, results.

Order of a run:

1. record the machine (cores, memory, load, versions);
2. start one Kafka broker on 127.0.0.1 and fill one topic per workload with Kafka's
   ProducerPerformance (``bytes`` values for ``drain``, JSON values for ``json``, an idle empty
   topic for ``overhead``, an empty topic for ``steady``, whose runs start their own producer
   per rate step (:mod:`benchmarks.steady`), ``--eo-batches`` x 1,000 records for
   ``exactly-once``, one topic per partition count for ``partitions``, which runs as
   sub-workloads ``partitions-p<N>``, idle topics for ``planning``: one per partition count and
   ``--planning-topics`` more for its pattern); start PostgreSQL, ZooKeeper and HBase for
   ``exactly-once``; ``soak`` (only when named) gets an empty topic, whose run starts its own
   producer for ``--soak-minutes`` (:mod:`benchmarks.adapter_soak`), and PostgreSQL;
3. prepare the JVM contenders (resolve connector jars, compile ``DStreamDrain.java``) outside
   any timed region;
4. for every workload, run ``warmup + repetitions`` rounds; each round runs every selected
   contender once, in the same order (ABCABC), each in a fresh process; round 0 is the warm-up
   and is labelled and excluded from statistics. The per-batch workloads (``overhead``,
   ``steady``, ``exactly-once``: :data:`BATCH_WORKLOADS`) pool many batches per run and drop
   each run's own warm-up batches or step, so they run ``--batch-repetitions`` rounds and no
   warm-up round;
5. write ``results.json`` (every run, the machine, the summary, the goals), ``report.md`` and
   ``chart.png``, and print the report.

A contender that fails is recorded with its error and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from benchmarks.adapter_planning import PLANNING_PREFIX, planning_configs
from benchmarks.adapter_soak import soak_option_errors, split_password
from benchmarks.broker import TopicInfo, fill_topic, start_broker
from benchmarks.contenders import (
    CLUSTER_SUFFIX,
    CONTENDERS,
    EO_BATCH_SECONDS,
    MULTICORE_PREFIX,
    EO_RECORDS_PER_PARTITION,
    LATENCY_WORKLOADS,
    WORKLOADS,
    contenders_for,
    workload_kind,
)
from benchmarks.monitor import TreeSampler, machine_facts
from benchmarks.publish import git_commit, publish
from dstream_kafka.operate.services.maven import KAFKA_VERSION
from benchmarks.report import all_goals, markdown_report, summarize, summarize_latency
from benchmarks.report_steady import pooled_run, summarize_steady
from benchmarks.report_soak import finish_soak, soak_status, summarize_soak

__all__ = ["main", "parse_args", "expand_plan", "workload_options", "rounds_for"]

_REPO = Path(__file__).resolve().parents[1]
QUICK = {"records": 200_000, "repetitions": 1, "warmup": 0, "overhead_seconds": 2.0,
         "min_batches": 5, "outputs": "count,job", "eo_batches": 20, "partition_counts": "1,16",
         "rates": "10000,50000", "steady_seconds": 8.0, "planning_partitions": "1,64,1000",
         "planning_topics": 10, "planning_batches": 5}
QUICK.update({"soak_minutes": 2.0, "soak_warmup_minutes": 0.5, "soak_sample_seconds": 5.0,
              "k2k_rates": "1000", "k2k_seconds": 15.0, "k2k_warmup": 5.0})
#: Batches excluded at the start of every latency configuration (consumer creation, first job).
LATENCY_WARMUP_BATCHES = 2
#: Workloads whose runs pool many batches and drop their own warm-up: ``--batch-repetitions``.
BATCH_WORKLOADS = ("overhead", "steady", "exactly-once", "planning", "soak")
#: Workloads left out unless ``--workloads`` names them (the soak alone takes 30 minutes, k2k 20).
OPT_IN_WORKLOADS = ("soak", "k2k")
#: Steady workload: seconds of the warm-up step at the first rate that every run starts with.
STEADY_WARMUP_SECONDS = 4.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse the command line (see ``python -m benchmarks --help``)."""
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Run dstream_kafka side by side with Structured Streaming, Spark's kafka010 "
                    "DStream, raw kafka-python / confluent-kafka loops and Kafka's consumer "
                    "performance tool, against one local broker.")
    p.add_argument("--records", type=int, default=2_000_000, help="records per topic (2,000,000)")
    p.add_argument("--value-bytes", type=int, default=100, help="value size in bytes (100)")
    p.add_argument("--partitions", type=int, default=4, help="partitions per topic (4)")
    p.add_argument("--repetitions", type=int, default=3, help="measured rounds per workload (3)")
    p.add_argument("--warmup", type=int, default=1, help="warm-up rounds, run and discarded (1)")
    p.add_argument("--workloads", default=",".join(w for w in WORKLOADS if w not in OPT_IN_WORKLOADS),
                   help=f"comma-separated, from {','.join(WORKLOADS)} (all but "
                        f"{','.join(OPT_IN_WORKLOADS)})")
    p.add_argument("--contenders", default="",
                   help=f"comma-separated subset of {','.join(CONTENDERS)} (all)")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (benchmarks/results/<UTC timestamp>)")
    p.add_argument("--run-timeout", type=float, default=900.0, help="seconds before a run is killed")
    p.add_argument("--intervals", default="0.1,0.25,0.5,1",
                   help="overhead: batch intervals in seconds (0.1,0.25,0.5,1)")
    p.add_argument("--outputs", default="count,job,job-nocommit",
                   help="overhead: output operations, from count,job,job-nocommit (all)")
    p.add_argument("--overhead-seconds", type=float, default=20.0,
                   help="overhead: measured seconds per interval and output (20)")
    p.add_argument("--min-batches", type=int, default=20,
                   help="overhead: at least this many measured batches per configuration (20)")
    p.add_argument("--eo-batches", type=int, default=100,
                   help="exactly-once: batches of 1,000 records each store streams (100)")
    p.add_argument("--eo-stores", default="",
                   help="exactly-once: comma-separated store variants (all): "
                        "none,kafka-commitAsync,kafka,checkpoint,zookeeper,sqlite,sqlite-tx,"
                        "postgres,postgres-tx,hbase")
    p.add_argument("--partition-counts", default="1,16,64,256",
                   help="partitions: partition counts (1,16,64,256)")
    p.add_argument("--rates", default="10000,25000,50000,100000",
                   help="steady: producer rate steps in records/s (10000,25000,50000,100000)")
    p.add_argument("--steady-seconds", type=float, default=20.0,
                   help="steady: seconds the producer writes per rate step (20)")
    p.add_argument("--steady-interval", type=float, default=1.0,
                   help="steady: batch interval / trigger of every contender, seconds (1)")
    p.add_argument("--planning-partitions", default="1,16,64,256,1000",
                   help="planning: partition counts of its one-topic streams (1,16,64,256,1000)")
    p.add_argument("--planning-topics", type=int, default=50,
                   help="planning: topics of its SubscribePattern stream (50; 0: none)")
    p.add_argument("--planning-topic-partitions", type=int, default=4,
                   help="planning: partitions of each of those topics (4)")
    p.add_argument("--planning-interval", type=float, default=0.5,
                   help="planning: batch interval in seconds (0.5)")
    p.add_argument("--planning-batches", type=int, default=20,
                   help="planning: measured batches per configuration (20)")
    p.add_argument("--executor-cores", default="1,2,4",
                   help="multicore: cores of the one standalone executor, one sub-workload each "
                        "(1,2,4)")
    p.add_argument("--multicore-partitions", type=int, default=16,
                   help="multicore: partitions of its topic (16)")
    p.add_argument("--multicore-batches", type=int, default=20,
                   help="multicore: batches the drain is split into (20)")
    p.add_argument("--soak-minutes", type=float, default=30.0,
                   help="soak: minutes the producer writes at --soak-rate (30)")
    p.add_argument("--soak-rate", type=int, default=2000, help="soak: records/s (2000)")
    p.add_argument("--soak-interval", type=float, default=1.0,
                   help="soak: batch interval in seconds (1)")
    p.add_argument("--soak-warmup-minutes", type=float, default=5.0,
                   help="soak: first minutes left out of the resource judgement (5)")
    p.add_argument("--soak-sample-seconds", type=float, default=10.0,
                   help="soak: seconds between resource samples (10)")
    p.add_argument("--k2k-rates", default="1000,10000,50000",
                   help="k2k: input rates in records/s, one row each (1000,10000,50000)")
    p.add_argument("--k2k-seconds", type=float, default=40.0,
                   help="k2k: seconds the producer writes per row (40)")
    p.add_argument("--k2k-warmup", type=float, default=10.0,
                   help="k2k: seconds of each row's records left out of the figures (10)")
    p.add_argument("--k2k-variants", default="",
                   help="k2k: comma-separated variants of benchmarks.latency (dk-alo,dk-eo,"
                        "ss-pt0,ss-pt1,ss-rtm; dk-alo-fast and dk-eo-fast on request)")
    p.add_argument("--batch-repetitions", type=int, default=1,
                   help="overhead, steady, exactly-once: measured rounds and no warm-up round "
                        "(every run drops its own warm-up batches or step and pools many "
                        "batches) (1)")
    p.add_argument("--publish", action="store_true",
                   help="also write benchmarks/RESULTS.md and its chart from this run "
                        "(see benchmarks/publish.py)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 200,000 records, 1 repetition, no warm-up; overhead: outputs "
                        "count,job, 2 s (at least 5 batches) per configuration; exactly-once: 20 "
                        "batches; partitions 1,16; steady: rates 10000,50000, 8 s each; soak: "
                        "2 minutes, 0.5 of them warm-up, a sample every 5 s; k2k: 1,000 "
                        "records/s, 15 s a row, 5 of them dropped "
                        "(a few minutes per workload)")
    args = p.parse_args(argv)
    if args.quick:
        defaults = {a.dest: a.default for a in p._actions}
        for key, value in QUICK.items():
            if getattr(args, key) == defaults[key]:  # explicit options still win
                setattr(args, key, value)
    args.workloads = [w for w in args.workloads.split(",") if w]
    for w in args.workloads:
        if w not in WORKLOADS:
            p.error(f"unknown workload {w!r}; choose from {', '.join(WORKLOADS)}")
    args.contenders = [c for c in args.contenders.split(",") if c]
    for c in args.contenders:
        if c not in CONTENDERS:
            p.error(f"unknown contender {c!r}; choose from {', '.join(CONTENDERS)}")
    try:
        args.intervals = [float(x) for x in args.intervals.split(",") if x]
        args.partition_counts = [int(x) for x in str(args.partition_counts).split(",") if x]
        args.rates = [int(float(x)) for x in str(args.rates).split(",") if x]
        args.planning_partitions = [int(x) for x in str(args.planning_partitions).split(",") if x]
        args.executor_cores = [int(x) for x in str(args.executor_cores).split(",") if x]
    except ValueError as exc:
        p.error(f"--intervals / --partition-counts / --rates / --planning-partitions / "
                f"--executor-cores: {exc}")
    if (not args.executor_cores or min(args.executor_cores) < 1 or args.multicore_partitions < 1
            or args.multicore_batches < 2):
        p.error("--executor-cores needs counts >= 1, --multicore-partitions >= 1 and "
                "--multicore-batches >= 2 (the first batch creates the consumers)")
    if (not args.planning_partitions or min(args.planning_partitions) < 1 or args.planning_topics < 0
            or args.planning_topic_partitions < 1 or args.planning_interval <= 0
            or args.planning_batches < 1):
        p.error("--planning-partitions needs counts >= 1, --planning-topics >= 0, "
                "--planning-topic-partitions and --planning-batches >= 1, --planning-interval > 0")
    if not args.rates or min(args.rates) <= 0:
        p.error("--rates needs positive records/s")
    if args.steady_seconds <= 0 or args.steady_interval <= 0 or args.batch_repetitions < 1:
        p.error("--steady-seconds and --steady-interval must be positive, --batch-repetitions >= 1")
    if not args.intervals or min(args.intervals) <= 0:
        p.error("--intervals needs positive seconds")
    if not args.partition_counts or min(args.partition_counts) < 1:
        p.error("--partition-counts needs counts >= 1")
    for problem in soak_option_errors(args.soak_minutes, args.soak_rate, args.soak_interval,
                                      args.soak_warmup_minutes, args.soak_sample_seconds):
        p.error(problem)
    from benchmarks.latency import DEFAULT_VARIANTS as K2K_DEFAULT
    from benchmarks.latency import VARIANTS as K2K_VARIANTS

    try:
        args.k2k_rates = [int(float(x)) for x in str(args.k2k_rates).split(",") if x]
    except ValueError as exc:
        p.error(f"--k2k-rates: {exc}")
    args.k2k_variants = [v for v in args.k2k_variants.split(",") if v] or list(K2K_DEFAULT)
    for v in args.k2k_variants:
        if v not in K2K_VARIANTS:
            p.error(f"unknown k2k variant {v!r}; choose from {', '.join(K2K_VARIANTS)}")
    if (not args.k2k_rates or min(args.k2k_rates) <= 0 or args.k2k_seconds <= 0
            or not 0 <= args.k2k_warmup < args.k2k_seconds):
        p.error("--k2k-rates needs positive records/s, --k2k-seconds > 0 and "
                "0 <= --k2k-warmup < --k2k-seconds")
    args.outputs = [o for o in args.outputs.split(",") if o]
    from benchmarks.adapter import OVERHEAD_OUTPUTS
    from benchmarks.adapter_stores import STORE_VARIANTS

    for o in args.outputs:
        if o not in OVERHEAD_OUTPUTS:
            p.error(f"unknown output {o!r}; choose from {', '.join(OVERHEAD_OUTPUTS)}")
    args.eo_stores = [v for v in args.eo_stores.split(",") if v] or list(STORE_VARIANTS)
    for v in args.eo_stores:
        if v not in STORE_VARIANTS:
            p.error(f"unknown store variant {v!r}; choose from {', '.join(STORE_VARIANTS)}")
    if args.out is None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        args.out = _REPO / "benchmarks" / "results" / stamp
    return args


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    # Workers unpickle functions of benchmarks.adapter by reference: the repo must be importable.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_REPO), env.get("PYTHONPATH")]))
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    return env


class Runner:
    """Runs single contender processes and turns their output into run records."""

    def __init__(self, out: Path, bootstrap: str, broker_pid: int | None, timeout: float) -> None:
        self.out = out
        self.bootstrap = bootstrap
        import psutil  # imported here so the pure helpers of this module need no psutil

        self.broker = psutil.Process(broker_pid) if broker_pid else None
        self.timeout = timeout
        self.java_classpath: str | None = None
        self.versions: dict[str, str] = {}
        self.counter = 0
        #: Per-workload options handed to the contender in its spec (intervals, services...).
        self.options: dict[str, dict[str, Any]] = {}
        #: Per-workload run timeouts that override ``timeout`` (the soak runs for its minutes).
        self.timeouts: dict[str, float] = {}
        #: Environment only the contender processes get (the PostgreSQL password): never in a file.
        self.secret_env: dict[str, str] = {}

    def prepare(self, names: set[str]) -> None:
        """Resolve jars and compile Java once, outside every timed region."""
        if names & {"java-dstream-rdd", "java-dstream-stream"}:
            from benchmarks.contenders.jvm import build_dstream_drain

            self.java_classpath, version = build_dstream_drain(self.out / "java-build")
            self.versions["spark-streaming-kafka-0-10"] = version
        if any(n.startswith("ss-") for n in names):
            from benchmarks.jars import sql_kafka_jars

            self.versions["spark-sql-kafka-0-10"] = sql_kafka_jars()[0]

    def _broker_cpu(self) -> float:
        if self.broker is None:
            return 0.0
        t = self.broker.cpu_times()
        return t.user + t.system

    def run(self, name: str, workload: str, topic: TopicInfo, round_no: int, warmup: bool) -> dict[str, Any]:
        self.counter += 1
        run_id = f"{self.counter:03d}-{workload}-{name}"
        logs = self.out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        spec = {"contender": name, "workload": workload, "kind": workload_kind(workload),
                "bootstrap": self.bootstrap, "topic": topic.to_json(), "run_id": self.counter,
                "processes": 2, "options": self.options.get(workload, {}),
                "result_path": str(logs / f"{run_id}.result.json")}
        spec_path = logs / f"{run_id}.spec.json"
        spec_path.write_text(json.dumps(spec))
        contender = CONTENDERS[name]
        if contender.kind == "python":
            argv = [sys.executable, "-m", "benchmarks.runner", str(spec_path)]
        else:
            from benchmarks.contenders.jvm import java_command

            argv = java_command(name, spec, self.java_classpath)
        record: dict[str, Any] = {"contender": name, "family": contender.family, "workload": workload,
                                  "round": round_no, "warmup": warmup, "run_id": run_id, "ok": False}
        broker0, t0 = self._broker_cpu(), time.perf_counter()
        with open(logs / f"{run_id}.log", "wb") as log:
            proc = subprocess.Popen(argv, stdout=log if name != "kafka-perf" else subprocess.PIPE,
                                    stderr=log, cwd=_REPO, env={**_child_env(), **self.secret_env})
            with TreeSampler(proc.pid) as sampler:
                stdout = b""
                try:
                    stdout, _ = proc.communicate(timeout=self.timeouts.get(workload, self.timeout))
                except BaseException as exc:  # timeout, or the run is being interrupted
                    proc.kill()
                    proc.communicate()
                    if not isinstance(exc, subprocess.TimeoutExpired):
                        raise
                    record["error"] = f"killed after {self.timeouts.get(workload, self.timeout):.0f}s"
        record["process_seconds"] = time.perf_counter() - t0
        record["broker_cpu_seconds"] = self._broker_cpu() - broker0
        usage = sampler.usage
        record.update(peak_rss_driver_mb=usage.peak_rss_driver_mb,
                      peak_rss_workers_mb=usage.peak_rss_workers_mb,
                      peak_rss_total_mb=usage.peak_rss_total_mb, max_processes=usage.max_processes)
        if "error" in record:
            return record
        try:
            if name == "kafka-perf":
                from benchmarks.contenders.jvm import parse_consumer_perf

                (logs / f"{run_id}.stdout").write_bytes(stdout or b"")
                result = parse_consumer_perf((stdout or b"").decode(errors="replace"))
            else:
                result = json.loads(Path(spec["result_path"]).read_text())
        except (OSError, ValueError) as exc:
            record["error"] = f"no result (exit {proc.returncode}): {exc}; see logs/{run_id}.log"
            return record
        if "error" in result:
            record["error"] = result["error"]
            record["traceback"] = result.get("traceback")
            return record
        if workload in LATENCY_WORKLOADS:
            return self._finish_latency(record, result, topic)
        if workload == "steady":
            return self._finish_steady(record, result)
        if workload == "soak":
            return finish_soak(record, result)
        return self._finish(record, result, topic)

    @staticmethod
    def _finish_latency(record: dict[str, Any], result: dict[str, Any], topic: TopicInfo) -> dict[str, Any]:
        """A latency run: keep every configuration's per-batch rows; check what each one read.

        ``overhead`` configurations must read nothing (the topic is idle); ``exactly-once`` ones
        must each read the whole topic once. A configuration that fails either way, or raised,
        carries an ``error`` and adds no rows; the run is ok when at least one configuration is.
        """
        latency = result.get("latency") or {}
        expected = topic.records
        from benchmarks.adapter import work_ms

        for config, data in latency.items():
            if data.get("error"):
                continue
            for row in data.get("rows") or []:
                if "work" not in row:  # the JVM program reports plan and output only
                    row["work"] = work_ms(row)
            read = sum(int(r.get("records") or 0) for r in
                       [*(data.get("rows") or []), *(data.get("warmup_rows") or [])])
            if record["workload"] == "exactly-once":
                read = int(data.get("records", read))
            if read != expected:
                data["error"] = f"read {read} records, the topic holds {expected}"
            elif not data.get("rows"):
                data["error"] = "no measured batches"
        cpu = result.get("cpu_seconds")
        record.update(kind="latency", records=int(result.get("records") or 0), expected=expected,
                      seconds=float(result.get("seconds") or 0.0), checksum=None,
                      extra=result.get("extra", {}), latency=latency, records_per_s=None,
                      mb_per_s=None, cpu_seconds=cpu, cpu_s_per_million=None,
                      cpu_scope="timed region, process tree" if cpu is not None else "not measured")
        good = [c for c, d in latency.items() if not d.get("error")]
        if not good:
            errors = {c: d.get("error") for c, d in latency.items()}
            record["error"] = f"no configuration succeeded: {errors}" if errors else "no configurations"
            return record
        record["ok"] = True
        return record

    @staticmethod
    def _finish_steady(record: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """A steady run: keep its rate steps; ok when at least one measured step has batches."""
        steps = result.get("steps") or []
        pooled_run(record, result, "steady", "rate steps, process tree without the producer",
                   steps=steps)
        if not any(s.get("batches") for s in steps if not s.get("warmup")):
            skipped = next((s["skipped"] for s in steps if s.get("skipped")), None)
            record["error"] = "no measured step committed a batch" + (f": {skipped}" if skipped else "")
            return record
        record["ok"] = True
        return record

    @staticmethod
    def _finish(record: dict[str, Any], result: dict[str, Any], topic: TopicInfo) -> dict[str, Any]:
        records, seconds = int(result["records"]), float(result["seconds"])
        record.update(records=records, expected=topic.records, seconds=seconds,
                      checksum=result.get("checksum"), extra=result.get("extra", {}))
        record["records_per_s"] = records / seconds if seconds > 0 else None
        record["mb_per_s"] = records * topic.value_bytes / seconds / 1e6 if seconds > 0 else None
        cpu = result.get("cpu_seconds")
        record["cpu_scope"] = "timed region, process tree" if cpu is not None else "not measured"
        record["cpu_seconds"] = cpu
        record["cpu_s_per_million"] = cpu / records * 1e6 if cpu is not None and records else None
        if records != topic.records:
            record["error"] = f"read {records} records, the topic holds {topic.records}"
            return record
        record["ok"] = True
        return record


def _check_checksums(runs: list[dict[str, Any]]) -> list[str]:
    """Every contender that reports a checksum must agree with the others of its workload."""
    problems = []
    seen: dict[str, dict[Any, list[str]]] = {}
    for r in runs:
        if r.get("ok") and r.get("checksum") is not None:
            seen.setdefault(r["workload"], {}).setdefault(r["checksum"], []).append(r["contender"])
    for workload, sums in seen.items():
        if len(sums) > 1:
            problems.append(f"{workload}: checksums differ: {sums}")
    return problems


def expand_plan(workloads: list[str], selected: list[str], partition_counts: list[int],
                executor_cores: Sequence[int] = ()) -> dict[str, list]:
    """Map every workload to its contenders; ``partitions`` becomes ``partitions-p<N>`` per count
    and ``multicore`` ``multicore-c<K>`` per executor core count."""
    plan: dict[str, list] = {}
    for w in workloads:
        contenders = contenders_for(w, selected)
        if not contenders:
            continue
        if w == "partitions":
            for n in partition_counts:
                plan[f"partitions-p{n}"] = contenders
        elif w == "multicore":
            for k in executor_cores:
                plan[f"{MULTICORE_PREFIX}{k}"] = contenders
        else:
            plan[w] = contenders
    return plan


def rounds_for(workload: str, args: argparse.Namespace) -> tuple[int, int]:
    """``(warm-up rounds, measured rounds)`` of a (sub-)workload."""
    if workload in BATCH_WORKLOADS:
        return 0, args.batch_repetitions
    return args.warmup, args.repetitions


def workload_options(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The options each workload's contenders receive in their spec."""
    multicore = {f"{MULTICORE_PREFIX}{k}": {"executor_cores": k, "batches": args.multicore_batches}
                 for k in args.executor_cores}
    return {
        **multicore,
        "overhead": {"intervals": args.intervals, "outputs": args.outputs,
                     "overhead_seconds": args.overhead_seconds, "min_batches": args.min_batches,
                     "warmup_batches": LATENCY_WARMUP_BATCHES},
        "steady": {"steady_rates": args.rates, "steady_seconds": args.steady_seconds,
                   "steady_interval": args.steady_interval, "value_bytes": args.value_bytes,
                   "steady_warmup_seconds": STEADY_WARMUP_SECONDS},
        "exactly-once": {"eo_variants": args.eo_stores, "eo_batches": args.eo_batches,
                         "eo_records_per_partition": EO_RECORDS_PER_PARTITION,
                         "eo_batch_seconds": EO_BATCH_SECONDS, "warmup_batches": LATENCY_WARMUP_BATCHES},
        "planning": {"configs": planning_configs(args.planning_partitions, args.planning_topics,
                                                 args.planning_topic_partitions),
                     "interval": args.planning_interval, "batches": args.planning_batches,
                     "warmup_batches": LATENCY_WARMUP_BATCHES},
        "soak": {"soak_minutes": args.soak_minutes, "soak_rate": args.soak_rate,
                 "soak_interval": args.soak_interval, "soak_warmup_minutes": args.soak_warmup_minutes,
                 "soak_sample_seconds": args.soak_sample_seconds, "value_bytes": args.value_bytes},
    }


def _prepare_topic(cluster: Any, workload: str, args: argparse.Namespace, workdir: Path,
                   log: Path) -> TopicInfo:
    if workload in ("overhead", "steady", "soak"):  # created empty; steady's and soak's runs write
        # their own records
        name = f"bench-{workload}-p{args.partitions}"
        cluster.create_topic(name, partitions=args.partitions, replication_factor=1)
        ends = {int(p): int(o) for p, o in cluster.end_offsets(name).items()}
        return TopicInfo(name=name, partitions=args.partitions, records=0,
                         value_bytes=args.value_bytes, kind="bytes", end_offsets=ends)
    if workload == "planning":  # idle topics: the workload measures the driver's planning only
        configs = planning_configs(args.planning_partitions, args.planning_topics,
                                   args.planning_topic_partitions)
        topics = {t: n for c in configs.values() for t, n in c["topics"].items()}
        for name, partitions in topics.items():
            cluster.create_topic(name, partitions=partitions, replication_factor=1)
        return TopicInfo(name=f"{PLANNING_PREFIX}-* ({len(topics)} topics)",
                         partitions=sum(topics.values()), records=0, value_bytes=args.value_bytes,
                         kind="bytes", end_offsets={})
    if workload == "exactly-once":
        records = args.eo_batches * EO_RECORDS_PER_PARTITION * args.partitions
        return fill_topic(cluster, f"bench-exactly-once-p{args.partitions}", args.partitions, records,
                          args.value_bytes, "bytes", workdir, log)
    if workload.startswith(MULTICORE_PREFIX):
        return fill_topic(cluster, f"bench-multicore-p{args.multicore_partitions}",
                          args.multicore_partitions, args.records, args.value_bytes, "bytes", workdir,
                          log)
    if workload.startswith("partitions-p"):
        n = int(workload[len("partitions-p"):])
        return fill_topic(cluster, f"bench-partitions-p{n}", n, args.records, args.value_bytes,
                          "bytes", workdir, log)
    kind = "json" if workload == "json" else "bytes"
    return fill_topic(cluster, f"bench-{workload}-p{args.partitions}", args.partitions, args.records,
                      args.value_bytes, kind, workdir, log)


class _Services:
    """PostgreSQL, ZooKeeper and HBase for the exactly-once and soak workloads; a failed start is
    recorded, not fatal. Each server starts once, however often :meth:`start` asks for it.

    PostgreSQL needs a random password over TCP; ``params`` never hold it (they go into spec
    files and results): :attr:`secret_env` carries it to the contenders as ``PGPASSWORD``.
    """

    def __init__(self) -> None:
        self.started: list[Any] = []
        self.params: dict[str, Any] = {}
        self.secret_env: dict[str, str] = {}

    def start(self, stores: list[str]) -> dict[str, Any]:
        if any(v.startswith("postgres") for v in stores) and "postgres" not in self.params:
            try:
                import secrets

                from tests.support.postgres import PostgresServer

                server = PostgresServer(dbname="bench", password=secrets.token_urlsafe(18)).start()
                self.started.append(server)
                public, env = split_password({"postgres": server.dsn_params()})
                self.params["postgres"] = public["postgres"]
                self.secret_env.update(env)
            except Exception as exc:
                self.params["postgres_error"] = f"{type(exc).__name__}: {exc}"
        if "zookeeper" in stores:
            try:
                from tests.support.zookeeper import ZooKeeperServer

                server = ZooKeeperServer().start()
                self.started.append(server)
                self.params["zookeeper"] = server.hosts
            except Exception as exc:
                self.params["zookeeper_error"] = f"{type(exc).__name__}: {exc}"
        if "hbase" in stores:
            try:
                from dstream_kafka.operate.services.hbase import HBaseServer

                hbase = HBaseServer().start(timeout=180.0)
                self.started.append(hbase)
                self.params["hbase"] = [hbase.host, hbase.thrift_port]
            except Exception as exc:
                self.params["hbase_error"] = f"{type(exc).__name__}: {exc}"
        return self.params

    def stop(self) -> None:
        for server in reversed(self.started):
            try:
                server.stop()
            except Exception as exc:  # pragma: no cover - best effort at exit
                print(f"benchmarks: stopping {type(server).__name__} failed: {exc}", flush=True)


def _status(rec: dict[str, Any]) -> str:
    if not rec.get("ok"):
        return f"FAILED: {str(rec.get('error'))[:200]}"
    if rec.get("kind") == "steady":
        return "; ".join(
            f"{s['step']} skipped" if s.get("skipped") else
            f"{s['step']} p50 {s['latency_ms']['p50']} ms p99 {s['latency_ms']['p99']} ms "
            f"{'stable' if s.get('stable') else 'NOT stable' if s.get('stable') is False else 'not judged'}"
            for s in rec.get("steps") or [] if not s.get("warmup"))[:600]
    if rec.get("kind") == "soak":
        return soak_status(rec)
    if rec.get("kind") != "latency":
        return f"{rec['records_per_s']:>12,.0f} rec/s"
    parts = []
    for config, data in (rec.get("latency") or {}).items():
        if data.get("error"):
            parts.append(f"{config} FAILED")
            continue
        key = {"overhead": "total", "planning": "plan"}.get(rec["workload"], "store_cost")
        vals = sorted(r[key] for r in data.get("rows") or [] if r.get(key) is not None)
        if vals:
            parts.append(f"{config} {key} p50 {vals[len(vals) // 2]:.1f} ms")
    return "; ".join(parts)[:600]


def _run_k2k(args: argparse.Namespace, bootstrap: str, done: int) -> list[dict[str, Any]]:
    """The ``k2k`` workload: each variant of :mod:`benchmarks.latency` in its own process per
    round (``--batch-repetitions``), all rates in it, against this run's broker."""
    from benchmarks.latency import harness_run, k2k_status

    runs: list[dict[str, Any]] = []
    for round_no in range(args.batch_repetitions):
        for variant in args.k2k_variants:
            rec = harness_run(args.out, bootstrap, variant, args.k2k_rates, args.k2k_seconds,
                              args.k2k_warmup, round_no, done + len(runs) + 1,
                              max(args.run_timeout, len(args.k2k_rates) * (args.k2k_seconds + 300)),
                              _child_env())
            runs.append(rec)
            print(f"  [k2k r{round_no}] {variant:<22} {k2k_status(rec)}", flush=True)
    return runs


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # A long run stopped with SIGTERM (or SIGINT, which a background job ignores) still stops
    # its broker and services and writes the report of the runs it finished.
    signal.signal(signal.SIGTERM, _interrupt)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    plan = expand_plan(args.workloads, args.contenders, args.partition_counts, args.executor_cores)
    options = workload_options(args)
    meta: dict[str, Any] = {"command": " ".join(["python -m benchmarks", *(argv or sys.argv[1:])]),
                            "records": args.records,
                            "value_bytes": args.value_bytes, "partitions": args.partitions,
                            "repetitions": args.repetitions, "warmup": args.warmup,
                            "batch_repetitions": args.batch_repetitions,
                            "quick": args.quick, "machine": machine_facts(),
                            "commit": git_commit(), "kafka_version": KAFKA_VERSION,
                            "started_utc": datetime.now(timezone.utc).isoformat()}
    described = {}
    if "overhead" in plan:
        described["overhead intervals (s)"] = ",".join(f"{i:g}" for i in args.intervals)
        described["overhead outputs"] = ",".join(args.outputs)
        described["overhead batches per configuration"] = (
            f"max({args.min_batches}, {args.overhead_seconds:g} s / interval) after "
            f"{LATENCY_WARMUP_BATCHES} warm-up batches")
    if "exactly-once" in plan:
        described["exactly-once"] = (f"{args.eo_batches} batches x "
                                     f"{EO_RECORDS_PER_PARTITION * args.partitions:,} records per store, "
                                     f"{EO_BATCH_SECONDS:g} s interval, stores {','.join(args.eo_stores)}")
    if "planning" in plan:
        described["planning"] = (
            f"one Subscribe stream per partition count {','.join(map(str, args.planning_partitions))}"
            + (f" and one SubscribePattern stream over {args.planning_topics} topics x "
               f"{args.planning_topic_partitions} partitions" if args.planning_topics else "")
            + f"; {args.planning_batches} batches of {args.planning_interval:g} s after "
              f"{LATENCY_WARMUP_BATCHES} warm-up batches, output count + commitAsync")
    if any(w.startswith("partitions-p") for w in plan):
        described["partition counts"] = ",".join(map(str, args.partition_counts))
    if any(w.startswith(MULTICORE_PREFIX) for w in plan):
        described["multicore"] = (
            f"one standalone executor of {' / '.join(map(str, args.executor_cores))} cores, "
            f"a streaming drain of {args.multicore_partitions} partitions in "
            f"{args.multicore_batches} batches")
    if "steady" in plan:
        meta["steady_interval"] = args.steady_interval
        described["steady"] = (f"rates {' / '.join(f'{r:,}' for r in args.rates)} records/s, "
                               f"{args.steady_seconds:g} s each after a {STEADY_WARMUP_SECONDS:g} s "
                               f"warm-up step, {args.steady_interval:g} s batches")
    if "soak" in plan:
        described["soak"] = (f"{args.soak_minutes:g} min at {args.soak_rate:,} records/s, "
                             f"{args.soak_interval:g} s batches, PostgreSQL store with the sink in "
                             f"its transaction; {args.soak_warmup_minutes:g} min warm-up, a sample "
                             f"every {args.soak_sample_seconds:g} s")
    if "k2k" in args.workloads:
        meta["k2k"] = {"seconds": args.k2k_seconds, "warmup": args.k2k_warmup}
        described["k2k"] = (f"rates {' / '.join(f'{r:,}' for r in args.k2k_rates)} records/s on "
                            f"4 partitions, {args.k2k_seconds:g} s per row, the "
                            f"first {args.k2k_warmup:g} s dropped; variants "
                            f"{','.join(args.k2k_variants)}, one process each")
    meta["workload_options"] = described
    print(f"benchmarks: writing to {args.out}", flush=True)
    runs: list[dict[str, Any]] = []
    services = _Services()
    cluster = start_broker()
    spark_cluster = None
    try:
        if any(c.name.endswith(CLUSTER_SUFFIX) for cs in plan.values() for c in cs):
            from tests.support.spark_cluster import SparkStandaloneCluster

            # Executors' Python workers run in the workers' folders: the tasks' functions come
            # from this checkout's `benchmarks` package.
            path = os.pathsep.join(p for p in (str(_REPO), os.environ.get("PYTHONPATH", "")) if p)
            # Workers offer as many cores as the largest multicore executor needs (the steady
            # workload's executors take one core on each worker).
            cores = max(args.executor_cores) if "multicore" in args.workloads else 1
            spark_cluster = SparkStandaloneCluster(workers=2, cores=cores,
                                                   env={"PYTHONPATH": path}).start()
            for opts in options.values():
                opts["cluster_master"] = spark_cluster.master_url
        workdir = Path(tempfile.mkdtemp(prefix="bench-"))
        topics: dict[str, TopicInfo] = {}
        for workload in plan:
            t = time.perf_counter()
            # Every multicore sub-workload drains the same topic (a stream never changes it).
            shared = next((t for w, t in topics.items() if w.startswith(MULTICORE_PREFIX)), None)
            topics[workload] = (shared if shared is not None and workload.startswith(MULTICORE_PREFIX)
                                else _prepare_topic(cluster, workload, args, workdir,
                                                    args.out / "producer.log"))
            print(f"  prepared {topics[workload].name}: {topics[workload].records:,} records in "
                  f"{time.perf_counter() - t:.1f}s", flush=True)
        meta["topics"] = {w: t.to_json() for w, t in topics.items()}
        if "exactly-once" in plan:
            options["exactly-once"]["services"] = services.start(args.eo_stores)
            meta["services"] = {k: (v if k.endswith("_error") else "started")
                                for k, v in options["exactly-once"]["services"].items()}
        if "soak" in plan:
            started_services = services.start(["postgres"])  # shared with exactly-once when both run
            options["soak"]["services"] = {k: v for k, v in started_services.items()
                                           if k.startswith("postgres")}
            meta["services"] = {k: (v if k.endswith("_error") else "started")
                                for k, v in started_services.items()}
        broker_pid = next(iter(cluster.broker_pids().values()))
        runner = Runner(args.out, cluster.bootstrap_servers, broker_pid, args.run_timeout)
        runner.options = options
        runner.secret_env = services.secret_env
        # The soak runs for its minutes, the drain and Spark's start-up: more than --run-timeout.
        runner.timeouts["soak"] = max(args.run_timeout, args.soak_minutes * 60.0 + 600.0)
        runner.prepare({c.name for cs in plan.values() for c in cs})
        meta["connector_versions"] = runner.versions
        for workload, contenders in plan.items():
            warmups, reps = rounds_for(workload, args)
            for round_no in range(warmups + reps):
                warm = round_no < warmups
                for contender in contenders:
                    rec = runner.run(contender.name, workload, topics[workload], round_no, warm)
                    runs.append(rec)
                    print(f"  [{workload} r{round_no}{' warm-up' if warm else ''}] "
                          f"{contender.name:<22} {_status(rec)}", flush=True)
        if "k2k" in args.workloads:
            runs += _run_k2k(args, cluster.bootstrap_servers, len(runs))
    except KeyboardInterrupt:  # SIGINT or SIGTERM: report what was measured so far
        meta["interrupted"] = f"interrupted after {len(runs)} runs; the rest did not run"
        print(f"benchmarks: {meta['interrupted']}", flush=True)
    finally:
        services.stop()
        if spark_cluster is not None:
            spark_cluster.stop()
        cluster.stop()
    meta["elapsed_seconds"] = time.perf_counter() - started
    meta["checksum_problems"] = _check_checksums(runs)
    summary = summarize(runs)
    report = markdown_report(runs, meta)
    if meta["checksum_problems"]:
        report += "\n## Checksum disagreements\n\n" + "\n".join(f"- {p}" for p in meta["checksum_problems"])
    (args.out / "results.json").write_text(json.dumps(
        {"meta": meta, "runs": runs, "summary": summary, "latency_summary": summarize_latency(runs),
         "steady_summary": summarize_steady(runs), "soak_summary": summarize_soak(runs),
         "goals": all_goals(runs)},
        indent=2, default=str))
    (args.out / "report.md").write_text(report + "\n")
    try:
        from benchmarks.chart import write_chart

        write_chart(summary, args.out / "chart.png", meta, summarize_latency(runs), summarize_steady(runs),
                    runs)
    except ImportError as exc:
        print(f"benchmarks: no chart ({exc}); pip install matplotlib", flush=True)
    print(report)
    print(f"benchmarks: done in {meta['elapsed_seconds']:.0f}s; results in {args.out}")
    if args.publish:
        print(f"benchmarks: wrote {publish(args.out)}")
    config_failed = any(isinstance(d, dict) and d.get("error")
                        for r in runs for d in (r.get("latency") or {}).values())
    return 0 if all(r.get("ok") for r in runs) and not config_failed else 1
