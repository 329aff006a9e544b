"""A real Apache HBase in standalone mode with its Thrift gateway, on 127.0.0.1, from Maven jars.

Standalone mode runs the master, one region server and an embedded ZooKeeper in one JVM
(``HMaster start`` with ``hbase.cluster.distributed=false``), with its root folder on the local
filesystem. The Thrift1 gateway (the ``Hbase`` service that happybase speaks) runs in the same
JVM through a tiny launcher class that this module compiles once into the cache folder; without
``javac`` (a JRE-only machine) the gateway runs as a second JVM instead.

Every port is a free port on 127.0.0.1, every file lives in one temporary folder, readiness is a
real happybase round trip under an overall deadline, and stop sends SIGTERM, then SIGKILL after a
short grace (a clean HBase shutdown takes 6-12 s, and a temporary folder is thrown away anyway)
and removes the folder. A folder given as ``data_dir`` is kept, and stop then waits for the clean
shutdown, so a later start finds the tables again.

The configuration files and the JVM command line are built in
:mod:`dstream_kafka.operate.services.hbase_config`; the jars and the launcher come from
:mod:`dstream_kafka.operate.services.hbase_jars`.
"""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.environment import (
    ManagedProcess,
    free_port,
    port_open,
    require_executable,
    require_java,
)
from dstream_kafka.operate.services.hbase_config import JAVA17_FLAGS as JAVA17_FLAGS
from dstream_kafka.operate.services.hbase_config import (
    java_argv,
    log4j_properties,
    site_properties,
    site_xml,
)
from dstream_kafka.operate.services.hbase_jars import LAUNCHER_CLASS, compiled_launcher
from dstream_kafka.operate.services.hbase_jars import hbase_classpath as hbase_classpath
from dstream_kafka.operate.services.hbase_jars import prepare_hbase as prepare_hbase
from dstream_kafka.operate.services.maven import HBASE_VERSION

__all__ = ["HBaseServer", "hbase_classpath", "prepare_hbase", "JAVA17_FLAGS"]

# Log lines that dump the classpath or the environment: tens of kilobytes each, never useful in
# an error message.
_NOISE = ("java.class.path", "CLASSPATH", "java.library.path", "env:", "Client environment:",
          "Server environment:", "vmInputArguments")


