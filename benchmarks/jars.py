"""Jars for the JVM contenders: Spark's Kafka connectors from Maven Central, and pyspark's own jars.

Two facts shape this module (checked against Maven Central in 2026-11):

* pyspark 4.3.0 has no matching connector release: the newest ``spark-sql-kafka-0-10_2.13`` is
  4.2.0, ``spark-streaming-kafka-0-10_2.13`` stops at 4.1.0-preview1, and
  ``spark-token-provider-kafka-0-10_2.13`` exists only as 4.0.0 and 4.1.0-preview1.
* Spark's parent pom declares an extra repository that this machine cannot reach, and the
  4.2.0 connector's token-provider dependency is not on Central, so transitive resolution fails.

So every jar is pinned explicitly and resolved **without** transitive dependencies: only the
connector, the token provider, ``kafka-clients`` and ``commons-pool2``. Everything else (Spark,
Scala, compression codecs, logging) comes from pyspark's own ``jars`` folder, so two versions
of Spark or Scala never meet on one classpath. The versions used are recorded in the results.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Sequence
from xml.sax.saxutils import escape

from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.environment import cache_dir, require_maven

__all__ = ["resolve_jars", "pyspark_jars_dir", "sql_kafka_jars", "streaming_kafka_jars",
           "SQL_KAFKA", "STREAMING_KAFKA"]

_SETTINGS = """<settings><mirrors><mirror><id>central-only</id><mirrorOf>*</mirrorOf>
<url>https://repo.maven.apache.org/maven2</url></mirror></mirrors></settings>
"""

#: Structured Streaming's Kafka source: newest connector on Central + what it links against.
SQL_KAFKA = (
    "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.1.0-preview1",
    "org.apache.kafka:kafka-clients:3.9.2",
    "org.apache.commons:commons-pool2:2.13.1",
)
#: Spark's kafka010 DStream connector: the newest 4.x build on Central.
STREAMING_KAFKA = (
    "org.apache.spark:spark-streaming-kafka-0-10_2.13:4.1.0-preview1",
    "org.apache.spark:spark-token-provider-kafka-0-10_2.13:4.1.0-preview1",
    "org.apache.kafka:kafka-clients:3.9.1",
)


def _pom(artifacts: Sequence[str]) -> str:
    deps = []
    for coord in artifacts:
        group, artifact, version = (escape(p) for p in coord.split(":"))
        # Wildcard exclusion: take exactly the listed jars, never their dependency graph.
        deps.append(f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                    f"<version>{version}</version><exclusions><exclusion><groupId>*</groupId>"
                    "<artifactId>*</artifactId></exclusion></exclusions></dependency>")
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>dstream-kafka</groupId><artifactId>bench-classpath</artifactId>"
            "<version>1</version><packaging>pom</packaging><dependencies>"
            + "".join(deps) + "</dependencies></project>\n")


def resolve_jars(name: str, artifacts: Sequence[str]) -> list[Path]:
    """Return the jars of exactly ``artifacts`` (no transitive ones), resolved once and cached.

    Uses the project cache (``<cache>/maven/bench-<name>``) and its local repository, like
    :func:`dstream_kafka.operate.services.maven.resolve_classpath`.
    """
    root = cache_dir() / "maven"
    target = root / f"bench-{name}"
    stamp, lib = target / "resolved.json", target / "lib"
    wanted = sorted(artifacts)
    if stamp.is_file() and lib.is_dir():
        try:
            if json.loads(stamp.read_text()) == wanted:
                return sorted(lib.glob("*.jar"))
        except ValueError:
            pass
    target.mkdir(parents=True, exist_ok=True)
    (target / "pom.xml").write_text(_pom(wanted))
    (target / "settings.xml").write_text(_SETTINGS)
    cmd = [require_maven(), "-B", "-q", "-s", str(target / "settings.xml"),
           "-f", str(target / "pom.xml"), "dependency:copy-dependencies",
           f"-DoutputDirectory={lib}", f"-Dmaven.repo.local={root / 'repository'}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ServiceError(f"Maven could not resolve {', '.join(wanted)}:\n"
                           f"{(proc.stdout + proc.stderr)[-2000:]}")
    stamp.write_text(json.dumps(wanted))
    return sorted(lib.glob("*.jar"))


def pyspark_jars_dir() -> Path:
    """Return the folder of jars that ships inside the pyspark package."""
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def _version_of(coords: Sequence[str]) -> str:
    return coords[0].rsplit(":", 1)[1]


def sql_kafka_jars() -> tuple[str, list[Path]]:
    """Return ``(connector version, jars)`` for Structured Streaming's Kafka source."""
    return _version_of(SQL_KAFKA), resolve_jars("sql-kafka", SQL_KAFKA)


def streaming_kafka_jars() -> tuple[str, list[Path]]:
    """Return ``(connector version, jars)`` for Spark's kafka010 DStream."""
    return _version_of(STREAMING_KAFKA), resolve_jars("streaming-kafka", STREAMING_KAFKA)
