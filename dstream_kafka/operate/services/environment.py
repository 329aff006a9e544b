"""Machine facts the local services need: cache folder, free ports, required tools, processes.

Every check raises :class:`~dstream_kafka.errors.MissingDependencyError` with one sentence that
says what to install, so a fresh machine fails with an instruction rather than a traceback.
"""

from __future__ import annotations

import abc
import atexit
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Callable, Self, Sequence

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.lifeline import popen_tied

__all__ = [
    "cache_dir",
    "free_port",
    "require_java",
    "require_maven",
    "require_executable",
    "debian_install_hint",
    "run_as",
    "ManagedProcess",
    "LocalService",
    "wait_until",
    "port_open",
]

_CACHE_ENV = "DSTREAM_KAFKA_CACHE"


def cache_dir() -> Path:
    """Return the folder that holds Maven artifacts and service state (created if missing).

    ``$DSTREAM_KAFKA_CACHE`` wins; in a source checkout it is ``<checkout>/.cache`` (an ignored
    path), otherwise ``~/.cache/dstream_kafka``.
    """
    explicit = os.environ.get(_CACHE_ENV)
    if explicit:
        path = Path(explicit)
    else:
        # the folder above the package: a checkout has setup.cfg there, an installed wheel not
        checkout = Path(__file__).resolve().parents[len(__name__.split(".")) - 1]
        if (checkout / "setup.cfg").is_file() and (checkout / "dstream_kafka").is_dir():
            path = checkout / ".cache"
        else:
            path = Path.home() / ".cache" / "dstream_kafka"
    path.mkdir(parents=True, exist_ok=True)
    return path


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    """Return True when something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def debian_install_hint(*packages: str) -> str:
    """Return the apt command that installs ``packages``."""
    return "apt-get update && apt-get install -y " + " ".join(packages)


def require_executable(name: str, packages: Sequence[str], purpose: str) -> str:
    """Return the path of executable ``name`` or raise naming the Debian packages to install."""
    path = shutil.which(name)
    if path is None:
        raise MissingDependencyError(
            f"{name} is required {purpose} but was not found on PATH; install it with "
            f"`{debian_install_hint(*packages)}` (or run `bash .ci/setup` in a checkout)."
        )
    return path


def require_java() -> str:
    """Return the ``java`` executable (Java 17 or newer), or raise saying how to install it."""
    java = require_executable(
        "java", ["openjdk-17-jre-headless"], "to run the Apache Kafka broker and Spark"
    )
    proc = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    text = proc.stderr + proc.stdout
    version = _java_major(text)
    if version is not None and version < 17:
        raise MissingDependencyError(
            f"Java 17 or newer is required, found Java {version}; install it with "
            f"`{debian_install_hint('openjdk-17-jre-headless')}`."
        )
    return java


def _java_major(version_text: str) -> int | None:
    for token in version_text.replace('"', " ").split():
        head = token.split(".")[0]
        if head.isdigit() and "." in token:
            major = int(head)
            return int(token.split(".")[1]) if major == 1 else major
    return None


def require_maven() -> str:
    """Return the ``mvn`` executable, or raise saying how to install it."""
    return require_executable(
        "mvn", ["maven"], "to resolve the Apache Kafka jars from Maven Central"
    )


def run_as(user: str, argv: Sequence[str]) -> list[str]:
    """Return ``argv`` wrapped to run as ``user`` when we are root (via ``runuser``)."""
    if os.geteuid() != 0:
        return list(argv)
    runuser = require_executable("runuser", ["util-linux"], "to start services as their own user")
    return [runuser, "-u", user, "--", *argv]


def wait_until(
    predicate: Callable[[], bool],
    timeout: float,
    what: str,
    interval: float = 0.2,
    alive: Callable[[], str | None] | None = None,
) -> None:
    """Poll ``predicate`` until it is true, or raise ServiceError after ``timeout`` seconds.

    ``alive`` may return an error text when the watched process died, which ends the wait early.
    """
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if alive is not None:
            problem = alive()
            if problem:
                raise ServiceError(f"{what} failed: {problem}")
        if time.monotonic() > deadline:
            raise ServiceError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class LocalService(abc.ABC):
    """A local server: ``start()`` returns it running, ``stop()`` ends it; ``with`` does both."""

    @abc.abstractmethod
    def start(self) -> Self:
        """Start the server (a no-op when it runs) and return it."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Stop the server and remove its temporary files (a no-op when it is stopped)."""

    def _discard(self, root: Path | None) -> None:
        """Remove the server's temporary folder ``root`` and its exit hook (after it stopped)."""
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
        atexit.unregister(self.stop)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ManagedProcess:
    """A child process in its own session, logging to a file, stopped with SIGTERM then SIGKILL.

    On Linux it also gets SIGTERM when this process dies, even by SIGKILL
    (:func:`~dstream_kafka.operate.services.lifeline.popen_tied`): a killed program leaves no server.
    """

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.env = env
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Launch the process (its output goes to ``log_path``)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            # Its own session: a signal to our process group (Ctrl-C, ``timeout``) does not
            # stop it before we do; tied to us, it still dies when we are killed.
            self.proc = popen_tied(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self.env, cwd=self.cwd, start_new_session=True,
            )

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def death_note(self) -> str | None:
        """Return why the process is gone (exit code and log tail), or None while it runs."""
        if self.proc is None or self.proc.poll() is None:
            return None
        return f"{self.name} exited with code {self.proc.returncode}; last log lines:\n{self.log_tail()}"

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 30.0, sig: int = signal.SIGTERM) -> None:
        """Stop the process group: ``sig`` first, SIGKILL after ``timeout`` seconds."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)

    def kill(self) -> None:
        """Kill the process group at once (SIGKILL), as a crash would."""
        self.stop(timeout=0.1, sig=signal.SIGKILL)
