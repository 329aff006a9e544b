"""The ``python -m benchmarks`` command: broker, topics, alternating runs, results.

Order of a run:

1. record the machine (cores, memory, load, versions);
2. start one Kafka broker on 127.0.0.1 and fill one topic per workload with Kafka's
   ProducerPerformance (``bytes`` values for ``drain``, JSON values for ``json``);
3. prepare the JVM contenders (resolve connector jars, compile ``DStreamDrain.java``) outside
   any timed region;
4. for every workload, run ``warmup + repetitions`` rounds; each round runs every selected
   contender once, in the same order (ABCABC), each in a fresh process; round 0 is the warm-up
   and is labelled and excluded from statistics;
5. write ``results.json`` (every run, the machine, the summary, the goals), ``report.md`` and
   ``chart.png``, and print the report.

A contender that fails is recorded with its error and the run goes on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from benchmarks.broker import TopicInfo, fill_topic, start_broker
from benchmarks.contenders import CONTENDERS, WORKLOADS, contenders_for
from benchmarks.monitor import TreeSampler, machine_facts
from benchmarks.report import check_goals, markdown_report, summarize

__all__ = ["main", "parse_args"]

_REPO = Path(__file__).resolve().parents[1]
QUICK = {"records": 200_000, "repetitions": 1, "warmup": 0}


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
    p.add_argument("--workloads", default=",".join(WORKLOADS),
                   help=f"comma-separated, from {','.join(WORKLOADS)} (all)")
    p.add_argument("--contenders", default="",
                   help=f"comma-separated subset of {','.join(CONTENDERS)} (all)")
    p.add_argument("--out", type=Path, default=None,
                   help="output folder (benchmarks/results/<UTC timestamp>)")
    p.add_argument("--run-timeout", type=float, default=900.0, help="seconds before a run is killed")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 200,000 records, 1 repetition, no warm-up (a few minutes)")
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
        spec = {"contender": name, "workload": workload, "bootstrap": self.bootstrap,
                "topic": topic.to_json(), "run_id": self.counter, "processes": 2,
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
                                    stderr=log, cwd=_REPO, env=_child_env())
            with TreeSampler(proc.pid) as sampler:
                stdout = b""
                try:
                    stdout, _ = proc.communicate(timeout=self.timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.communicate()
                    record["error"] = f"killed after {self.timeout:.0f}s"
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
        return self._finish(record, result, topic)

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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    meta: dict[str, Any] = {"command": " ".join(sys.argv), "records": args.records,
                            "value_bytes": args.value_bytes, "partitions": args.partitions,
                            "repetitions": args.repetitions, "warmup": args.warmup,
                            "machine": machine_facts(),
                            "started_utc": datetime.now(timezone.utc).isoformat()}
    plan = {w: contenders_for(w, args.contenders) for w in args.workloads}
    plan = {w: cs for w, cs in plan.items() if cs}
    print(f"benchmarks: writing to {args.out}", flush=True)
    runs: list[dict[str, Any]] = []
    cluster = start_broker()
    try:
        workdir = Path(tempfile.mkdtemp(prefix="bench-"))
        topics: dict[str, TopicInfo] = {}
        for workload in plan:
            kind = "json" if workload == "json" else "bytes"
            name = f"bench-{workload}-p{args.partitions}"
            t = time.perf_counter()
            topics[workload] = fill_topic(cluster, name, args.partitions, args.records,
                                          args.value_bytes, kind, workdir, args.out / "producer.log")
            print(f"  filled {name}: {args.records:,} records in {time.perf_counter() - t:.1f}s", flush=True)
        meta["topics"] = {w: t.to_json() for w, t in topics.items()}
        broker_pid = next(iter(cluster.broker_pids().values()))
        runner = Runner(args.out, cluster.bootstrap_servers, broker_pid, args.run_timeout)
        runner.prepare({c.name for cs in plan.values() for c in cs})
        meta["connector_versions"] = runner.versions
        for workload, contenders in plan.items():
            for round_no in range(args.warmup + args.repetitions):
                warm = round_no < args.warmup
                for contender in contenders:
                    rec = runner.run(contender.name, workload, topics[workload], round_no, warm)
                    runs.append(rec)
                    status = (f"{rec['records_per_s']:>12,.0f} rec/s" if rec.get("ok")
                              else f"FAILED: {str(rec.get('error'))[:200]}")
                    print(f"  [{workload} r{round_no}{' warm-up' if warm else ''}] "
                          f"{contender.name:<22} {status}", flush=True)
    finally:
        cluster.stop()
    meta["elapsed_seconds"] = time.perf_counter() - started
    meta["checksum_problems"] = _check_checksums(runs)
    summary = summarize(runs)
    report = markdown_report(runs, meta)
    if meta["checksum_problems"]:
        report += "\n## Checksum disagreements\n\n" + "\n".join(f"- {p}" for p in meta["checksum_problems"])
    (args.out / "results.json").write_text(json.dumps(
        {"meta": meta, "runs": runs, "summary": summary, "goals": check_goals(summary)},
        indent=2, default=str))
    (args.out / "report.md").write_text(report + "\n")
    try:
        from benchmarks.chart import write_chart

        write_chart(summary, args.out / "chart.png", meta)
    except ImportError as exc:
        print(f"benchmarks: no chart ({exc}); pip install matplotlib", flush=True)
    print(report)
    print(f"benchmarks: done in {meta['elapsed_seconds']:.0f}s; results in {args.out}")
    return 0 if all(r.get("ok") for r in runs) else 1