def _filtered_tail(path: Path, lines: int = 30, width: int = 400) -> str:
    """Return the last ``lines`` useful lines of a log, without classpath or environment dumps."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no {path.name})"
    kept = [
        line if len(line) <= width else line[:width] + " […]"
        for line in text.splitlines()
        if line.strip() and not any(marker in line for marker in _NOISE)
    ]
    return "\n".join(kept[-lines:]) or f"({path.name} is empty)"


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class HBaseServer:
    """A standalone HBase 2.6 with a Thrift1 gateway on 127.0.0.1, for tests, benchmarks and users.

    Parameters
    ----------
    heap : str
        Maximum heap (``-Xmx``) of the HBase JVM, which holds ZooKeeper, the master, the region
        server and, when ``javac`` exists, the Thrift gateway. 256 MiB serves tests and
        benchmarks. The resident size hardly depends on it (about 210 MiB when ready, 290 MiB
        after 2000 puts, with 160 MiB or 256 MiB alike): classes, code and threads dominate.
    thrift_heap : str
        Heap of the separate gateway JVM, used only when the launcher cannot be compiled.
    data_dir : str or Path, optional
        Folder of the HBase root, the ZooKeeper data and the logs. A given folder is kept after
        :meth:`stop` (and stop then waits longer for a clean shutdown); by default a temporary
        folder is used and removed.
    site_config : mapping, optional
        Extra ``hbase-site.xml`` entries, applied last.
    version : str
        HBase release resolved from Maven Central.
    stop_grace : float, optional
        Seconds between SIGTERM and SIGKILL on :meth:`stop`. A clean HBase shutdown takes 6-12 s
        on two busy cores (25 s with HBase's default ZooKeeper retries), so the default is 2 s
        for a temporary folder (nothing to keep) and 60 s for a given ``data_dir``.

    Examples
    --------
    >>> with HBaseServer() as hbase:                           # doctest: +SKIP
    ...     conn = hbase.connection()
    ...     conn.create_table("t", {"cf": dict(max_versions=1)})
    ...     conn.table("t").put(b"row", {b"cf:q": b"v"})
    """

    host = "127.0.0.1"

    def __init__(self, heap: str = "256m", thrift_heap: str = "96m",
                 data_dir: str | Path | None = None, site_config: Mapping[str, Any] | None = None,
                 version: str = HBASE_VERSION, stop_grace: float | None = None) -> None:
        self.heap = heap
        self.thrift_heap = thrift_heap
        self.version = version
        self.extra_config = dict(site_config or {})
        self._keep_data = data_dir is not None
        self._root: Path | None = Path(data_dir).resolve() if data_dir is not None else None
        self.stop_grace = stop_grace if stop_grace is not None else (60.0 if self._keep_data else 2.0)
        self.thrift_port = 0
        self.zookeeper_port = 0
        self.master_port = 0
        self.regionserver_port = 0
        self._hbase: ManagedProcess | None = None
        self._thrift: ManagedProcess | None = None
        self._java: str | None = None
        self._started = False
        #: Seconds from launch to the first successful happybase round trip (set by start()).
        self.startup_seconds: float | None = None
        #: Seconds the last stop() took, kill and folder removal included.
        self.stop_seconds: float | None = None

    # ------------------------------------------------------------------ properties
    @property
    def data_dir(self) -> Path:
        """The folder of this server's data, configuration and logs."""
        if self._root is None:
            raise ServiceError("the HBase server has no data folder before start()")
        return self._root

    @property
    def conf_dir(self) -> Path:
        """The folder holding ``hbase-site.xml`` and ``log4j.properties``."""
        return self.data_dir / "conf"

    @property
    def log_path(self) -> Path:
        """HBase's log file (reload4j, INFO)."""
        return self.data_dir / "logs" / "hbase.log"

    @property
    def thrift_url(self) -> str:
        """``host:port`` of the Thrift1 gateway."""
        return f"{self.host}:{self.thrift_port}"

    @property
    def single_jvm(self) -> bool:
        """True when the gateway runs inside the HBase JVM (no separate gateway process)."""
        return self._hbase is not None and self._thrift is None

    def pids(self) -> list[int]:
        """Process ids of the running JVMs (HBase first, then a separate gateway if any)."""
        return [p.pid for p in (self._hbase, self._thrift)
                if p is not None and p.pid is not None and p.running()]

    def rss_bytes(self) -> int:
        """Resident memory of all of this server's JVMs, in bytes (0 when stopped)."""
        return sum(_rss_bytes(pid) for pid in self.pids())

    def running(self) -> bool:
        """True while every JVM of this server runs."""
        procs = [p for p in (self._hbase, self._thrift) if p is not None]
        return self._started and bool(procs) and all(p.running() for p in procs)

    def __enter__(self) -> "HBaseServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 120.0) -> "HBaseServer":
        """Resolve the jars if needed, write the configuration, start HBase and wait for Thrift.

        Parameters
        ----------
        timeout : float
            Overall deadline in seconds, from launch to the first successful happybase round
            trip; a probe call waits no longer than the time left (0.1 s at least). On a
            cold, busy 2-core machine the start takes 15-40 s (5 s warm on a quiet one).

        Returns
        -------
        HBaseServer
            ``self``, started.

        Raises
        ------
        MissingDependencyError
            Java 17, Maven (first run only) or happybase is missing.
        ServiceError
            HBase exited or did not answer in time; the message holds the filtered log tail.
        """
        if self._started:
            return self
        self._connection_module()  # fail before launching anything when happybase is missing
        require_executable("java", ["openjdk-17-jre-headless"], "to run HBase")
        self._java = require_java()
        jars = hbase_classpath(self.version)
        launcher = compiled_launcher()
        if self._root is None:
            self._root = Path(tempfile.mkdtemp(prefix="dstream-kafka-hbase-"))
        for sub in ("conf", "logs", "tmp", "zk"):
            (self._root / sub).mkdir(parents=True, exist_ok=True)
        self.zookeeper_port, self.master_port, self.regionserver_port, self.thrift_port = (
            self._choose_ports()
        )
        self._write_config()
        self._started = True
        atexit.register(self.stop)
        launched = time.monotonic()
        try:
            self._launch(jars, launcher)
            self._wait_ready(timeout, launched)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - launched
        return self

    def stop(self) -> None:
        """Stop the JVMs (SIGTERM, SIGKILL after ``stop_grace`` s) and remove a temporary folder."""
        if not self._started:
            return
        self._started = False
        began = time.monotonic()
        for proc in (self._thrift, self._hbase):
            if proc is not None:
                proc.stop(timeout=self.stop_grace)
        if not self._keep_data and self._root is not None:
            shutil.rmtree(self._root, ignore_errors=True)
        self.stop_seconds = time.monotonic() - began
        try:
            atexit.unregister(self.stop)
        except Exception:  # pragma: no cover - interpreter shutting down
            pass

    def kill(self) -> None:
        """SIGKILL every JVM at once, as a crash would; the folder is kept until :meth:`stop`."""
        for proc in (self._thrift, self._hbase):
            if proc is not None:
                proc.kill()

    # ------------------------------------------------------------------ clients
    @staticmethod
    def _connection_module() -> Any:
        try:
            import happybase
        except ImportError as exc:
            raise MissingDependencyError(
                "happybase is required for HBase; install it with `pip install dstream_kafka[hbase]`."
            ) from exc
        return happybase

    def connection(self, timeout_ms: int = 30000, **kwargs: Any) -> Any:
        """Return a new ``happybase.Connection`` to the Thrift gateway.

        Parameters
        ----------
        timeout_ms : int
            Socket timeout of every Thrift call, in milliseconds.
        **kwargs
            Other ``happybase.Connection`` arguments (``table_prefix``, ...). The transport and
            protocol must stay ``buffered``/``binary``: that is what the gateway serves.

        Returns
        -------
        happybase.Connection
            An open connection; close it when done.
        """
        happybase = self._connection_module()
        if not self.thrift_port:
            raise ServiceError("the HBase server is not started")
        return happybase.Connection(self.host, self.thrift_port, timeout=timeout_ms,
                                    transport="buffered", protocol="binary", **kwargs)

    # ------------------------------------------------------------------ internals
    def _choose_ports(self) -> tuple[int, int, int, int]:
        """Return free ZooKeeper, master, region server and Thrift ports.

        A kept data folder records its ports and gets the same ones again when they are still
        free, so clients configured with the Thrift address keep working across restarts.
        """
        record = self.data_dir / "ports.json"
        ports: list[int] = []
        if self._keep_data and record.is_file():
            try:
                ports = [int(p) for p in json.loads(record.read_text())][:4]
            except (OSError, ValueError, TypeError):
                ports = []
            ports = [p for p in ports if 0 < p < 65536 and not port_open(p)]
            if len(ports) != 4 or len(set(ports)) != 4:
                ports = []
        while len(ports) < 4:
            port = free_port()
            if port not in ports:
                ports.append(port)
        if self._keep_data:
            record.write_text(json.dumps(ports))
        return ports[0], ports[1], ports[2], ports[3]

    def _write_config(self) -> None:
        root = self.data_dir
        props = site_properties(root, self.host, self.zookeeper_port, self.master_port,
                                self.regionserver_port, self.thrift_port)
        props.update(self.extra_config)
        self.conf_dir.joinpath("hbase-site.xml").write_text(site_xml(props))
        self.conf_dir.joinpath("log4j.properties").write_text(log4j_properties(self.log_path))

    def _java_argv(self, heap: str, classpath: list[str], main: str, *args: str) -> list[str]:
        assert self._java is not None
        return java_argv(self._java, heap, classpath, main, *args, data_dir=self.data_dir,
                         conf_dir=self.conf_dir)

    def _thrift_args(self) -> list[str]:
        return ["-p", str(self.thrift_port), "-b", self.host, "--infoport", "-1", "start"]

    def _launch(self, jars: list[Path], launcher: Path | None) -> None:
        classpath = [str(self.conf_dir), *(str(j) for j in jars)]
        logs = self.data_dir / "logs"
        self._hbase = self._thrift = None  # a restart must not see the previous run's processes
        if launcher is not None:
            self._hbase = ManagedProcess(
                "HBase (standalone + Thrift)",
                self._java_argv(self.heap, [str(launcher), *classpath], LAUNCHER_CLASS,
                                *self._thrift_args()),
                logs / "hbase.out",
            )
            self._hbase.start()
            return
        self._hbase = ManagedProcess(
            "HBase (standalone)",
            self._java_argv(self.heap, classpath, "org.apache.hadoop.hbase.master.HMaster", "start"),
            logs / "hbase.out",
        )
        self._hbase.start()
        self._thrift = ManagedProcess(
            "HBase Thrift gateway",
            self._java_argv(self.thrift_heap, classpath, "org.apache.hadoop.hbase.thrift.ThriftServer",
                            *self._thrift_args()),
            logs / "thrift.out",
        )
        self._thrift.start()

    def _failure(self, headline: str) -> ServiceError:
        parts = [headline]
        for proc in (self._hbase, self._thrift):
            if proc is not None:
                parts.append(f"--- {proc.log_path.name}:\n{_filtered_tail(proc.log_path, lines=10)}")
        parts.append(f"--- {self.log_path.name}:\n{_filtered_tail(self.log_path)}")
        return ServiceError("\n".join(parts))

    def _probe(self, timeout_ms: int) -> str | None:
        """One real round trip through the gateway: list the tables, then read from hbase:meta.

        The gateway accepts connections before HBase is ready; listing tables needs the master,
        and a read of ``hbase:meta`` needs the region server to serve the meta region (before
        that it fails with "Cannot get the location ... in hbase:meta"). Returns None when both
        answered, else the error text. ``timeout_ms`` bounds each socket operation.
        """
        conn = None
        try:
            conn = self.connection(timeout_ms=timeout_ms)
            conn.tables()
            conn.table("hbase:meta").row(b"hbase:namespace")
            return None
        except Exception as exc:  # any Thrift, socket or HBase error means "not yet"
            return f"{type(exc).__name__}: {exc}"
        finally:
            if conn is not None:
                try:
                    conn.close()
                except Exception:
                    pass

    def _wait_ready(self, timeout: float, launched: float) -> None:
        deadline = launched + timeout
        last = "no answer yet"
        while True:
            for proc in (self._hbase, self._thrift):
                if proc is not None and not proc.running():
                    assert proc.proc is not None
                    raise self._failure(
                        f"{proc.name} exited with code {proc.proc.returncode} while starting "
                        f"(data in {self.data_dir})."
                    )
            # A probe must not outlive the deadline: the gateway accepts long before HBase
            # is ready, and a call waits there until it is.
            remaining = deadline - time.monotonic()
            problem = self._probe(timeout_ms=int(1000 * max(0.1, min(5.0, remaining))))
            if problem is None:
                return
            last = problem
            if time.monotonic() > deadline:
                raise self._failure(
                    f"HBase {self.version} did not answer on {self.thrift_url} within "
                    f"{timeout:.0f}s; last error: {last[:300]}"
                )
            time.sleep(0.5)
