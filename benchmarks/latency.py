"""Workload ``k2k``: Kafka-to-Kafka end-to-end latency, ours beside Structured Streaming's.

Every row (variant x rate) gets its own 4-partition input topic and its own output topic with
``message.timestamp.type=LogAppendTime``. A producer process (confluent-kafka's ``Producer``:
kafka-python's per-record ``send`` flat out managed 14,800 records/s here, at load 16 under
``nice``, against 309,000/s for confluent-kafka's ``produce``, so it could not hold the 50k/s
row) sends ``rate`` records/s of 100 bytes round-robin over the partitions in 10 ms ticks;
librdkafka stamps each record's CreateTime when it is produced. The query copies every record to
the output topic, to the same partition, with the input record's timestamp in a ``source-ts``
header. Latency of a record = its output record's broker append time minus that header
(producer clock to broker clock: one machine). Records whose source time is within the first
``warmup`` seconds of the producer are dropped; the window starts after a warm-up record went
through end to end (worker, consumer and producer creation are not measured). The output is
read with ``isolation.level=read_committed``, so an exactly-once row counts only committed
records; their latency ends at the records' append, not at the transaction's commit marker
(consumers never see control records), so it leaves out the commit itself (the
``EndTxn`` round trip and the marker write, milliseconds on one broker).

Variants:

``dk-alo``
    ``StreamingContext(sc, 0)`` (the next batch as soon as the previous finished and records
    arrived), a direct stream written by :class:`dstream_kafka.KafkaOutput`, at-least-once.
``dk-eo``
    The same with ``guarantee="exactly-once"``: the stream reads with
    ``isolation.level=read_committed`` and keeps its offsets in its group (no offset store);
    each input partition's records and ``untilOffset`` go in one Kafka transaction.
``dk-alo-fast`` / ``dk-eo-fast``
    The same on the confluent-kafka backend (``spark.streaming.kafka.consumer.backend``, which
    the output's producers follow); only when named.
``ss-pt0`` / ``ss-pt1``
    Structured Streaming ``readStream.format("kafka")`` -> ``writeStream.format("kafka")``,
    ``trigger(processingTime="0 seconds")`` / ``"1 second"``, at-least-once (its Kafka sink
    has no other guarantee).
``ss-rtm``
    Structured Streaming's real-time mode: PySpark 4.3.0 has
    ``DataStreamWriter.trigger(realTime="...")`` and the spark-sql-kafka-0-10 connector
    resolved by :mod:`benchmarks.jars` runs a Kafka-to-Kafka query in it (checked at 1,000
    records/s). Update output mode, one long-running batch (5 minutes, so ``batches`` stays 0
    within a row) whose tasks stream records through; it holds one task slot per input
    partition for the whole batch, so this variant runs on ``local[4]`` (4 task threads on
    this 2-core machine), the others on ``local[2]``. On ``local[2]`` the query starts and
    raises nothing, but only two of the four partitions' tasks run: a check at 1,000 records/s
    got 4,000 of 8,001 records out, the other half never.

Both sides use ``linger.ms=0`` on their output producer. ``python -m benchmarks`` runs each
variant in its own process (``--workloads k2k``); ``python -m benchmarks.latency`` runs the
variants one after the other in one process against its own broker. The pure parts
(:func:`latency_row`, :func:`source_ts`) are unit tested; the report and the issue's goals are in
:mod:`benchmarks.report_k2k`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

from benchmarks.steady import weighted_percentile

__all__ = ["main", "run_row", "harness_run", "k2k_status", "child_argv", "latency_row",
           "source_ts", "VARIANTS", "DEFAULT_VARIANTS",
           "HEADER"]

PARTITIONS = 4
HEADER = "source-ts"
VALUE_BYTES = 100
#: Variants in run order and what each one is.
VARIANTS = {
    "dk-alo": "dstream_kafka, StreamingContext(sc, 0), KafkaOutput at-least-once",
    "dk-eo": "dstream_kafka, StreamingContext(sc, 0), KafkaOutput exactly-once (read_committed)",
    "dk-alo-fast": "dk-alo on the confluent-kafka backend (consumers and output producers)",
    "dk-eo-fast": "dk-eo on the confluent-kafka backend (consumers and output producers)",
    "ss-pt0": "Structured Streaming micro-batch, ProcessingTime(0), Kafka sink",
    "ss-pt1": "Structured Streaming micro-batch, ProcessingTime(1 s), Kafka sink",
    "ss-rtm": "Structured Streaming real-time mode, trigger(realTime), Kafka sink, local[4]",
}
#: Variants run when none are named: the ``-fast`` ones only on request (6 more minutes).
DEFAULT_VARIANTS = ("dk-alo", "dk-eo", "ss-pt0", "ss-pt1", "ss-rtm")
#: Seconds a row waits for its warm-up record to come out (Python workers, consumers, producers).
WARMUP_LIMIT = 180.0


# ---------------------------------------------------------------------------------------------
# Pure logic


def source_ts(headers: Any) -> int | None:
    """The ``source-ts`` header of an output record (a list of ``(key, value)`` pairs, as
    confluent-kafka gives them) as milliseconds, None when absent."""
    for key, value in headers or ():
        if key == HEADER and value is not None:
            return int(value.decode() if isinstance(value, (bytes, bytearray)) else value)
    return None


def latency_row(latencies: Counter, produced: int, produced_seconds: float, expected: int,
                read: int) -> dict[str, Any]:
    """One row: p50 / p99 / max (ms) of a ``{latency ms: count}`` histogram, and the counts.

    ``expected`` records were produced (the warm-up record included) and ``read`` came out;
    ``missing`` is their difference (records not out when the row's drain time ended, or
    lost). ``produced_per_s`` is the rate the producer actually held.
    """
    return {"records": sum(latencies.values()),
            "p50": weighted_percentile(latencies, 50), "p99": weighted_percentile(latencies, 99),
            "max": max(latencies) if latencies else None, "produced": produced,
            "produced_per_s": produced / produced_seconds if produced_seconds > 0 else None,
            "missing": max(0, expected - read)}


# ---------------------------------------------------------------------------------------------
# Producer (a child process, so its CPU is not the driver's GIL)


def produce(servers: str, topic: str, rate: int, seconds: float) -> dict[str, Any]:
    """Send ``rate`` records/s for ``seconds`` in 10 ms ticks; return what was sent and when."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": servers, "linger.ms": 1, "acks": 1,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"x" * VALUE_BYTES
    sent, started_ms = 0, int(time.time() * 1000)
    started = time.monotonic()
    print(json.dumps({"started_ms": started_ms}), flush=True)
    total = int(rate * seconds)
    while sent < total:
        due = min(total, int((time.monotonic() - started) * rate))
        while sent < due:
            try:
                producer.produce(topic, value, partition=sent % PARTITIONS)
                sent += 1
            except BufferError:  # the local queue is full: let librdkafka send first
                producer.poll(0.005)
        producer.poll(0)
        time.sleep(max(0.0, started + (sent + rate / 100.0) / rate - time.monotonic()))
    elapsed = time.monotonic() - started
    left = producer.flush(30)
    return {"sent": sent - left, "seconds": elapsed, "started_ms": started_ms}


