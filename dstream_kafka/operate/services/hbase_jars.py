"""The jars of a standalone HBase and its Thrift gateway, and the launcher that runs both in one JVM.

Both are made once and cached: the jars resolved from Maven Central into the cache folder, the
launcher class compiled with ``javac`` (without a JDK the gateway runs as a second JVM instead).
``dstream-kafka setup`` prepares them (:func:`prepare_hbase`) so tests never download or compile.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.operate.services.environment import cache_dir
from dstream_kafka.operate.services.maven import HBASE_VERSION, hbase_artifacts, resolve_classpath

__all__ = ["LAUNCHER_CLASS", "compiled_launcher", "hbase_classpath", "prepare_hbase"]

LAUNCHER_CLASS = "DStreamKafkaHBaseLauncher"

# Runs HMaster (standalone: ZooKeeper + master + region server) on one thread and the Thrift1
# gateway on the main thread of the same JVM. Reflection keeps the compile independent of the
# HBase jars, so javac needs no classpath and the class works for any 2.x release.
_LAUNCHER_SOURCE = """\
public final class DStreamKafkaHBaseLauncher {
    private static void run(String mainClass, String[] args) throws Exception {
        Class.forName(mainClass).getMethod("main", String[].class).invoke(null, (Object) args);
    }

    public static void main(String[] args) throws Exception {
        Thread hbase = new Thread(() -> {
            try {
                run("org.apache.hadoop.hbase.master.HMaster", new String[] {"start"});
            } catch (Throwable t) {
                t.printStackTrace();
                Runtime.getRuntime().halt(1);
            }
        }, "dstream-kafka-hbase-master");
        hbase.start();
        try {
            run("org.apache.hadoop.hbase.thrift.ThriftServer", args);
        } catch (Throwable t) {
            t.printStackTrace();
            Runtime.getRuntime().halt(2);
        }
    }
}
"""


def hbase_classpath(version: str = HBASE_VERSION) -> list[Path]:
    """Return the jars of standalone HBase and its Thrift gateway, resolving them on first use.

    Parameters
    ----------
    version : str
        HBase release.

    Returns
    -------
    list of Path
        Jar files, sorted by name.

    Raises
    ------
    MissingDependencyError
        Maven is needed for the first resolution and is not installed.
    ServiceError
        Maven could not resolve the jars.
    """
    try:
        return resolve_classpath(f"hbase-{version}", hbase_artifacts(version))
    except MissingDependencyError as exc:
        raise MissingDependencyError(str(exc).replace("Apache Kafka", "Apache HBase")) from None


def compiled_launcher() -> Path | None:
    """Return the folder holding the compiled launcher class, or None without ``javac``."""
    javac = shutil.which("javac")
    if javac is None:
        return None
    digest = hashlib.sha256(_LAUNCHER_SOURCE.encode()).hexdigest()[:12]
    folder = cache_dir() / "hbase-launcher" / digest
    if (folder / f"{LAUNCHER_CLASS}.class").is_file():
        return folder
    build = Path(tempfile.mkdtemp(prefix="launcher-", dir=cache_dir()))
    try:
        source = build / f"{LAUNCHER_CLASS}.java"
        source.write_text(_LAUNCHER_SOURCE)
        proc = subprocess.run([javac, "--release", "11", "-d", str(build), str(source)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            return None  # a broken JDK: fall back to a separate gateway JVM
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.replace(build, folder)  # atomic, so two processes may race safely
        except OSError:
            if not (folder / f"{LAUNCHER_CLASS}.class").is_file():
                raise
        return folder
    finally:
        shutil.rmtree(build, ignore_errors=True)


def prepare_hbase(version: str = HBASE_VERSION) -> tuple[list[Path], Path | None]:
    """Resolve the HBase jars and compile the one-JVM launcher now, as ``dstream-kafka setup`` does.

    Both are cached, so a later :meth:`HBaseServer.start` neither downloads nor compiles.

    Parameters
    ----------
    version : str
        HBase release.

    Returns
    -------
    tuple of (list of Path, Path or None)
        The jars, and the folder of the compiled launcher class; None without ``javac`` (a
        JRE-only machine), where the Thrift gateway runs as a second JVM. Errors are those of
        :func:`hbase_classpath`.
    """
    return hbase_classpath(version), compiled_launcher()
