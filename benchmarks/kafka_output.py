"""Kafka to Kafka throughput: exactly-once against at-least-once and Structured Streaming's sink.

Issue #28 item 4, the throughput rows. Usage (from the repository root; small scale first)::

    .venv/bin/python -m benchmarks.kafka_output --records 20000 --partitions 4 --repetitions 1 \\
        --backends kafka-python,confluent-kafka --out /tmp/kafka-output.md

Full scale (the rows for ``benchmarks/RESULTS.md``)::

    .venv/bin/python -m benchmarks.kafka_output --records 1000000 --partitions 4 \\
        --repetitions 3 --backends kafka-python,confluent-kafka --out kafka-output.md

It starts one local broker and one ``local[2]`` SparkContext, fills an input topic (keys
``k<i>``, ``--value-bytes`` values), then runs ``--warmup`` + ``--repetitions`` rounds. Every
round runs every configuration once, in the same order (ABAB; the warm-up rounds are left out of
the medians), each writing the whole input into a fresh output topic of as many partitions:

* **dstream_kafka**, per backend (``kafka-python``, ``confluent-kafka``: the ``backend`` of
  :class:`~dstream_kafka.KafkaOutput`, passed explicitly) and per guarantee:
  ``KafkaUtils.createRDD`` over the input's ranges, ``map`` to ``(key, value)`` pairs,
  :meth:`~dstream_kafka.KafkaOutput.write` (one task and producer per input partition;
  exactly-once: one transaction per input partition that also moves a fresh group's offsets).
  The input is read with the context's consumer backend (the default, ``kafka-python``), the
  same for every row.
* **Structured Streaming's Kafka sink** (at-least-once: it has no exactly-once sink):
  ``spark.read.format("kafka")`` over the same input (batch, ``startingOffsets`` earliest,
  ``endingOffsets`` latest) ``.select("key", "value").write.format("kafka")``.

Everybody shares one JVM: the SparkContext starts once with the ``spark-sql-kafka`` connector
jars (:func:`benchmarks.jars.sql_kafka_jars`) on ``spark.jars`` and Structured Streaming's
``SparkSession`` wraps that same context, so no contender pays a JVM start and all share its
heap and JIT. Every producer gets ``linger.ms=5`` (the JVM client's default is 0 in
kafka-clients 3.9). A run's time is the write job only (the input's ranges are planned and the
DataFrame defined before the clock starts), so records/s is input read + output written.

After every run a ``read_committed`` reader counts the output topic: it must hold exactly the
input's records, for every row including Structured Streaming's; any mismatch is printed and
the exit status is 1. The report (printed, and written to ``--out``) is a Markdown table of
median records/s per configuration, its ratio to Structured Streaming's sink and exactly-once's
ratio to at-least-once of the same backend, with the commit, the load average before and after
and the versions.

End-to-end latency (produce time to the output's visibility) of a running stream, at-least-once
against exactly-once against Structured Streaming, is not measured here: those rows come from
the latency workload, :mod:`benchmarks.latency`.

Time: measured at small scale under a CI run's load (load average 16 on 2 cores), one round of
100k records took ~110 s (writes: kafka-python ~6-7k records/s, confluent-kafka ~17-24k,
Structured Streaming ~5k cold), about a third of it the read_committed counts and start-up. At
1M records a round is therefore ~8-10 min under such load, so the full-scale command (1 warm-up
+ 3 measured rounds of 5 configurations) takes about 35-40 minutes, roughly half that on a quiet
machine. Every configuration runs in the same slot of every round (ALO before EO per backend,
Structured Streaming last); single rounds are noisy, so read only the medians.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main", "plan", "summarise", "markdown_table", "SS_SINK", "OURS", "GUARANTEES"]

GUARANTEES = ("at-least-once", "exactly-once")
OURS = "dstream_kafka"
SS_SINK = "Structured Streaming Kafka sink"
BACKENDS = ("kafka-python", "confluent-kafka")
#: Producer settings every contender gets (the JVM client takes them with a ``kafka.`` prefix).
PRODUCER_SETTINGS = {"linger.ms": "5"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.kafka_output",
                                     description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000, help="input records (default 20000)")
    parser.add_argument("--partitions", type=int, default=4, help="input partitions (default 4)")
    parser.add_argument("--repetitions", type=int, default=1, help="rounds (default 1)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="rounds run first and left out of the medians (default 1: the "
                             "first writes also start the Python workers and producers)")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="comma-separated: kafka-python, confluent-kafka (default both)")
    parser.add_argument("--value-bytes", type=int, default=100, help="value size (default 100)")
    parser.add_argument("--no-ss", action="store_true",
                        help="leave out Structured Streaming's sink (no connector jars needed)")
    parser.add_argument("--out", type=Path, help="also write the Markdown report to this file")
    args = parser.parse_args(argv)
    args.backend_list = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = [b for b in args.backend_list if b not in BACKENDS]
    if unknown or not args.backend_list:
        parser.error(f"--backends: {', '.join(unknown) or 'none given'}; choose from "
                     f"{', '.join(BACKENDS)}")
    if args.records < 1 or args.partitions < 1 or args.repetitions < 1 or args.warmup < 0:
        parser.error("--records, --partitions and --repetitions must be >= 1, --warmup >= 0")
    return args


# ---------------------------------------------------------------------- pure: plan and report
def plan(backends: Sequence[str], ss_backend: str | None) -> list[tuple[str, str, str]]:
    """Return the ``(contender, guarantee, backend)`` configurations of one round, in order.

    ``ss_backend`` labels Structured Streaming's producer; ``None`` leaves its sink out.
    """
    configs = [(OURS, g, b) for b in backends for g in GUARANTEES]
    if ss_backend is not None:
        configs.append((SS_SINK, "at-least-once", ss_backend))
    return configs


def summarise(rows: Sequence[dict[str, Any]], records: int) -> list[dict[str, Any]]:
    """Return one summary per configuration, in the order of first appearance in ``rows``.

    Each row is one run: ``contender``, ``guarantee``, ``backend``, ``records_per_s``,
    ``read_committed`` and ``warmup``. A summary holds the median records/s over the runs that
    are not warm-ups (``None`` without any), ``runs`` (those runs), ``verified`` and ``checked``
    (runs of any kind whose ``read_committed`` count equals ``records``, and all runs),
    ``vs_ss`` (median over Structured Streaming's sink's median) and ``eo_vs_alo`` (an
    exactly-once median over the at-least-once median of the same contender and backend).
    """
    keys: list[tuple[str, str, str]] = []
    for row in rows:
        key = (row["contender"], row["guarantee"], row["backend"])
        if key not in keys:
            keys.append(key)
    out: list[dict[str, Any]] = []
    for contender, guarantee, backend in keys:
        mine = [r for r in rows if (r["contender"], r["guarantee"], r["backend"])
                == (contender, guarantee, backend)]
        measured = [r["records_per_s"] for r in mine if not r["warmup"]]
        out.append({"contender": contender, "guarantee": guarantee, "backend": backend,
                    "median": statistics.median(measured) if measured else None,
                    "runs": len(measured), "checked": len(mine),
                    "verified": sum(r["read_committed"] == records for r in mine)})
    ss = next((s["median"] for s in out if s["contender"] == SS_SINK), None)
    for s in out:
        s["vs_ss"] = _ratio(s["median"], ss)
        s["eo_vs_alo"] = None
        if s["guarantee"] == "exactly-once":
            alo = next((a["median"] for a in out if a["guarantee"] == "at-least-once"
                        and (a["contender"], a["backend"]) == (s["contender"], s["backend"])),
                       None)
            s["eo_vs_alo"] = _ratio(s["median"], alo)
    return out


def _ratio(value: float | None, base: float | None) -> float | None:
    return value / base if value is not None and base else None


def _x(ratio: float | None) -> str:
    return "–" if ratio is None else f"{ratio:.2f}x"


def markdown_table(summary: Sequence[dict[str, Any]]) -> str:
    """Return the Markdown table of ``summary`` (:func:`summarise`), one line per configuration."""
    lines = ["| contender | guarantee | backend | records/s (median) | runs | ratio to SS sink "
             "| ratio EO/ALO | read_committed = input |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for s in summary:
        median = "–" if s["median"] is None else f"{s['median']:,.0f}"
        lines.append(f"| {s['contender']} | {s['guarantee']} | {s['backend']} | {median} "
                     f"| {s['runs']} | {_x(s['vs_ss'])} | {_x(s['eo_vs_alo'])} "
                     f"| {s['verified']}/{s['checked']} runs |")
    return "\n".join(lines)


def report(summary: Sequence[dict[str, Any]], meta: dict[str, Any]) -> str:
    """Return the whole Markdown report: what was run, on what, the table and the verdict."""
    load = "{:.2f} {:.2f} {:.2f}"
    failed = sum(s["checked"] - s["verified"] for s in summary)
    lines = ["### Kafka to Kafka throughput (issue #28)", "",
             f"- command: `{meta['command']}`",
             f"- commit: {meta['commit']}",
             f"- input: {meta['records']:,} records of {meta['value_bytes']} B values in "
             f"{meta['partitions']} partitions; {meta['repetitions']} measured round(s) after "
             f"{meta['warmup']} warm-up round(s), configurations interleaved in every round",
             f"- load average before: {load.format(*meta['load_before'])}, "
             f"after: {load.format(*meta['load_after'])} ({meta['nproc']} cores)",
             f"- versions: {meta['versions']}",
             "- one `local[2]` JVM for every contender (the connector jars on `spark.jars`); "
             "`linger.ms=5` for every producer; time = the write job (read input + write output)",
             "", markdown_table(summary), "",
             "read_committed = input: runs (warm-ups included) whose output topic, read with "
             "`isolation.level=read_committed`, held exactly the input's record count.",
             f"**{failed} run(s) failed that check.**" if failed else "Every run passed it.",
             "End-to-end latency rows: `benchmarks.latency`."]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------- runs (services)
def _fill(cluster: Any, topic: str, records: int, partitions: int, value_bytes: int) -> None:
    cluster.create_topic(topic, partitions=partitions)
    value = "x" * value_bytes
    for start in range(0, records, 10_000):
        cluster.produce(topic, [(f"k{i}", value) for i in range(start, min(records, start + 10_000))])


def _read_committed_count(cluster: Any, topic: str, timeout: float = 600.0) -> int:
    """Count ``topic``'s records as a ``read_committed`` reader sees them.

    Stops at the end offsets or after ``timeout`` seconds without reaching them (a stuck open
    transaction): the count so far then differs from the input's and the run fails its check.
    """
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None,
                             isolation_level="read_committed", enable_auto_commit=False)
    try:
        parts = [TopicPartition(topic, p) for p in cluster.partitions_for(topic)]
        consumer.assign(parts)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(parts)
        count, deadline = 0, time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in parts):
            if time.monotonic() > deadline:
                print(f"read_committed count of {topic} stopped after {timeout:.0f} s at "
                      f"{count} records", file=sys.stderr, flush=True)
                break
            count += sum(len(r) for r in consumer.poll(timeout_ms=500).values())
        return count
    finally:
        consumer.close(autocommit=False)


def _fresh_topic(cluster: Any, partitions: int) -> str:
    target = f"bench-out-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(target, partitions=partitions)
    return target


def run_ours(sc: Any, cluster: Any, source: str, partitions: int, guarantee: str,
             backend: str) -> dict[str, Any]:
    """Write the whole input once with ``guarantee`` and ``backend``; return the run's row."""
    from dstream_kafka import KafkaOutput, KafkaUtils, LocationStrategies, OffsetRange

    target = _fresh_topic(cluster, partitions)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    params = {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group,
              "isolation.level": "read_committed"}
    ranges = [OffsetRange(source, p, 0, end) for p, end in cluster.end_offsets(source).items()]
    rdd = KafkaUtils.createRDD(sc, params, ranges, LocationStrategies.PreferConsistent)
    output = KafkaOutput({"bootstrap.servers": cluster.bootstrap_servers, **PRODUCER_SETTINGS},
                         topic=target, guarantee=guarantee, backend=backend)
    pairs = rdd.map(lambda r: (r.key, r.value))
    started = time.perf_counter()
    if guarantee == "exactly-once":
        written = output.write(pairs, source=rdd, groupId=group)
    else:
        written = output.write(pairs)
    seconds = time.perf_counter() - started
    return {"contender": OURS, "guarantee": guarantee, "backend": backend, "records": written,
            "seconds": seconds, "read_committed": _read_committed_count(cluster, target)}


