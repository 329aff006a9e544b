"""A Spark standalone cluster on loopback: one master and N workers, from PySpark's own jars.

Used where ``local[N]`` cannot show the behaviour: placement across executors (each executor is
its own JVM with its own Python workers and consumer cache) and executor failures. Every
process listens on 127.0.0.1 only; work and log folders live in one temporary folder that
:meth:`SparkStandaloneCluster.stop` removes.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any, Mapping, Sequence

from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.environment import (
    LocalService,
    ManagedProcess,
    free_port,
    port_open,
    require_java,
    wait_until,
)

__all__ = ["SparkStandaloneCluster", "spark_home", "wait_for_executors"]


def spark_home() -> Path:
    """The installed PySpark folder, which holds Spark's ``jars/`` (a usable ``SPARK_HOME``)."""
    import pyspark

    home = Path(pyspark.__file__).resolve().parent
    if not (home / "jars").is_dir():
        raise ServiceError(f"PySpark at {home} has no jars/ folder; reinstall pyspark")
    return home


def wait_for_executors(sc: Any, wanted: int, timeout: float = 120.0) -> list[str]:
    """Wait until ``sc`` has ``wanted`` executors; return their ids.

    A standalone application gets its executors a moment after the SparkContext starts, and
    placement hashes over the executors present, so jobs that test or measure placement wait.

    Raises
    ------
    ServiceError
        If they are not all registered within ``timeout`` seconds, or the master removed the
        application (its executors failed to start: see the workers' logs).
    """
    from dstream_kafka._spark_internals import context_stopped
    from dstream_kafka.read.placement import executor_locations

    deadline = time.monotonic() + timeout
    while True:
        found = [e.executorId for e in executor_locations(sc)]
        if len(found) >= wanted:
            return found
        if time.monotonic() > deadline or context_stopped(sc):
            raise ServiceError(f"only executors {found} of {wanted} registered; see the Spark "
                               "workers' logs")
        time.sleep(0.2)


class SparkStandaloneCluster(LocalService):
    """A standalone master with ``workers`` workers of ``cores`` cores each.

    Parameters
    ----------
    workers : int
        Worker processes; each launches one executor JVM per application.
    cores : int
        Cores each worker offers (1 gives every executor exactly one task slot, hence one
        Python worker process and one consumer cache).
    memory : str
        Memory each worker offers (the executors ask for ``spark.executor.memory``).
    env : mapping, optional
        Extra environment of the workers, which their executors and Python workers inherit
        (e.g. ``PYTHONPATH`` for modules the tasks' functions come from).
    worker_hosts : sequence of str
        Loopback addresses the workers bind, worker ``i`` on ``worker_hosts[i % len]``
        (``127.0.0.1`` by default); its executors report that host to the driver.

    Examples
    --------
    >>> with SparkStandaloneCluster(workers=2) as cluster:          # doctest: +SKIP
    ...     conf = local_spark_conf(cluster.master_url)
    """

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g",
                 env: Mapping[str, str] | None = None,
                 worker_hosts: Sequence[str] = ("127.0.0.1",)) -> None:
        if workers < 1 or cores < 1:
            raise ServiceError(f"a cluster needs workers >= 1 and cores >= 1, got {workers}, {cores}")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.extra_env = dict(env or {})
        # loopback addresses (127.x.x.x), worker i on worker_hosts[i % len]: its executors
        # report that host, so host-based placement (PreferBrokers) has hosts to choose from
        self.worker_hosts = tuple(worker_hosts) or ("127.0.0.1",)
        self.root = Path(tempfile.mkdtemp(prefix="dstream-kafka-spark-"))
        self.port = free_port()
        self.ui_port = free_port()
        self._master: ManagedProcess | None = None
        self._workers: list[ManagedProcess] = []

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _env(self, host: str = "127.0.0.1") -> dict[str, str]:
        env = dict(os.environ)
        env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": host,
            "SPARK_LOCAL_HOSTNAME": host,
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_NO_DAEMONIZE": "1",
            # Spark's launcher builds the executor command from SPARK_HOME/jars; without a
            # RELEASE file it wants the Scala version named or a source build's folders.
            "SPARK_SCALA_VERSION": "2.13",
        })
        env.update(self.extra_env)
        return env

    def _java(self, main: str, *args: str) -> list[str]:
        return [require_java(), "-Xmx256m", "-cp", str(spark_home() / "jars" / "*"), main, *args]

    def start(self, timeout: float = 120.0) -> SparkStandaloneCluster:
        """Start the master, then the workers; return once every worker is registered."""
        try:
            self._master = ManagedProcess(
                "Spark master",
                self._java("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(self.port), "--webui-port", str(self.ui_port)),
                self.root / "master.log", env=self._env(), cwd=self.root)
            self._master.start()
            wait_until(lambda: port_open(self.port), timeout, "the Spark master to listen",
                       alive=self._master.death_note)
            for _ in range(self.workers):
                self.add_worker()
            wait_until(lambda: self.alive_workers() >= self.workers, timeout,
                       f"{self.workers} Spark worker(s) to register", interval=0.5,
                       alive=self._death_note)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self) -> int:
        """Start one more worker; return its index (for :meth:`kill_worker`)."""
        index = len(self._workers)
        host = self.worker_hosts[index % len(self.worker_hosts)]
        work = self.root / f"worker-{index}"
        work.mkdir(parents=True, exist_ok=True)
        proc = ManagedProcess(
            f"Spark worker {index}",
            self._java("org.apache.spark.deploy.worker.Worker", "--host", host,
                       "--webui-port", str(free_port()), "--cores", str(self.cores),
                       "--memory", self.memory, "--work-dir", str(work), self.master_url),
            self.root / f"worker-{index}.log", env=self._env(host), cwd=work)
        proc.start()
        self._workers.append(proc)
        return index

    @property
    def master_pid(self) -> int | None:
        """Process id of the master (None before :meth:`start`)."""
        return self._master.pid if self._master is not None else None

    @property
    def worker_pids(self) -> list[int | None]:
        """Process id of each worker (its process group also holds its executors)."""
        return [w.pid for w in self._workers]

    def kill_worker(self, index: int) -> None:
        """Kill worker ``index`` and its executors at once (SIGKILL to the process group)."""
        self._workers[index].kill()

    def _death_note(self) -> str | None:
        for proc in [self._master, *self._workers]:
            if proc is not None:
                note = proc.death_note()
                if note:
                    return note
        return None

    def state(self) -> dict[str, Any]:
        """The master's JSON status (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as rsp:
            return json.loads(rsp.read().decode())

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):  # not up yet, or (a loaded master) an empty or cut body
            return 0

    def stop(self) -> None:
        """Stop the workers (and their executors), then the master; remove the folder."""
        for proc in reversed(self._workers):
            proc.stop(timeout=10)
        if self._master is not None:
            self._master.stop(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)
