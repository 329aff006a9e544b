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
import base64
import hmac
import ssl
import tempfile
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from dstream_kafka.client.keystores import keystore_pem
from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.environment import (
    LocalService,
    ManagedProcess,
    free_port,
    require_java,
    wait_until,
)
from dstream_kafka.operate.services.maven import APICURIO_VERSION, apicurio_archive, resolve_archive

__all__ = ["ApicurioRegistry", "GatedRegistry", "apicurio_home"]


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


class GatedRegistry:
    """HTTPS with HTTP basic authentication in front of a running registry, on a free port.

    Apicurio authenticates through an OpenID Connect server only; what clients of a
    Confluent-style registry configure is TLS and ``basic.auth.user.info``, so this gateway asks
    for exactly that and forwards every request to the registry behind it.

    Parameters
    ----------
    upstream : ApicurioRegistry
        The running registry.
    pki : tests.support.tls.Pki
        Its ``broker`` certificate (for 127.0.0.1) serves TLS; clients trust ``pki.ca_pem``.
    user, password : str
        The one account the gateway accepts.
    """

    def __init__(self, upstream: ApicurioRegistry, pki: object, user: str, password: str) -> None:
        self.upstream = upstream
        self.pki = pki
        self.user = user
        self.password = password
        self._expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.refused = 0
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"https://127.0.0.1:{self._server.server_address[1]}/apis/ccompat/v7"

    def start(self) -> "GatedRegistry":
        pki: Any = self.pki
        certfile, keyfile, key_password = keystore_pem(str(pki.broker_keystore), "PKCS12",
                                                       pki.password, pki.password)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile, keyfile, key_password)
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
                pass

            def _forward(self) -> None:
                given = self.headers.get("Authorization", "")
                if not hmac.compare_digest(given.encode(), gate._expected.encode()):
                    gate.refused += 1
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="registry"')
                    body = b'{"error_code": 40101, "message": "Unauthorized"}'
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                length = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(length) if length else None
                target = gate.upstream.url.rsplit("/apis/", 1)[0] + self.path
                request = urllib.request.Request(target, data=data, method=self.command, headers={
                    k: v for k, v in self.headers.items() if k.lower() in ("content-type", "accept")})
                try:
                    with urllib.request.urlopen(request, timeout=30) as answer:
                        status, headers, body = answer.status, answer.headers, answer.read()
                except urllib.error.HTTPError as error:
                    status, headers, body = error.code, error.headers, error.read()
                self.send_response(status)
                self.send_header("Content-Type", headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_DELETE = _forward

        server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        self._server = server
        threading.Thread(target=server.serve_forever, name="registry-gate", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
