"""Resolve jars from Maven Central into the project's cache folder, once.

A classpath is a named set of Maven coordinates. The first call writes a throwaway ``pom.xml``,
runs ``mvn dependency:copy-dependencies`` with a private local repository under the cache folder,
and leaves a stamp file listing the coordinates; later calls with the same coordinates read the
stamp and never touch the network.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Sequence
from xml.sax.saxutils import escape

from dstream_kafka.errors import ServiceError
from dstream_kafka.operate.services.environment import cache_dir, require_maven

__all__ = ["resolve_classpath", "KAFKA_VERSION", "kafka_artifacts", "HBASE_VERSION", "hbase_artifacts"]

#: The Apache Kafka release the local broker runs (KRaft mode).
KAFKA_VERSION = "4.1.1"
_LOG4J_VERSION = "2.24.3"
#: The Apache HBase release the local test server runs (standalone mode plus its Thrift gateway).
HBASE_VERSION = "2.6.1"


def kafka_artifacts(version: str = KAFKA_VERSION) -> list[str]:
    """Return the Maven coordinates of the broker, its tools and a log4j2 binding."""
    return [
        f"org.apache.kafka:kafka_2.13:{version}",
        f"org.apache.kafka:kafka-tools:{version}",
        # Kafka's pom leaves the slf4j binding to the distribution; without one the broker is silent.
        f"org.apache.logging.log4j:log4j-slf4j-impl:{_LOG4J_VERSION}",
    ]


def hbase_artifacts(version: str = HBASE_VERSION) -> list[str]:
    """Return the Maven coordinates of a standalone HBase with its Thrift gateway.

    ``hbase-thrift`` depends on ``hbase-server`` (master, region server, ``LocalHBaseCluster``),
    ``hbase-zookeeper`` (the in-process ZooKeeper of standalone mode), Hadoop 2.10 for the
    ``file://`` root folder and the reload4j logging binding, so it is the only coordinate needed.
    """
    return [f"org.apache.hbase:hbase-thrift:{version}"]


def _pom(artifacts: Sequence[str]) -> str:
    deps = []
    for coord in artifacts:
        parts = coord.split(":")
        if len(parts) != 3:
            raise ValueError(f"Maven coordinate {coord!r} must be group:artifact:version")
        group, artifact, version = (escape(p) for p in parts)
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>dstream-kafka</groupId><artifactId>classpath</artifactId><version>1</version>"
        "<packaging>pom</packaging><dependencies>" + "".join(deps) + "</dependencies></project>\n"
    )


def resolve_classpath(name: str, artifacts: Sequence[str], quiet: bool = True) -> list[Path]:
    """Return the jars of ``artifacts`` and their runtime dependencies, resolving them if needed.

    Parameters
    ----------
    name : str
        Folder name of this classpath under ``<cache>/maven/``.
    artifacts : sequence of str
        ``group:artifact:version`` coordinates.
    quiet : bool
        Hide Maven's download log unless it fails.

    Returns
    -------
    list of Path
        Jar files, sorted by name.
    """
    root = cache_dir() / "maven"
    target = root / name
    stamp = target / "resolved.json"
    lib = target / "lib"
    wanted = sorted(artifacts)
    if stamp.is_file():
        try:
            if json.loads(stamp.read_text()) == wanted and lib.is_dir():
                return sorted(lib.glob("*.jar"))
        except (OSError, ValueError):
            pass  # a broken stamp means resolve again
    mvn = require_maven()
    target.mkdir(parents=True, exist_ok=True)
    (target / "pom.xml").write_text(_pom(wanted))
    cmd = [
        mvn, "-B", "-f", str(target / "pom.xml"),
        "dependency:copy-dependencies", "-DincludeScope=runtime",
        f"-DoutputDirectory={lib}", f"-Dmaven.repo.local={root / 'repository'}",
    ]
    if quiet:
        cmd.insert(2, "-q")
    env = dict(os.environ)
    proc = subprocess.run(cmd, capture_output=quiet, text=True, env=env, check=False)
    if proc.returncode != 0:
        output = (proc.stdout or "") + (proc.stderr or "")
        raise ServiceError(
            f"Maven could not resolve {', '.join(wanted)} (exit {proc.returncode}); "
            f"Maven Central must be reachable the first time. Output:\n{output[-3000:]}"
        )
    stamp.write_text(json.dumps(wanted))
    return sorted(lib.glob("*.jar"))
