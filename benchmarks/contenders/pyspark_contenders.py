"""The PySpark contenders: dstream_kafka (through :mod:`benchmarks.adapter`) and Structured Streaming.

All of them run in ``local[2]`` (``*-cluster``: the harness's standalone cluster of two
one-core workers; ``*-connect``: through a Spark Connect client of a local Connect server on
``local[2]``, see :mod:`benchmarks.connect_server`) with the same settings: the project's
low-overhead settings (:data:`dstream_kafka.spark_settings.LOW_OVERHEAD_SETTINGS`: Unix-socket
workers, frozen daemon, worker reuse) plus, for Structured Streaming, the Kafka connector jars
via ``spark.jars``. The timed region starts after the SparkContext (or Connect session) is up
and a trivial Python job has started the workers (for the DataFrame drains: a SQL job and a
``mapInArrow`` job, :func:`warm_up_dataframes`); it includes planning, consumer creation and
reading.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import threading
import time
from typing import Any

from benchmarks.contenders import (
    CLUSTER_SUFFIX,
    CONNECT_SUFFIX,
    EO_BATCH_SECONDS,
    EO_RECORDS_PER_PARTITION,
    FAST_BACKEND_CONF,
    base_name,
    is_fast,
)
from benchmarks.monitor import tree_cpu_seconds

__all__ = ["run_pyspark"]

#: Contenders with a ``*-connect`` twin: their sessions warm up the SQL engine and the Arrow
#: path too (:func:`warm_up_dataframes`), as a Connect server already has them warm.
DATAFRAME_DRAINS = ("dk-df", "dk-df-parquet", "ss-batch", "ss-parquet")
#: Streaming drains are split into about this many batches.
STREAM_BATCHES = 10
#: Batch interval of the streaming drains: short, so processing, not the clock, sets the pace.
STREAM_BATCH_SECONDS = 0.2


def _per_batch_per_partition(topic: dict[str, Any], batches: int = STREAM_BATCHES) -> int:
    return max(1, math.ceil(topic["records"] / topic["partitions"] / batches))


def _session(spec: dict[str, Any], with_kafka_jars: bool) -> tuple[Any, dict[str, Any]]:
    from pyspark.sql import SparkSession

    from dstream_kafka.spark_settings import local_spark_conf

    extra: dict[str, Any] = {"spark.driver.memory": "1g"}
    info: dict[str, Any] = {}
    if with_kafka_jars:
        from benchmarks.jars import sql_kafka_jars

        version, jars = sql_kafka_jars()
        extra["spark.jars"] = ",".join(str(j) for j in jars)
        info["connector"] = f"spark-sql-kafka-0-10_2.13:{version}"
    name = base_name(spec["contender"])
    if is_fast(spec["contender"]):
        extra.update(FAST_BACKEND_CONF)
        info["backend"] = FAST_BACKEND_CONF["spark.streaming.kafka.consumer.backend"]
    if name == "dk-stream" and spec["workload"] == "exactly-once":
        opts = spec.get("options", {})
        per_partition = opts.get("eo_records_per_partition", EO_RECORDS_PER_PARTITION)
        rate = per_partition / opts.get("eo_batch_seconds", EO_BATCH_SECONDS)
        extra["spark.streaming.kafka.maxRatePerPartition"] = str(int(math.ceil(rate)))
    elif name == "dk-stream" and spec["workload"] == "steady":
        pass  # no rate limit: each batch reads everything produced since the last one
    elif name == "dk-stream" and spec["workload"] == "soak":
        # No rate limit either: the producer sets the pace. The driver JVM's heap is fixed and
        # touched up front, so its RSS shows growth outside the heap rather than G1 sizing the
        # heap up towards -Xmx (the first 30-minute soak: one 395 -> 588 MiB step at 10 min,
        # flat after).
        extra["spark.driver.extraJavaOptions"] = "-Xms1g -XX:+AlwaysPreTouch"
    elif name == "dk-stream":
        batches = spec.get("options", {}).get("batches", STREAM_BATCHES)
        rate = _per_batch_per_partition(spec["topic"], batches) / STREAM_BATCH_SECONDS
        extra["spark.streaming.kafka.maxRatePerPartition"] = str(int(math.ceil(rate)))
    if spec["workload"] == "overhead" and spec["contender"].startswith("ss-"):
        # One progress event per idle trigger (the default reports one every 10 s), and room
        # for every trigger of the shortest interval.
        extra["spark.sql.streaming.noDataProgressEventInterval"] = "0"
        extra["spark.sql.streaming.numRecentProgressUpdates"] = "5000"
    master = "local[2]"
    executors = 2
    if spec["contender"].endswith(CLUSTER_SUFFIX):
        master = spec["options"]["cluster_master"]
        cores = spec["options"].get("executor_cores")
        if cores:  # multicore: one executor of that many cores (Python workers)
            executors = 1
            extra.update({"spark.cores.max": str(cores), "spark.executor.cores": str(cores),
                          "spark.executor.memory": "512m"})
            info["master"] = f"standalone, 1 executor x {cores} core(s)"
        else:  # one 1-core executor on each of the two workers
            extra.update({"spark.cores.max": "2", "spark.executor.cores": "1",
                          "spark.executor.memory": "512m"})
            info["master"] = "standalone, 2 workers x 1 core"
    conf = local_spark_conf(master, app_name=f"bench-{spec['contender']}", extra=extra)
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if master != "local[2]":
        from tests.support.spark_cluster import wait_for_executors

        wait_for_executors(spark.sparkContext, executors)
    # Warm-up: start the Python daemon and workers, as a long-running application has them.
    slots = int(spec.get("options", {}).get("executor_cores") or 2)
    spark.sparkContext.parallelize(range(2 * slots), slots).map(lambda x: x).count()
    return spark, info


def _identity(batches: Any) -> Any:
    yield from batches


def warm_up_dataframes(spark: Any) -> None:
    """Run a first SQL job and a first ``mapInArrow`` job on ``spark`` (classic or Connect).

    A Connect server has run SQL jobs before a client's first query (its readiness check, and
    any earlier client); these jobs put a classic session's DataFrame drains on the same footing,
    so neither timed region includes the SQL engine's first planning and code generation or
    the workers' first pyarrow import (seconds each on a loaded machine).
    """
    spark.range(3).count()
    spark.range(0, 4, 1, 2).mapInArrow(_identity, "id long").collect()


def _kafka_reader(spark: Any, bootstrap: str, topic: str, stream: bool) -> Any:
    reader = spark.readStream if stream else spark.read
    return (reader.format("kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic).option("startingOffsets", "earliest"))


def _ss_batch(spark: Any, spec: dict[str, Any]) -> dict[str, Any]:
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType

    df = _kafka_reader(spark, spec["bootstrap"], spec["topic"]["name"], False) \
        .option("endingOffsets", "latest").load()
    name = base_name(spec["contender"])  # ss-batch-connect runs ss-batch
    if name == "ss-batch":
        return {"records": df.count()}
    if name == "ss-parquet":
        return _to_parquet(df, spec)
    if name == "ss-udf":
        @F.udf(returnType=LongType())
        def field_sum(value: bytes) -> int:
            doc = json.loads(value)
            return doc["a"] + doc["b"]

        row = df.select(field_sum("value").alias("s")).agg(F.count("*"), F.sum("s")).first()
    else:  # ss-native
        parsed = F.from_json(F.col("value").cast("string"), "a INT, b INT")
        row = df.select(parsed.alias("d")).agg(
            F.count("*"), F.sum(F.col("d.a").cast("long") + F.col("d.b").cast("long"))).first()
    return {"records": int(row[0]), "checksum": int(row[1])}


def _to_parquet(df: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Write ``df``'s columns but the headers to Parquet in a new folder; records from offsets."""
    out = tempfile.mkdtemp(prefix="bench-parquet-")
    try:
        df.select("key", "value", "topic", "partition", "offset", "timestamp") \
            .write.mode("overwrite").parquet(out)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return {"records": sum(int(e) for e in spec["topic"]["end_offsets"].values())}