def run_ss(spark: Any, cluster: Any, source: str, partitions: int, backend: str) -> dict[str, Any]:
    """Copy the whole input once with Structured Streaming's Kafka source and sink (batch)."""
    target = _fresh_topic(cluster, partitions)
    servers = cluster.bootstrap_servers
    records = sum(cluster.end_offsets(source).values())
    frame = (spark.read.format("kafka").option("kafka.bootstrap.servers", servers)
             .option("subscribe", source).option("startingOffsets", "earliest")
             .option("endingOffsets", "latest").load().select("key", "value"))
    writer = (frame.write.format("kafka").option("kafka.bootstrap.servers", servers)
              .option("topic", target))
    for key, value in PRODUCER_SETTINGS.items():
        writer = writer.option(f"kafka.{key}", value)
    started = time.perf_counter()
    writer.save()
    seconds = time.perf_counter() - started
    # The sink reports no count: the input's count is what it was asked to write, and the
    # read_committed check below is what proves it did.
    return {"contender": SS_SINK, "guarantee": "at-least-once", "backend": backend,
            "records": records, "seconds": seconds,
            "read_committed": _read_committed_count(cluster, target)}


def _versions(ss_connector: str | None) -> str:
    from benchmarks.monitor import machine_facts
    from dstream_kafka.operate.services.maven import KAFKA_VERSION

    facts = machine_facts()
    parts = [f"Python {facts['python']}", f"PySpark {facts['pyspark_version']}",
             f"kafka-python {facts['kafka_version']}",
             f"confluent-kafka {facts['confluent_kafka_version']}",
             f"Kafka broker {KAFKA_VERSION} (KRaft, 1 node)", f"Java: {facts['java']}"]
    if ss_connector:
        parts.append(ss_connector)
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    from benchmarks.broker import start_broker
    from benchmarks.jars import SQL_KAFKA, sql_kafka_jars
    from benchmarks.publish import git_commit
    from dstream_kafka.spark_settings import local_spark_conf

    extra: dict[str, Any] = {"spark.driver.memory": "1g"}
    ss_backend = ss_connector = None
    if not args.no_ss:
        version, jars = sql_kafka_jars()
        extra["spark.jars"] = ",".join(str(j) for j in jars)
        clients = next(c for c in SQL_KAFKA if ":kafka-clients:" in c).rsplit(":", 1)[1]
        ss_backend = f"kafka-clients {clients} (JVM)"
        ss_connector = f"spark-sql-kafka-0-10_2.13 {version}"
    configs = plan(args.backend_list, ss_backend)
    load_before = os.getloadavg()
    cluster = start_broker()
    spark = SparkSession.builder.config(
        conf=local_spark_conf("local[2]", "bench-kafka-output", extra)).getOrCreate()
    sc = spark.sparkContext
    sc.setLogLevel("ERROR")
    rows: list[dict[str, Any]] = []
    try:
        source = f"bench-in-{uuid.uuid4().hex[:8]}"
        _fill(cluster, source, args.records, args.partitions, args.value_bytes)
        for round_ in range(args.warmup + args.repetitions):
            for contender, guarantee, backend in configs:
                if contender == SS_SINK:
                    row = run_ss(spark, cluster, source, args.partitions, backend)
                else:
                    row = run_ours(sc, cluster, source, args.partitions, guarantee, backend)
                row["records_per_s"] = row["records"] / row["seconds"] if row["seconds"] else 0.0
                row["round"], row["warmup"] = round_, round_ < args.warmup
                rows.append(row)
                ok = "ok" if row["read_committed"] == args.records else "MISMATCH"
                print(f"{'warm-up ' if row['warmup'] else ''}{contender} {guarantee:14} "
                      f"{backend:16} {row['records']:>9} records {row['seconds']:8.2f} s "
                      f"{row['records_per_s']:>10.0f} rec/s "
                      f"read_committed={row['read_committed']} {ok}", flush=True)
    finally:
        spark.stop()
        cluster.stop()
    meta = {"command": "python -m benchmarks.kafka_output " + " ".join(sys.argv[1:] if argv is None
                                                                        else argv),
            "commit": git_commit(), "records": args.records, "value_bytes": args.value_bytes,
            "partitions": args.partitions, "repetitions": args.repetitions,
            "warmup": args.warmup, "load_before": load_before, "load_after": os.getloadavg(),
            "nproc": os.cpu_count(), "versions": _versions(ss_connector)}
    summary = summarise(rows, args.records)
    text = report(summary, meta)
    print("\n" + text)
    if args.out:
        args.out.write_text(text)
    return 0 if all(s["verified"] == s["checked"] for s in summary) else 1


if __name__ == "__main__":
    sys.exit(main())
