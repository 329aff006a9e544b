"""Every PySpark and py4j internal the package uses, behind one accessor each.

PySpark documents ``SparkContext``, ``RDD`` and ``SparkConf`` but not the JVM handles behind
them (``sc._jsc``, ``sc._jvm``, ``sc._conf``, ``rdd._jrdd``), ``PipelinedRDD``, the status
store or the worker daemon's entry point. Those can move between PySpark releases, so no
other module touches them: an upgrade that moves one breaks one accessor here, and
``tests/unit/test_spark_internals.py`` (without a JVM) or
``tests/integration/test_spark_internals_jvm.py`` (with one) names it.

No accessor hides a missing internal: an ``AttributeError`` from a moved attribute reaches
the caller. Only py4j's own errors (an unreachable or stopped JVM) are caught, and only where
the caller has a documented fallback.

PySpark 4.0 to 4.3 (the range setup.cfg accepts). The internals were compared in 4.0.5, 4.1.4,
4.2.1 and 4.3.0: Python signatures, the attributes the classes assign, and the JVM methods as
``javap`` prints them from each release's ``spark-core`` jar. No accessor needs a branch by
version; only the worker daemon's body changed. Per accessor:

========================== =============================================== =====================
accessor                   internal, the same in 4.0, 4.1, 4.2 and 4.3     what differs
========================== =============================================== =====================
PipelinedRDD               ``pyspark.core.rdd.PipelinedRDD(prev, func,     nothing
                           preservesPartitioning, isFromBarrier)``
portable_hash              ``pyspark.core.rdd.portable_hash``;             nothing
                           ``pyspark.rdd`` is an alias of that module
python_rdd, detached_rdd   ``RDD(jrdd, ctx, jrdd_deserializer)`` keeping   nothing
                           ``_jrdd``, ``_jrdd_deserializer``, ``ctx``;
                           ``CPickleSerializer``
live_conf,                 ``SparkContext._conf``, ``SparkContext._jsc``   nothing
is_active_context
context_stopped            ``JavaSparkContext.sc()``,                      nothing
                           ``SparkContext.isStopped()``
executor_list              ``statusStore().executorList(boolean)``: an     nothing
                           immutable ``Seq[ExecutorSummary]`` with
                           ``hostPort()`` and ``id()``
located_source             ``PythonUtils.toSeq(java.util.List)``,          nothing
                           ``makeRDD(Seq[(T, Seq[String])], ClassTag)``,
                           ``JavaSparkContext.emptyRDD()``
source_preferred_locations ``RDD.preferredLocations(Partition)``           nothing
active_context             ``SparkContext._active_spark_context``          nothing
hadoop_path_class,         ``_jvm`` Hadoop ``Path``,                       nothing
hadoop_filesystem,         ``JavaSparkContext.hadoopConfiguration()``
default_filesystem
read_stream_bytes          commons-io ``IOUtils.toByteArray(InputStream)`` the jar's version:
                                                                           2.18.0 in 4.0, 2.21.0
                                                                           in 4.1, 2.22.0 in 4.2+
worker_python              ``SparkContext.pythonExec``                     nothing
connect_channel            Spark Connect's ``SparkConnectClient._channel``  checked in 4.3.0 only
                           (a ``grpc.Channel``) and ``_builder.endpoint``
run_daemon                 ``pyspark.daemon.manager()``, no arguments      its body (below)
========================== =============================================== =====================

``pyspark.daemon.manager`` listens on a Unix domain socket from 4.1 when the JVM asks for one
(``spark.python.unix.domain.socket.enabled``); 4.0 has neither that setting nor that code, so on
4.0 the setting is ignored and workers talk to the JVM over loopback TCP (about 30 ms more per
local job). 4.2 waits with ``poll()`` instead of ``select()`` and runs forked workers under a
fault handler; 4.3 only names an encoding. ``dstream_kafka.daemon`` imports and calls it the
same way on all four.

``pyspark.java_gateway.launch_gateway(conf, popen_kwargs)`` (``gateway_in_own_session``) is
byte-identical in the four releases. One other PySpark name the package uses outside this module
is public and equally stable: the vendored ``pyspark.cloudpickle`` (3.1.1 in 4.0, 3.1.2 from
4.1).
"""

from __future__ import annotations

import functools
import subprocess
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from py4j.protocol import Py4JError
from pyspark.core.rdd import PipelinedRDD, RDD, portable_hash
from pyspark.serializers import CPickleSerializer