def _dk_dataframe(spark: Any, spec: dict[str, Any], ends: dict[int, int]) -> dict[str, Any]:
    """``KafkaUtils.createDataFrame`` over ``[0, end)`` of every partition: count or Parquet."""
    from dstream_kafka import KafkaUtils, OffsetRange

    topic = spec["topic"]["name"]
    df = KafkaUtils.createDataFrame(
        spark, {"bootstrap.servers": spec["bootstrap"], "group.id": f"bench-{spec['contender']}"},
        [OffsetRange(topic, p, 0, end) for p, end in sorted(ends.items())])
    if base_name(spec["contender"]) == "dk-df-parquet":
        return _to_parquet(df, spec)
    return {"records": df.count()}


def _ss_stream(spark: Any, spec: dict[str, Any], workdir: str) -> dict[str, Any]:
    topic = spec["topic"]
    per_trigger = _per_batch_per_partition(topic) * topic["partitions"]
    df = _kafka_reader(spark, spec["bootstrap"], topic["name"], True) \
        .option("maxOffsetsPerTrigger", str(per_trigger)).load()
    counts: list[int] = []

    def per_batch(batch_df: Any, batch_id: int) -> None:
        counts.append(batch_df.count())

    t0 = time.perf_counter()
    query = (df.writeStream.foreachBatch(per_batch).trigger(availableNow=True)
             .option("checkpointLocation", f"{workdir}/ss-checkpoint").start())
    query.awaitTermination()
    seconds = time.perf_counter() - t0
    durations = [p.get("durationMs", {}) for p in (json.loads(x.json) for x in query.recentProgress)]
    return {"records": sum(counts), "seconds": seconds, "extra": {
        "batches": len([c for c in counts if c]), "maxOffsetsPerTrigger": per_trigger,
        "trigger_execution_ms": [d.get("triggerExecution") for d in durations]}}


