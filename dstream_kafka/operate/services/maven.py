"""Resolve jars from Maven Central into the project's cache folder, once.

A classpath is a named set of Maven coordinates. The first call writes a throwaway ``pom.xml``,
runs ``mvn dependency:copy-dependencies`` with a private local repository under the cache folder,
and leaves a stamp file listing the coordinates; later calls with the same coordinates read the
stamp and never touch the network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import urllib.request
from pathlib import Path
from typing import Sequence
from xml.sax.saxutils import escape

from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.environment import cache_dir, require_maven

__all__ = ["resolve_classpath", "resolve_archive", "KAFKA_VERSION", "kafka_artifacts", "HBASE_VERSION",
           "hbase_artifacts", "APICURIO_VERSION", "apicurio_archive"]

#: The Apache Kafka release the local broker runs (KRaft mode).
KAFKA_VERSION = "4.1.1"
_LOG4J_VERSION = "2.24.3"
#: The Apache HBase release the local test server runs (standalone mode plus its Thrift gateway).
HBASE_VERSION = "2.6.1"
#: The Apicurio Registry release the test Schema Registry runs (its Confluent-compatible API).
#: 3.0.9 is the newest 3.x that runs on Java 17 (3.3.x is built for Java 21).
APICURIO_VERSION = "3.0.9"
#: Where :func:`resolve_archive` downloads distribution archives from.
MAVEN_CENTRAL = "https://repo.maven.apache.org/maven2"


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


def apicurio_archive(version: str = APICURIO_VERSION) -> str:
    """Return the coordinate of Apicurio Registry's runnable Quarkus distribution.

    The plain ``apicurio-registry-app`` jar is not runnable: Quarkus builds its application at
    package time, and only the ``all`` archive holds the built runner jar with its libraries.
    """
    return f"io.apicurio:apicurio-registry-app:{version}:tar.gz:all"


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


def resolve_archive(name: str, coordinate: str, timeout: float = 600.0) -> Path:
    """Return the folder a ``.tar.gz`` artifact unpacks to, downloading and unpacking it if needed.

    The archive is fetched from Maven Central by its path and checked against the ``.sha1`` file
    published beside it. Maven itself is not used: a distribution needs none of its dependencies,
    and Maven refuses an artifact whose parent POM is not published (Apicurio 3.0.9's is not).

    Parameters
    ----------
    name : str
        Folder name under ``<cache>/maven/``.
    coordinate : str
        ``group:artifact:version:tar.gz:classifier`` of a distribution archive.
    timeout : float
        Seconds allowed for each HTTP request.

    Returns
    -------
    Path
        The folder holding the archive's unpacked entries.

    Raises
    ------
    ServiceError
        When the download fails or its checksum does not match.
    """
    parts = coordinate.split(":")
    if len(parts) != 5 or parts[3] != "tar.gz":
        raise ValueError(f"archive coordinate {coordinate!r} must be group:artifact:version:tar.gz:classifier")
    group, artifact, version, ext, classifier = parts
    target = cache_dir() / "maven" / name
    stamp = target / "resolved.json"
    unpacked = target / "unpacked"
    try:
        if json.loads(stamp.read_text()) == [coordinate] and unpacked.is_dir():
            return unpacked
    except (OSError, ValueError):
        pass  # no stamp or a broken one: fetch again
    url = f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}-{classifier}.{ext}"
    target.mkdir(parents=True, exist_ok=True)
    download = target / f"{artifact}-{version}-{classifier}.{ext}"
    try:
        with urllib.request.urlopen(url + ".sha1", timeout=timeout) as answer:
            expected = answer.read().decode("ascii").split()[0].strip().lower()
        digest = hashlib.sha1()
        with urllib.request.urlopen(url, timeout=timeout) as answer, open(download, "wb") as out:
            while chunk := answer.read(1 << 20):
                digest.update(chunk)
                out.write(chunk)
    except OSError as exc:
        raise ServiceError(f"could not download {coordinate} from {url} ({exc}); Maven Central must "
                           "be reachable the first time") from None
    if digest.hexdigest() != expected:
        download.unlink(missing_ok=True)
        raise ServiceError(f"{url} has SHA-1 {digest.hexdigest()}, not the published {expected}")
    partial = target / "unpacking"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(unpacked, ignore_errors=True)
    with tarfile.open(download) as archive:
        archive.extractall(partial, filter="data")
    # unpack beside, then rename: an interrupted unpack never looks complete
    partial.rename(unpacked)
    download.unlink()
    stamp.write_text(json.dumps([coordinate]))
    return unpacked