if TYPE_CHECKING:
    from pyspark import SparkContext

__all__ = [
    "INTERNALS",
    "PipelinedRDD",
    "active_context",
    "connect_channel",
    "context_stopped",
    "default_filesystem",
    "detached_rdd",
    "executor_list",
    "gateway_in_own_session",
    "hadoop_filesystem",
    "hadoop_path_class",
    "is_active_context",
    "live_conf",
    "portable_hash",
    "located_source",
    "python_rdd",
    "read_stream_bytes",
    "run_daemon",
    "source_preferred_locations",
    "worker_python",
    "worker_python_imports",
]

#: The internals behind each accessor, as the tests name them when one has moved.
INTERNALS: dict[str, str] = {
    "PipelinedRDD": "pyspark.core.rdd.PipelinedRDD",
    "portable_hash": "pyspark.core.rdd.portable_hash (reached as pyspark.rdd.portable_hash)",
    "python_rdd": "pyspark.core.rdd.RDD(jrdd, ctx, jrdd_deserializer)",
    "detached_rdd": "RDD._jrdd / RDD._jrdd_deserializer",
    "live_conf": "SparkContext._conf",
    "is_active_context": "SparkContext._jsc",
    "context_stopped": "SparkContext._jsc.sc().isStopped()",
    "executor_list": "SparkContext._jsc.sc().statusStore().executorList(true)",
    "located_source": "PythonUtils.toSeq / SparkContext.makeRDD(Seq[(T, Seq[String])])",
    "source_preferred_locations": "JavaRDD.rdd().preferredLocations(Partition)",
    "active_context": "SparkContext._active_spark_context",
    "hadoop_path_class": "_jvm.org.apache.hadoop.fs.Path",
    "hadoop_filesystem": "SparkContext._jsc.hadoopConfiguration() / _jvm Hadoop Path",
    "default_filesystem": "SparkContext._jsc.hadoopConfiguration().get('fs.defaultFS')",
    "read_stream_bytes": "_jvm.org.apache.commons.io.IOUtils.toByteArray",
    "worker_python": "SparkContext.pythonExec",
    "run_daemon": "pyspark.daemon.manager",
    "gateway_in_own_session": "pyspark.java_gateway.launch_gateway(conf, popen_kwargs)",
    "connect_channel": "SparkConnectClient._channel / SparkConnectClient._builder.endpoint",
}


def python_rdd(jrdd: Any, sc: SparkContext) -> RDD[Any]:
    """Wrap a JVM RDD of pickled Python objects as a PySpark ``RDD``."""
    return RDD(jrdd, sc, CPickleSerializer())


def detached_rdd(rdd: RDD[Any]) -> RDD[Any]:
    """Return a plain ``RDD`` over the same JVM RDD as ``rdd`` (no subclass behaviour)."""
    return RDD(rdd._jrdd, rdd.ctx, rdd._jrdd_deserializer)


def live_conf(sc: Any) -> Any:
    """Return the context's live ``SparkConf`` (``getConf()`` would copy every key first).

    Objects that are not a SparkContext (a ``SparkConf``, a mapping in tests) are returned
    as they are.
    """
    conf = getattr(sc, "_conf", None)
    return sc if conf is None else conf


def is_active_context(sc: Any) -> bool:
    """Return True when ``sc`` is a SparkContext with a JVM context behind it."""
    return getattr(sc, "_jsc", None) is not None


def context_stopped(sc: SparkContext) -> bool:
    """Return True when the JVM SparkContext behind ``sc`` has stopped."""
    jsc = sc._jsc
    return jsc is None or bool(jsc.sc().isStopped())


def executor_list(sc: SparkContext) -> list[tuple[str, str]]:
    """Return ``(host, executor id)`` of every active executor, the driver included.

    Read from the driver's status store. A JVM that cannot answer (stopped, unreachable)
    gives an empty list.
    """
    if sc._jsc is None:
        return []
    try:
        summaries = sc._jsc.sc().statusStore().executorList(True)
        found = []
        for i in range(summaries.length()):
            summary = summaries.apply(i)
            host = str(summary.hostPort()).rsplit(":", 1)[0].strip("[]")
            found.append((host, str(summary.id())))
    except Py4JError:
        return []
    return found