def ss_progress_row(progress: dict[str, Any]) -> dict[str, Any]:
    """Map one Structured Streaming progress event to the phases of the overhead table (ms).

    ``plan`` = latestOffset + getBatch + queryPlanning, ``output`` = addBatch (foreachBatch),
    ``commit`` = walCommit + commitOffsets, ``total`` = triggerExecution; ``other`` is the rest
    of the trigger. An idle trigger (no new offsets) runs no batch and has only latestOffset.
    """
    d = progress.get("durationMs") or {}

    def part(*keys: str) -> float | None:
        vals = [float(d[k]) for k in keys if d.get(k) is not None]
        return sum(vals) if vals else None

    row: dict[str, Any] = {"batch_id": progress.get("batchId"),
                           "records": int(progress.get("numInputRows") or 0),
                           "plan": part("latestOffset", "getBatch", "queryPlanning"),
                           "output": part("addBatch"), "commit": part("walCommit", "commitOffsets"),
                           "total": part("triggerExecution"), "wal_commit": part("walCommit"),
                           "commit_offsets": part("commitOffsets")}
    if row["total"] is not None:
        row["other"] = row["total"] - sum(row[k] or 0.0 for k in ("plan", "output", "commit"))
        row["work"] = row["total"]
    return row


def _ss_overhead(spark: Any, spec: dict[str, Any], workdir: str) -> dict[str, Any]:
    """Structured Streaming on the idle topic: one processingTime query per interval."""
    from benchmarks.contenders import overhead_batches

    opts = spec["options"]
    topic = spec["topic"]
    latency: dict[str, Any] = {}
    for interval in opts["intervals"]:
        batches = overhead_batches(interval, opts["overhead_seconds"], opts["min_batches"])
        warm = opts["warmup_batches"] + 1  # + batch 0: the one (empty) micro-batch SS runs at start
        df = _kafka_reader(spark, spec["bootstrap"], topic["name"], True).load()
        query = (df.writeStream.foreachBatch(lambda batch_df, batch_id: None)
                 .trigger(processingTime=f"{int(round(interval * 1000))} milliseconds")
                 .option("checkpointLocation", f"{workdir}/ss-overhead-{interval}").start())
        deadline = time.monotonic() + opts.get("config_timeout", 300.0)
        try:
            while len(query.recentProgress) < warm + batches:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"SS idle triggers at {interval}s: {len(query.recentProgress)} "
                                       f"of {warm + batches} progress events")
                time.sleep(min(interval, 0.2))
            progress = [json.loads(x.json) for x in query.recentProgress]
        finally:
            query.stop()
        rows = [ss_progress_row(p) for p in progress][:warm + batches]
        latency[f"idle-trigger@{interval:g}s"] = {
            "params": {"interval": interval, "output": "idle-trigger"},
            "rows": rows[warm:], "warmup_rows": rows[:warm], "records": sum(r["records"] for r in rows)}
    return {"records": 0, "latency": latency}