def _start_producer(servers: str, topic: str, rate: int, seconds: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "benchmarks.latency", "--produce", servers, topic,
                             str(rate), str(seconds)], stdout=subprocess.PIPE, text=True)


# ---------------------------------------------------------------------------------------------
# One row


def _create_topics(servers: str, source: str, sink: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=servers)
    try:
        admin.create_topics([NewTopic(source, PARTITIONS, 1),
                             NewTopic(sink, PARTITIONS, 1,
                                      topic_configs={"message.timestamp.type": "LogAppendTime"})])
    finally:
        admin.close()


class _OutputReader:
    """Reads the output topic (read_committed) from the start and keeps the latency histogram."""

    def __init__(self, servers: str, sink: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self._consumer = Consumer({"bootstrap.servers": servers, "group.id": f"reader-{sink}",
                                   "enable.auto.commit": False, "isolation.level": "read_committed",
                                   "auto.offset.reset": "earliest"})
        self._consumer.assign([TopicPartition(sink, p, 0) for p in range(PARTITIONS)])
        self.read = 0
        self.latencies: Counter = Counter()
        self.since_ms: int | None = None  # None: only count (warm-up)

    def poll(self, seconds: float) -> int:
        """Read for up to ``seconds``; return the records read."""
        got = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for msg in self._consumer.consume(10_000, timeout=0.1):
                if msg.error():
                    continue
                got += 1
                ts = source_ts(msg.headers())
                if self.since_ms is not None and ts is not None and ts >= self.since_ms:
                    self.latencies[msg.timestamp()[1] - ts] += 1
            if got and self.since_ms is None:
                break
        self.read += got
        return got

    def close(self) -> None:
        self._consumer.close()


def _dk_query(sc: Any, servers: str, source: str, sink: str, exactly_once: bool) -> tuple[Callable[[], int], Callable[[], None]]:
    from dstream_kafka import ConsumerStrategies, KafkaOutput, KafkaUtils, LocationStrategies
    from dstream_kafka.streaming import StreamingContext

    ssc = StreamingContext(sc, 0)
    params = {"bootstrap.servers": servers, "group.id": f"lat-{source}",
              "auto.offset.reset": "earliest", "fetch.max.wait.ms": 10}
    if exactly_once:
        params["isolation.level"] = "read_committed"
    stream = KafkaUtils.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([source], params))
    batches = [0]
    stream.addProgressListener(lambda p: batches.__setitem__(0, batches[0] + 1))
    output = KafkaOutput({"bootstrap.servers": servers, "linger.ms": 0}, topic=sink,
                         guarantee="exactly-once" if exactly_once else "at-least-once")
    output.writeStream(stream.map(lambda r: {
        "key": r.key, "value": r.value, "partition": r.partition,
        "headers": [(HEADER, str(r.timestamp).encode())]}))
    ssc.start()
    return (lambda: batches[0]), (lambda: ssc.stop(stopSparkContext=False, stopGraceFully=False))


