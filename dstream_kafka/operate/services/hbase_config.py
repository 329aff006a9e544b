"""The files and command line a standalone HBase starts from: hbase-site.xml, log4j, JVM flags.

``hbase-site.xml`` entries, ``log4j.properties`` and the JVM arguments, as pure functions of
the folders, ports and sizes :class:`~dstream_kafka.operate.services.hbase.HBaseServer` chose: every
address on 127.0.0.1, every file under its data folder, a small serial-GC JVM with the flags
HBase's own launch script adds on Java 11+. Nothing here starts a process.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping
from xml.sax.saxutils import escape

__all__ = ["JAVA17_FLAGS", "java_argv", "log4j_properties", "mebibytes", "site_properties",
           "site_xml"]

#: What HBase 2.6's ``bin/hbase`` adds on Java 11+ (HBASE-28259, HBASE-27643): without them
#: netty logs an ``InaccessibleObjectException`` and falls back to slower code paths.
JAVA17_FLAGS: tuple[str, ...] = (
    "-Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true",
    "--add-modules", "jdk.unsupported",
    "--add-opens", "java.base/java.io=ALL-UNNAMED",
    "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED",
    "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens", "java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens", "java.base/java.util=ALL-UNNAMED",
    "--add-opens", "java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-exports", "java.base/jdk.internal.misc=ALL-UNNAMED",
    "--add-exports", "java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.dns=ALL-UNNAMED",
    "--add-exports", "java.base/sun.net.util=ALL-UNNAMED",
)

_LOG4J = """\
log4j.rootLogger=INFO,file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File={log}
log4j.appender.file.Append=true
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=%d{{ISO8601}} %-5p [%t] %c{{2}}: %m%n
log4j.logger.org.apache.zookeeper=WARN
log4j.logger.org.apache.hadoop=WARN
log4j.logger.org.apache.hadoop.hbase=INFO
log4j.logger.org.apache.hadoop.hbase.zookeeper=WARN
log4j.logger.org.apache.hadoop.hbase.ScheduledChore=WARN
log4j.logger.org.apache.hadoop.hbase.io.hfile=WARN
log4j.logger.org.apache.hadoop.hbase.http=WARN
log4j.logger.org.apache.hadoop.metrics2=ERROR
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.org.apache.hbase.thirdparty=WARN
"""


def site_properties(root: Path, host: str, zookeeper_port: int, master_port: int,
                    regionserver_port: int, thrift_port: int) -> dict[str, Any]:
    """Return the ``hbase-site.xml`` entries of a standalone HBase rooted at ``root``."""
    return {
        "hbase.cluster.distributed": "false",
        "hbase.rootdir": (root / "hbase").as_uri(),
        "hbase.tmp.dir": str(root / "tmp"),
        "hbase.zookeeper.quorum": host,
        "hbase.zookeeper.property.clientPort": zookeeper_port,
        "hbase.zookeeper.property.dataDir": str(root / "zk"),
        # Without it the master aborts on file:// (no hflush) and the JVM does not exit.
        "hbase.unsafe.stream.capability.enforce": "false",
        "hbase.master.port": master_port,
        "hbase.regionserver.port": regionserver_port,
        "hbase.master.ipc.address": host,
        "hbase.regionserver.ipc.address": host,
        "hbase.master.hostname": "localhost",
        "hbase.unsafe.regionserver.hostname": "localhost",
        "hbase.master.info.port": -1,
        "hbase.regionserver.info.port": -1,
        # One region server: do not wait 4.5 s for more.
        "hbase.master.wait.on.regionservers.mintostart": 1,
        "hbase.master.wait.on.regionservers.maxtostart": 1,
        # On SIGTERM the embedded ZooKeeper goes first and the region server then retries the
        # delete of its ephemeral znode with backoff: 4 tries from 1 s took 20 of the 25 s of a
        # clean stop. 2 tries from 200 ms bring a clean stop to 6-8 s.
        "zookeeper.recovery.retry": 1,
        "zookeeper.recovery.retry.intervalmill": 200,
        # The first report to the master retries after this interval (3 s by default).
        "hbase.regionserver.msginterval": 1000,
        # Fewer threads: less memory and less scheduling on two cores.
        "hbase.regionserver.handler.count": 8,
        "hbase.regionserver.metahandler.count": 4,
        "hbase.master.handler.count": 8,
        "hbase.thrift.minWorkerThreads": 4,
        "hbase.thrift.info.port": -1,
        "hbase.regionserver.thrift.ipaddress": host,
        "hbase.regionserver.thrift.port": thrift_port,
    }


def site_xml(props: Mapping[str, Any]) -> str:
    """Return ``props`` as a Hadoop configuration XML document."""
    rows = "".join(
        f"  <property><name>{escape(str(k))}</name><value>{escape(str(v))}</value></property>\n"
        for k, v in props.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{rows}</configuration>\n'


def log4j_properties(log: Path) -> str:
    """Return HBase's reload4j configuration, logging INFO and up to the file ``log``."""
    return _LOG4J.format(log=log)


def java_argv(java: str, heap: str, classpath: list[str], main: str, *args: str,
              data_dir: Path, conf_dir: Path) -> list[str]:
    """Return the command line of an HBase JVM running ``main`` with ``args``."""
    initial = mebibytes(heap)
    return [
        java, f"-Xmx{heap}", *([f"-Xms{min(64, initial)}m"] if initial else []),
        # A small serial-GC JVM: the least native memory, and no GC threads fighting the
        # other services for the two cores.
        "-XX:+UseSerialGC", "-XX:MaxDirectMemorySize=128m", "-XX:ReservedCodeCacheSize=64m",
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true", "-Djava.net.preferIPv4Stack=true",
        f"-Djava.io.tmpdir={data_dir / 'tmp'}",
        f"-Dlog4j.configuration={(conf_dir / 'log4j.properties').as_uri()}",
        f"-Dhbase.log.dir={data_dir / 'logs'}",
        *JAVA17_FLAGS,
        "-cp", os.pathsep.join(classpath), main, *args,
    ]


def mebibytes(size: str) -> int | None:
    """Return a JVM size such as ``256m`` or ``1g`` in MiB, or None when it is not one."""
    text = size.strip().lower()
    units = {"k": 1 / 1024, "m": 1.0, "g": 1024.0}
    try:
        if text and text[-1] in units:
            return max(1, int(float(text[:-1]) * units[text[-1]]))
        return max(1, int(text) // (1024 * 1024))
    except ValueError:
        return None  # let the JVM say what is wrong with it