def _ss_exactly_once(spark: Any, spec: dict[str, Any], workdir: str) -> dict[str, Any]:
    """Structured Streaming's own offset bookkeeping on the exactly-once topic: the rival of
    ``OffsetStores.checkpoint``. processingTime trigger at the same interval, maxOffsetsPerTrigger
    = the same 1,000 records, foreachBatch computes the same per-partition aggregate; the store
    cost per batch is walCommit (offsets log) + commitOffsets (commit log)."""
    from pyspark.sql import functions as F

    opts = spec["options"]
    topic = spec["topic"]
    per_trigger = opts["eo_records_per_partition"] * topic["partitions"]
    df = _kafka_reader(spark, spec["bootstrap"], topic["name"], True) \
        .option("maxOffsetsPerTrigger", str(per_trigger)).load()

    def aggregate(batch_df: Any, batch_id: int) -> None:
        batch_df.groupBy("partition").agg(F.count("*"), F.sum(F.length("value"))).collect()

    query = (df.writeStream.foreachBatch(aggregate)
             .trigger(processingTime=f"{int(round(opts['eo_batch_seconds'] * 1000))} milliseconds")
             .option("checkpointLocation", f"{workdir}/ss-exactly-once").start())
    deadline = time.monotonic() + opts.get("config_timeout", 600.0)
    try:
        while True:
            progress = [json.loads(x.json) for x in query.recentProgress]
            if sum(int(p.get("numInputRows") or 0) for p in progress) >= topic["records"]:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("SS exactly-once: the topic was not read in time")
            time.sleep(0.2)
    finally:
        query.stop()
    rows = []
    for p in progress:
        row = ss_progress_row(p)
        if row["records"]:
            row["store_cost"] = row["commit"]
            row["job"] = row["output"]  # addBatch: the foreachBatch aggregate
            rows.append(row)
    warm = opts["warmup_batches"]
    params = {"store": "checkpoint", "interval": opts["eo_batch_seconds"],
              "records_per_batch": per_trigger, "rival": "Structured Streaming offsets + commits logs"}
    return {"records": sum(r["records"] for r in rows), "latency": {"checkpoint": {
        "params": params, "records": sum(r["records"] for r in rows), "rows": rows[warm:],
        "warmup_rows": rows[:warm]}}}