def _ss_query(spark: Any, servers: str, source: str, sink: str, trigger: dict[str, str],
              workdir: str) -> tuple[Callable[[], int], Callable[[], None]]:
    from pyspark.sql import functions as F

    df = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", servers)
          .option("subscribe", source).option("startingOffsets", "earliest").load())
    header = F.struct(F.lit(HEADER).alias("key"),
                      F.unix_millis("timestamp").cast("string").cast("binary").alias("value"))
    out = df.select("key", "value", "partition", F.array(header).alias("headers"))
    writer = (out.writeStream.format("kafka").option("kafka.bootstrap.servers", servers)
              .option("topic", sink).option("kafka.linger.ms", "0")
              .option("checkpointLocation", f"{workdir}/ss-{sink}").trigger(**trigger))
    if "realTime" in trigger:
        writer = writer.outputMode("update")
    query = writer.start()

    def batches() -> int:
        progress = query.lastProgress
        return int(progress["batchId"]) + 1 if progress else 0

    def stop() -> None:
        query.stop()
    return batches, stop


def run_row(session: Any, servers: str, variant: str, rate: int, seconds: float, warmup: float,
            workdir: str) -> dict[str, Any]:
    """Measure one variant at one rate on fresh topics; return its row (or ``error``)."""
    tag = uuid.uuid4().hex[:8]
    source, sink = f"lat-in-{tag}", f"lat-out-{tag}"
    _create_topics(servers, source, sink)
    row: dict[str, Any] = {"variant": variant, "rate": rate, "seconds": seconds, "warmup": warmup}
    if variant.startswith("dk-"):
        batches, stop = _dk_query(session.sparkContext, servers, source, sink, variant.startswith("dk-eo"))
    else:
        trigger = {"ss-pt0": {"processingTime": "0 seconds"}, "ss-pt1": {"processingTime": "1 second"},
                   "ss-rtm": {"realTime": "5 minutes"}}[variant]
        batches, stop = _ss_query(session, servers, source, sink, trigger, workdir)
    reader = _OutputReader(servers, sink)
    try:
        from confluent_kafka import Producer

        warm = Producer({"bootstrap.servers": servers})
        warm.produce(source, b"warm-up", partition=0, headers=[(HEADER, b"0")])
        warm.flush(10)
        deadline = time.monotonic() + WARMUP_LIMIT
        while not reader.read and time.monotonic() < deadline:
            reader.poll(0.5)
        if not reader.read:
            row["error"] = f"the warm-up record did not come out within {WARMUP_LIMIT:g} s"
            return row
        batches0 = batches()
        producer = _start_producer(servers, source, rate, seconds)
        first = json.loads(producer.stdout.readline() if producer.stdout else "{}")
        reader.since_ms = int(first["started_ms"] + warmup * 1000)
        # The output is read after the producer stopped, not while the query runs: reading
        # 50k records/s in this (driver) process would take the GIL from dstream_kafka's driver.
        # Append times are the broker's, so reading later changes no latency.
        producer.wait()
        sent = json.loads((producer.stdout.read() if producer.stdout else "").strip() or "{}")
        if producer.returncode != 0 or "sent" not in sent:
            row["error"] = f"the producer exited {producer.returncode}"
            return row
        expected = int(sent["sent"]) + 1
        now = time.monotonic()
        quiet, limit = now + max(10.0, seconds / 2), now + 3 * seconds + 30
        while reader.read < expected and time.monotonic() < limit:
            # Past the drain time, go on only while records still come out (reading a large
            # row takes a while itself).
            if not reader.poll(1.0) and time.monotonic() > quiet:
                break
        row["batches"] = batches() - batches0
        row.update(latency_row(reader.latencies, int(sent["sent"]), float(sent["seconds"]), expected,
                               reader.read))
        return row
    except Exception as exc:  # one failed row is recorded, the others still run
        row["error"] = f"{type(exc).__name__}: {exc}"
        return row
    finally:
        reader.close()
        try:
            stop()
        except Exception as exc:
            row.setdefault("stop_error", f"{type(exc).__name__}: {exc}")