def located_source(
    sc: SparkContext, elements: Sequence[object], locations: Sequence[str | None]
) -> Any:
    """Return a JVM ``JavaRDD`` whose partition ``i`` holds ``elements[i]`` (pickled).

    Partition ``i`` prefers ``locations[i]`` (``None``: no preference); Spark's
    ``makeRDD(Seq[(T, Seq[String])])`` records that and ``getPreferredLocs`` reports it.
    """
    assert sc._jsc is not None and sc._jvm is not None
    jvm = sc._jvm
    if not elements:
        return sc._jsc.emptyRDD()
    dumps: Callable[[object], bytes] = CPickleSerializer().dumps
    to_seq = jvm.org.apache.spark.api.python.PythonUtils.toSeq
    pairs = jvm.java.util.ArrayList()
    host_seqs: dict[str | None, Any] = {}  # one JVM Seq per distinct location (few executors)
    tuple2 = jvm.scala.Tuple2
    for element, location in zip(elements, locations):
        hosts = host_seqs.get(location)
        if hosts is None:
            hosts = jvm.java.util.ArrayList()
            if location:
                hosts.add(location)
            hosts = host_seqs[location] = to_seq(hosts)
        pairs.add(tuple2(bytearray(dumps(element)), hosts))
    byte_array = jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("[B"))
    return sc._jsc.sc().makeRDD(to_seq(pairs), byte_array).toJavaRDD()


def source_preferred_locations(jrdd: Any, split: int) -> list[str]:
    """Return the preferred locations Spark records for partition ``split`` of ``jrdd``."""
    source = jrdd.rdd()
    locations = source.preferredLocations(source.partitions()[split])  # a Scala Seq
    return [str(locations.apply(i)) for i in range(locations.length())]


def active_context() -> SparkContext | None:
    """Return the active SparkContext of this process, or None."""
    from pyspark import SparkContext

    return SparkContext._active_spark_context


def hadoop_path_class(sc: SparkContext) -> Any:
    """Return the JVM class ``org.apache.hadoop.fs.Path`` (call it with a path string)."""
    assert sc._jvm is not None
    return sc._jvm.org.apache.hadoop.fs.Path


def hadoop_filesystem(sc: SparkContext, path: str) -> tuple[Any, Any]:
    """Return ``(org.apache.hadoop.fs.Path, FileSystem)`` for ``path`` under ``sc``'s Hadoop configuration."""
    assert sc._jsc is not None
    jpath = hadoop_path_class(sc)(path)
    return jpath, jpath.getFileSystem(sc._jsc.hadoopConfiguration())


def default_filesystem(sc: SparkContext) -> str:
    """Return ``fs.defaultFS`` of ``sc``'s Hadoop configuration (``file:///`` when unset)."""
    assert sc._jsc is not None
    return str(sc._jsc.hadoopConfiguration().get("fs.defaultFS") or "file:///")


def read_stream_bytes(sc: SparkContext, stream: Any) -> bytes:
    """Read a JVM ``InputStream`` to its end in one gateway call."""
    assert sc._jvm is not None
    return bytes(sc._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))


def worker_python(sc: SparkContext) -> str:
    """Return the interpreter PySpark starts its workers with (``PYSPARK_PYTHON`` when the
    context was created, else ``python3``)."""
    return str(sc.pythonExec)


@functools.lru_cache(maxsize=16)
def worker_python_imports(python: str, module: str) -> bool:
    """Return True when interpreter ``python`` can import ``module``; cached per pair.

    Runs ``python -c 'import <module>'`` once (about 100 ms); a missing interpreter answers
    False.
    """
    try:
        done = subprocess.run(
            [python, "-c", f"import {module}"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def run_daemon() -> None:
    """Run PySpark's worker daemon loop in this process (what ``python -m pyspark.daemon`` runs)."""
    from pyspark import daemon

    daemon.manager()


def gateway_in_own_session(conf: Any) -> Any:
    """Launch PySpark's JVM gateway for ``conf`` with the JVM in a session of its own.

    The gateway's ``popen_kwargs`` reach ``subprocess.Popen``; the JVM still exits when this
    process's pipe to its standard input closes.
    """
    from pyspark.java_gateway import launch_gateway

    return launch_gateway(conf, popen_kwargs={"start_new_session": True})


def connect_channel(spark: Any) -> tuple[Any, str]:
    """Return the gRPC channel of a Spark Connect session's client and the ``host:port`` it
    connects to (the URL's endpoint: no token or other parameter)."""
    client = spark.client
    return client._channel, str(client._builder.endpoint)
