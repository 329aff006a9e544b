"""A private Apicurio Registry on 127.0.0.1: a real Schema Registry with the Confluent API.

Apicurio Registry 3.x serves Confluent's Schema Registry REST API under ``/apis/ccompat/v7``,
so confluent-kafka's ``SchemaRegistryClient`` and serializers talk to it unchanged. The runnable
distribution comes from Maven Central (:func:`~dstream_kafka.operate.services.maven.apicurio_archive`,
fetched once into the cache folder); it runs on Java 17 with its default in-memory H2 storage, so
every session starts with an empty registry. Tests still never assume schema ids: ids are not
reset between tests.
"""

from __future__ import annotations

import atexit
import tempfile
import urllib.request
from pathlib import Path

from dstream_kafka.errors import ServiceError
from dstream_kafka.operate.services.environment import (
    LocalService,
    ManagedProcess,
    free_port,
    require_java,
    wait_until,
)
from dstream_kafka.operate.services.maven import APICURIO_VERSION, apicurio_archive, resolve_archive

__all__ = ["ApicurioRegistry", "apicurio_home"]


def apicurio_home(version: str = APICURIO_VERSION) -> Path:
    """Return the unpacked Apicurio distribution, downloading it the first time."""
    return resolve_archive(f"apicurio-{version}", apicurio_archive(version))


def _runner_jar(home: Path) -> Path:
    # 3.0.x ships a runner jar at the top; later releases a quarkus-app/ layout
    for candidate in [*sorted(home.glob("*-runner.jar")), home / "quarkus-run.jar",
                      home / "quarkus-app" / "quarkus-run.jar"]:
        if candidate.is_file():
            return candidate
    raise ServiceError(f"no Apicurio runner jar in {home}; remove the folder to fetch it again")


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


class ApicurioRegistry(LocalService):
    """Apicurio Registry on a free loopback port, in memory, stopped with the session.

    Parameters
    ----------
    heap : str
        The JVM's maximum heap (``-Xmx``).
    """

    def __init__(self, heap: str = "384m") -> None:
        self.heap = heap
        self.port = 0
        self._root: Path | None = None
        self._process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        """The Confluent-compatible API's base URL, as ``SchemaRegistryClient`` takes it."""
        return f"http://127.0.0.1:{self.port}/apis/ccompat/v7"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/health/ready"

    def start(self, timeout: float = 240.0) -> "ApicurioRegistry":
        """Start the registry and wait until its readiness check answers UP."""
        if self._process is not None:
            return self
        java = require_java()
        jar = _runner_jar(apicurio_home())
        self._root = Path(tempfile.mkdtemp(prefix="dstream-kafka-registry-"))
        self.port = free_port()
        argv = [
            java, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            f"-Dquarkus.http.port={self.port}", "-Dquarkus.http.host=127.0.0.1",
            # no management interface on its own port: health stays on the main one
            "-Dquarkus.management.enabled=false",
            f"-Djava.io.tmpdir={self._root}",
            "-jar", str(jar),
        ]
        self._process = ManagedProcess("Apicurio Registry", argv, self._root / "registry.log",
                                       cwd=jar.parent)
        self._process.start()
        atexit.register(self.stop)
        wait_until(lambda: _ready(self.health_url), timeout, "Apicurio Registry to be ready",
                   interval=0.5, alive=self._process.death_note)
        return self

    def stop(self) -> None:
        """Stop the registry and remove its folder."""
        if self._process is None:
            return
        self._process.stop(timeout=20)
        self._process = None
        self._discard(self._root)