# ---------------------------------------------------------------------------------------------
# Processes: one per variant


def run_variant(servers: str, variant: str, rates: Sequence[int], seconds: float,
                warmup: float) -> dict[str, Any]:
    """Every rate of one variant in this process's Spark session; ``{"rows": [...], ...}``."""
    from pyspark.sql import SparkSession

    from dstream_kafka.spark_settings import local_spark_conf

    extra: dict[str, Any] = {"spark.driver.memory": "1g"}
    info: dict[str, Any] = {"master": "local[4]" if variant == "ss-rtm" else "local[2]"}
    if variant.startswith("ss-"):
        from benchmarks.jars import sql_kafka_jars

        version, jars = sql_kafka_jars()
        extra["spark.jars"] = ",".join(str(j) for j in jars)
        info["connector"] = f"spark-sql-kafka-0-10_2.13:{version}"
    if variant.endswith("-fast"):
        from benchmarks.contenders import FAST_BACKEND_CONF

        extra.update(FAST_BACKEND_CONF)
        info["backend"] = "confluent-kafka"
    conf = local_spark_conf(info["master"], f"k2k-{variant}", extra)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="k2k-") as workdir:
            for rate in rates:
                row = run_row(spark, servers, variant, int(rate), seconds, warmup, workdir)
                print(json.dumps(row), flush=True)
                rows.append(row)
    finally:
        spark.stop()
    return {"variant": variant, "rows": rows, **info}


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.latency",
                                description=(__doc__ or "").splitlines()[0])
    p.add_argument("--rates", default="1000", help="comma-separated records/s (1000)")
    p.add_argument("--seconds", type=float, default=20.0, help="producing time per row (20)")
    p.add_argument("--warmup", type=float, default=5.0,
                   help="seconds of each row's records dropped from the figures (5)")
    p.add_argument("--variants", default=",".join(DEFAULT_VARIANTS),
                   help=f"comma-separated, from {','.join(VARIANTS)} "
                        f"({','.join(DEFAULT_VARIANTS)})")
    p.add_argument("--bootstrap", default=None,
                   help="use this broker and run the variants in this process (as the harness "
                        "does, one variant per process); default: start a broker, one child "
                        "process per variant")
    p.add_argument("--json", type=Path, default=None, help="write the result here")
    p.add_argument("--produce", nargs=4, metavar=("SERVERS", "TOPIC", "RATE", "SECONDS"),
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.variants = [v for v in args.variants.split(",") if v]
    for v in args.variants:
        if v not in VARIANTS:
            p.error(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)}")
    try:
        args.rates = [int(float(r)) for r in args.rates.split(",") if r]
    except ValueError as exc:
        p.error(f"--rates: {exc}")
    if not args.rates or min(args.rates) <= 0 or args.seconds <= 0 or not 0 <= args.warmup < args.seconds:
        p.error("--rates needs positive records/s, --seconds > 0 and 0 <= --warmup < --seconds")
    return args


def child_argv(servers: str, variant: str, rates: Sequence[int], seconds: float, warmup: float,
               out: Path) -> list[str]:
    """The command that runs one variant against ``servers`` and writes its result to ``out``."""
    return [sys.executable, "-m", "benchmarks.latency", "--bootstrap", servers, "--variants",
            variant, "--rates", ",".join(str(int(r)) for r in rates), "--seconds", f"{seconds:g}",
            "--warmup", f"{warmup:g}", "--json", str(out)]