def _dk_overhead(sc: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """dstream_kafka's direct stream on the idle topic: one stream per (output, interval)."""
    from benchmarks import adapter
    from benchmarks.contenders import overhead_batches

    opts = spec["options"]
    topic = spec["topic"]
    partitions = sorted(int(p) for p in topic["end_offsets"])
    latency: dict[str, Any] = {}
    for output in opts["outputs"]:
        for interval in opts["intervals"]:
            batches = overhead_batches(interval, opts["overhead_seconds"], opts["min_batches"])
            out = adapter.stream_overhead(sc, spec["bootstrap"], topic["name"], partitions, interval,
                                          output, batches, opts["warmup_batches"],
                                          timeout=opts.get("config_timeout", 300.0))
            latency[f"{output}@{interval:g}s"] = {"params": {"interval": interval, "output": output},
                                                  **out}
    return {"records": 0, "latency": latency}


def _dk_planning(sc: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """dstream_kafka's direct stream over the idle planning topics: one stream per configuration."""
    from benchmarks.adapter_planning import stream_planning

    opts = spec["options"]
    latency: dict[str, Any] = {}
    for name, config in opts["configs"].items():
        try:
            latency[name] = stream_planning(sc, spec["bootstrap"], config, opts["interval"],
                                            opts["batches"], opts["warmup_batches"],
                                            timeout=opts.get("config_timeout", 300.0))
        except Exception as exc:  # one failed configuration does not hide the others
            latency[name] = {"params": {"partitions": config["partitions"]},
                             "error": f"{type(exc).__name__}: {exc}"}
    return {"records": 0, "latency": latency}


def _dk_exactly_once(sc: Any, spec: dict[str, Any], workdir: str) -> dict[str, Any]:
    """One direct stream per offset store variant over the whole topic (1,000 records a batch)."""
    from pathlib import Path

    from benchmarks import adapter, adapter_stores

    opts = spec["options"]
    topic = spec["topic"]
    ends = {int(p): int(e) for p, e in topic["end_offsets"].items()}
    latency: dict[str, Any] = {}
    records = 0
    tracker = adapter.CacheTracker()  # shared: the workers' cache counters are per process
    # A discarded first stream: the first stream of a process plans several times slower (py4j
    # and JIT warm-up), which would otherwise land on whichever store runs first.
    adapter_stores.stream_store_cost(sc, spec["bootstrap"], topic["name"], ends, "none",
                              opts["eo_batch_seconds"], {}, Path(workdir), opts["warmup_batches"],
                              timeout=opts.get("config_timeout", 600.0), tracker=tracker)
    for variant in opts["eo_variants"]:
        params = {"store": variant, "interval": opts["eo_batch_seconds"],
                  "records_per_batch": opts["eo_records_per_partition"] * len(ends)}
        try:
            out = adapter_stores.stream_store_cost(sc, spec["bootstrap"], topic["name"], ends, variant,
                                            opts["eo_batch_seconds"], opts.get("services", {}),
                                            Path(workdir), opts["warmup_batches"],
                                            timeout=opts.get("config_timeout", 600.0),
                                            tracker=tracker)
        except Exception as exc:  # one store failing (no server, say) must not lose the others
            latency[variant] = {"params": params, "error": f"{type(exc).__name__}: {exc}"}
            continue
        records += out["records"]
        latency[variant] = {"params": params, **out}
    return {"records": records, "latency": latency}


def _ss_steady(spark: Any, spec: dict[str, Any], workdir: str, log: Any) -> dict[str, Any]:
    """Structured Streaming through the rate steps: processingTime trigger of the same interval,
    foreachBatch counts the batch's records per timestamp (ms) and per partition's last offset
    in one aggregation; the commit time is the wall clock at the end of foreachBatch."""
    from pyspark.sql import functions as F

    from benchmarks.monitor import tree_cpu_seconds
    from benchmarks.steady import EndOffsetProbe, SteadyRecorder, run_steps

    opts, topic = spec["options"], spec["topic"]
    interval = float(opts["steady_interval"])
    probe = EndOffsetProbe(spec["bootstrap"], topic["name"], sorted(int(p) for p in topic["end_offsets"]))
    start = probe.latest()
    recorder = SteadyRecorder(start)
    starting = json.dumps({topic["name"]: {str(p): o for p, o in start.items()}})
    df = _kafka_reader(spark, spec["bootstrap"], topic["name"], True) \
        .option("startingOffsets", starting).load()
    errors: list[BaseException] = []
    stopping = threading.Event()

    def per_batch(batch_df: Any, batch_id: int) -> None:
        try:
            rows = (batch_df.groupBy("partition", F.unix_millis("timestamp").alias("ts"))
                    .agg(F.count("*").alias("n"), F.max("offset").alias("last")).collect())
            hist: dict[int, int] = {}
            until: dict[int, int] = {}
            for row in rows:
                hist[row["ts"]] = hist.get(row["ts"], 0) + row["n"]
                until[row["partition"]] = max(until.get(row["partition"], 0), row["last"] + 1)
            recorder.add_batch(time.time() * 1000.0, hist, until, sum(hist.values()))
        except BaseException as exc:  # reported below, not only in the query's log
            if not stopping.is_set():  # query.stop() interrupts the batch in flight
                errors.append(exc)
            raise

    query = (df.writeStream.foreachBatch(per_batch)
             .trigger(processingTime=f"{int(round(interval * 1000))} milliseconds")
             .option("checkpointLocation", f"{workdir}/ss-steady").start())
    try:
        steps = run_steps(spec["bootstrap"], topic["name"], opts["steady_rates"], opts["steady_seconds"],
                          interval, opts["value_bytes"], recorder, probe.start(), tree_cpu_seconds,
                          opts.get("steady_warmup_seconds", 4.0), log)
    finally:
        stopping.set()
        query.stop()
        probe.stop()
    if errors:
        raise errors[0]
    return {"steps": steps}


def _steady(spark: Any, spec: dict[str, Any], workdir: str) -> dict[str, Any]:
    """Workload 4 for dk-stream(-fast) and ss-stream; the producer's output goes to a log."""
    from pathlib import Path

    from benchmarks import adapter

    result = Path(spec["result_path"])  # logs/<run>.result.json -> logs/<run>.producer.log
    log_path = result.with_name(result.name.replace(".result.json", "") + ".producer.log")
    with open(log_path, "w") as log:
        if base_name(spec["contender"]) == "ss-stream":
            out = _ss_steady(spark, spec, workdir, log)
        else:
            topic = spec["topic"]
            out = adapter.stream_steady(spark.sparkContext, spec["bootstrap"], topic["name"],
                                        sorted(int(p) for p in topic["end_offsets"]), spec["options"], log)
    measured = [s for s in out["steps"] if not s.get("warmup") and not s.get("skipped")]
    out["records"] = sum(s["records"] for s in measured)
    out["cpu_seconds"] = sum(s["cpu_seconds"] for s in measured)
    return out


def run_pyspark(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one PySpark contender described by ``spec`` and return its raw result."""
    from benchmarks import adapter

    name = base_name(spec["contender"])  # a *-fast variant differs only in its SparkConf
    workload = spec["workload"]
    kind = spec.get("kind", workload)
    topic = spec["topic"]
    ends = {int(p): int(e) for p, e in topic["end_offsets"].items()}
    server = None
    if spec["contender"].endswith(CONNECT_SUFFIX):  # the same drains, through a Connect client
        from benchmarks.connect_server import connect_session

        server, spark, info = connect_session(spec, with_kafka_jars=name.startswith("ss-"))
    else:
        spark, info = _session(spec, with_kafka_jars=name.startswith("ss-"))
        if name in DATAFRAME_DRAINS and workload == "drain":
            warm_up_dataframes(spark)
    workdir = tempfile.mkdtemp(prefix="bench-ss-")
    try:
        cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
        if workload == "overhead" and name == "dk-stream":
            out = _dk_overhead(spark.sparkContext, spec)
        elif workload == "planning" and name == "dk-stream":
            out = _dk_planning(spark.sparkContext, spec)
        elif workload == "overhead" and name == "ss-stream":
            out = _ss_overhead(spark, spec, workdir)
        elif workload == "exactly-once" and name == "ss-stream":
            out = _ss_exactly_once(spark, spec, workdir)
        elif workload == "exactly-once" and name == "dk-stream":
            out = _dk_exactly_once(spark.sparkContext, spec, workdir)
        elif workload == "steady":
            out = _steady(spark, spec, workdir)
        elif workload == "soak" and name == "dk-stream":
            from benchmarks.adapter_soak import run_soak

            out = run_soak(spark.sparkContext, spec, workdir)
        elif kind == "multicore":
            from benchmarks.adapter_multicore import stream_multicore

            out = stream_multicore(spark.sparkContext, spec["bootstrap"], topic["name"], ends,
                                   STREAM_BATCH_SECONDS)
        elif name == "dk-rdd":
            out = adapter.drain_rdd(spark.sparkContext, spec["bootstrap"], topic["name"], ends, kind)
        elif name == "dk-stream":
            out = adapter.stream_drain(spark.sparkContext, spec["bootstrap"], topic["name"], ends,
                                       kind, STREAM_BATCH_SECONDS)
        elif name in ("dk-df", "dk-df-parquet"):
            out = _dk_dataframe(spark, spec, ends)
        elif name == "ss-stream":
            out = _ss_stream(spark, spec, workdir)
        else:
            out = _ss_batch(spark, spec)
        seconds = time.perf_counter() - t0
        cpu = tree_cpu_seconds() - cpu0
    finally:
        try:
            spark.stop()
        finally:
            if server is not None:
                server.stop()
            shutil.rmtree(workdir, ignore_errors=True)  # checkpoints and stores of this run only
    result = {"records": out.pop("records"), "checksum": out.pop("checksum", None),
              "seconds": out.pop("seconds", seconds), "cpu_seconds": out.pop("cpu_seconds", cpu)}
    if "steps" in out:
        result["steps"] = out.pop("steps")
    if "latency" in out:
        result["latency"] = out.pop("latency")
    if "soak" in out:
        result["soak"] = out.pop("soak")
    result["extra"] = {**info, **out.pop("extra", {}), **out}
    return result
