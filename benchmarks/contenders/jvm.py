"""JVM contenders: Spark's kafka010 DStream (small Java programs) and Kafka's ConsumerPerformance.

``DStreamDrain.java`` (workload 1) and ``DStreamOverhead.java`` (workload 3: empty batches per
interval and output, with BatchInfo and task-side timings) are compiled once per run with
``javac`` against pyspark's own jars plus ``spark-streaming-kafka-0-10`` from Maven Central (see
:mod:`benchmarks.jars`). The newest 4.x connector there (4.1.0-preview1) was built against Spark
4.1, whose logging keys were Scala objects (``LogKeys$CONFIG$``); Spark 4.3 made them a Java
enum. Tiny generated shim classes with the old names restore binary compatibility; they only
name log fields and change no behaviour.

ConsumerPerformance (``org.apache.kafka.tools.ConsumerPerformance`` in kafka-tools 4.1.1) is the
broker read limit; its ``fetch.nMsg.sec`` column excludes the group join, as the Kafka docs
advise (performance notes, section 2).
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from benchmarks.jars import pyspark_jars_dir, streaming_kafka_jars
from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.environment import require_java
from dstream_kafka.operate.services.kafka import kafka_classpath

__all__ = ["build_dstream_drain", "java_command", "parse_consumer_perf", "JAVA_OPENS"]

_JAVA = Path(__file__).resolve().parents[1] / "java"
#: The JVM programs: the drain (workload 1) and the empty-batch overhead (workload 3).
_SOURCES = (_JAVA / "DStreamDrain.java", _JAVA / "DStreamOverhead.java")

#: Module opens Spark's launcher adds on Java 17 (``JavaModuleOptions``); plain ``java`` needs them.
JAVA_OPENS = ["-XX:+IgnoreUnrecognizedVMOptions", "-Djdk.reflect.useDirectMethodHandle=false",
              "-Dio.netty.tryReflectionSetAccessible=true"] + [
    f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in (
        "java.lang", "java.lang.invoke", "java.lang.reflect", "java.io", "java.net", "java.nio",
        "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "jdk.internal.ref",
        "sun.nio.ch", "sun.nio.cs", "sun.security.action", "sun.util.calendar")]

_SHIM = """package org.apache.spark.internal;
public final class LogKeys${key}$ implements LogKey {{
  public static final LogKeys${key}$ MODULE$ = new LogKeys${key}$();
  public String name() {{ return "{key}"; }}
}}
"""


def _log_keys(jar: Path) -> set[str]:
    keys: set[str] = set()
    with zipfile.ZipFile(jar) as zf:
        for name in zf.namelist():
            if name.endswith(".class"):
                keys.update(k.decode() for k in
                            re.findall(rb"org/apache/spark/internal/LogKeys\$([A-Z0-9_]+)\$", zf.read(name)))
    return keys


def build_dstream_drain(build_dir: Path) -> tuple[str, str]:
    """Compile DStreamDrain, DStreamOverhead and the logging shims into ``build_dir``.

    Returns
    -------
    (classpath, connector_version)
    """
    version, jars = streaming_kafka_jars()
    connector = next(j for j in jars if j.name.startswith("spark-streaming-kafka"))
    shim_dir = build_dir / "shim" / "org" / "apache" / "spark" / "internal"
    shim_dir.mkdir(parents=True, exist_ok=True)
    sources = [str(s) for s in _SOURCES]
    for key in sorted(_log_keys(connector)):
        path = shim_dir / f"LogKeys${key}$.java"
        path.write_text(_SHIM.format(key=key))
        sources.append(str(path))
    classes = build_dir / "classes"
    classes.mkdir(parents=True, exist_ok=True)
    cp = os.pathsep.join([str(pyspark_jars_dir() / "*"), *map(str, jars)])
    proc = subprocess.run(["javac", "-nowarn", "-d", str(classes), "-cp", cp, *sources],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ServiceError(f"javac failed for DStreamDrain:\n{proc.stderr[-3000:]}")
    return os.pathsep.join([str(classes), cp]), version


def java_command(contender: str, spec: dict[str, Any], classpath: str | None) -> list[str]:
    """Return the command line of a JVM contender run."""
    java = require_java()
    topic = spec["topic"]
    if contender == "kafka-perf":
        return [java, "-Xmx1g", "-cp", kafka_classpath(), "org.apache.kafka.tools.ConsumerPerformance",
                "--bootstrap-server", spec["bootstrap"], "--topic", topic["name"],
                "--messages", str(topic["records"]), "--timeout", "120000",
                "--group", f"bench-perf-{os.getpid()}-{spec['run_id']}", "--hide-header",
                "--fetch-size", str(4 * 2**20)]
    assert classpath is not None
    from benchmarks.contenders.pyspark_contenders import STREAM_BATCH_SECONDS, _per_batch_per_partition

    if spec["workload"] == "overhead":
        opts = spec["options"]
        return [java, "-Xmx1g", *JAVA_OPENS, "-cp", classpath, "DStreamOverhead", spec["bootstrap"],
                topic["name"], ",".join(str(int(round(i * 1000))) for i in opts["intervals"]),
                ",".join(opts["outputs"]), str(opts["overhead_seconds"]), str(opts["min_batches"]),
                str(opts["warmup_batches"]), spec["result_path"]]
    mode = "rdd" if contender == "java-dstream-rdd" else "stream"
    rate = math.ceil(_per_batch_per_partition(topic) / STREAM_BATCH_SECONDS)
    return [java, "-Xmx1g", *JAVA_OPENS, "-cp", classpath, "DStreamDrain", spec["bootstrap"],
            topic["name"], mode, str(int(STREAM_BATCH_SECONDS * 1000)), str(rate), spec["result_path"]]


def parse_consumer_perf(output: str) -> dict[str, Any]:
    """Parse ConsumerPerformance's one data line (``--hide-header``).

    Columns: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg,
    nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec.
    """
    for line in reversed(output.strip().splitlines()):
        cols = [c.strip() for c in line.split(",")]
        if len(cols) >= 10:
            try:
                nums = [float(c) for c in cols[2:10]]
            except ValueError:
                continue
            mb, _, n, _, rebalance_ms, fetch_ms, fetch_mb_s, fetch_n_s = nums
            return {"records": int(n), "seconds": fetch_ms / 1000.0,
                    "extra": {"rebalance_ms": rebalance_ms, "fetch_MB_per_s": fetch_mb_s,
                              "fetch_nMsg_per_s": fetch_n_s, "MB": mb}}
    raise ValueError(f"no ConsumerPerformance data line in output: {output[-500:]!r}")