def harness_run(out: Path, servers: str, variant: str, rates: Sequence[int], seconds: float,
                warmup: float, round_no: int, run_no: int, timeout: float,
                env: dict[str, str]) -> dict[str, Any]:
    """One variant in its own process for ``python -m benchmarks``: its run record.

    The record is ok when every rate's row was measured; a row's error (or the process's)
    is the record's ``error``. ``rows`` keep every row, failed ones included.
    """
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    run_id = f"{run_no:03d}-k2k-{variant}"
    result_path = logs / f"{run_id}.result.json"
    record: dict[str, Any] = {"contender": variant, "workload": "k2k", "kind": "k2k",
                              "family": "dstream_kafka" if variant.startswith("dk-") else "structured",
                              "round": round_no, "warmup": False, "run_id": run_id, "ok": False,
                              "rows": []}
    started = time.perf_counter()
    with open(logs / f"{run_id}.log", "wb") as log:
        proc = subprocess.Popen(child_argv(servers, variant, rates, seconds, warmup, result_path),
                                stdout=log, stderr=log, env=env, cwd=Path(__file__).resolve().parents[1])
        try:
            proc.wait(timeout=timeout)
        except BaseException as exc:  # a timeout, or the run is being interrupted
            proc.kill()
            proc.wait()
            if not isinstance(exc, subprocess.TimeoutExpired):
                raise
            record["error"] = f"killed after {timeout:.0f}s; see logs/{run_id}.log"
    record["process_seconds"] = time.perf_counter() - started
    if "error" in record:
        return record
    try:
        result = json.loads(result_path.read_text())["variants"][0]
    except (OSError, ValueError, LookupError) as exc:
        record["error"] = f"no result (exit {proc.returncode}): {exc}; see logs/{run_id}.log"
        return record
    record.update(rows=result.get("rows") or [],
                  **{k: result[k] for k in ("master", "connector") if k in result})
    errors = [r["error"] for r in record["rows"] if r.get("error")]
    if errors or not record["rows"]:
        record["error"] = errors[0] if errors else "no rows"
        return record
    record["ok"] = True
    return record


def k2k_status(record: dict[str, Any]) -> str:
    """One line per run for the harness's progress output."""
    return "; ".join(f"{r['rate']:,}/s " + (f"FAILED {str(r['error'])[:120]}" if r.get("error") else
                                            f"p50 {r.get('p50')} p99 {r.get('p99')} max {r.get('max')} ms")
                     for r in record.get("rows") or []) or f"FAILED: {record.get('error')}"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.produce:
        servers, topic, rate, seconds = args.produce
        print(json.dumps(produce(servers, topic, int(rate), float(seconds))), flush=True)
        return 0
    if args.bootstrap:
        results = [run_variant(args.bootstrap, v, args.rates, args.seconds, args.warmup)
                   for v in args.variants]
        if args.json:
            args.json.write_text(json.dumps({"variants": results}))
        return 0
    from benchmarks.broker import start_broker
    from benchmarks.report_k2k import check_k2k_goals, k2k_lines, summarize_k2k

    print(f"loadavg before: {Path('/proc/loadavg').read_text().strip()} (cores: {os.cpu_count()})")
    cluster = start_broker()
    variants = []
    try:
        with tempfile.TemporaryDirectory(prefix="k2k-") as tmp:
            for v in args.variants:
                out = Path(tmp) / f"{v}.json"
                subprocess.run(child_argv(cluster.bootstrap_servers, v, args.rates, args.seconds,
                                          args.warmup, out), check=False)
                if out.exists():
                    variants += json.loads(out.read_text())["variants"]
                else:
                    variants.append({"variant": v, "error": "the variant's process wrote no result"})
    finally:
        cluster.stop()
    print("\n".join(k2k_lines(variants, {"seconds": args.seconds, "warmup": args.warmup})))
    for goal in check_k2k_goals(summarize_k2k(variants)):
        met = {True: "yes", False: "NO", None: "not measured"}[goal["met"]]
        print(f"- {goal['goal']}: {goal['measured']}: {met}")
    print(f"loadavg after: {Path('/proc/loadavg').read_text().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
