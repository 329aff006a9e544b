"""A local Spark Connect server from PySpark's own jars, on a free 127.0.0.1 port.

``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer --master
local[2]``: PySpark's wheel ships ``jars/spark-connect_2.13-<version>.jar`` and ``bin/spark-submit``
(not ``sbin/start-connect-server.sh``, which only wraps this command). Its Python workers run this
interpreter with the checkout on ``PYTHONPATH``, so executors import the ``dstream_kafka`` under
test. Extra jars (Structured Streaming's Kafka connector, to compare with) go on its class path at
launch. Ready means a client session ran a job; :meth:`ConnectServer.stop` ends the server and
removes its folder.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from dstream_kafka.operate.services.environment import (
    LocalService,
    ManagedProcess,
    free_port,
    port_open,
    wait_until,
)
from dstream_kafka.spark_settings import LOW_OVERHEAD_SETTINGS
from tests.support.spark_cluster import spark_home

__all__ = ["ConnectServer", "connect_client_works"]

ROOT = Path(__file__).resolve().parents[2]
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def connect_client_works(url: str) -> bool:
    """Return True once a Connect session to ``url`` runs a job, in a child interpreter.

    A child: a Connect session in this process could switch PySpark's ``is_remote`` for the
    classic SparkContext the suite shares.
    """
    import subprocess

    code = ("from pyspark.sql import SparkSession\n"
            f"s = SparkSession.builder.remote({url!r}).getOrCreate()\n"
            "assert s.range(3).count() == 3\n")
    try:
        return subprocess.run([sys.executable, "-c", code], capture_output=True,
                              timeout=120).returncode == 0
    except subprocess.TimeoutExpired:
        return False


class ConnectServer(LocalService):
    """One Spark Connect server on ``local[cores]``; ``url`` is ``sc://127.0.0.1:<port>``.

    Parameters
    ----------
    jars : sequence of path, optional
        Put on the server's class path at launch (``--jars``).
    conf : mapping, optional
        More ``--conf`` settings.
    """

    def __init__(self, jars: Sequence[Path] = (), conf: dict[str, str] | None = None,
                 cores: int = 2) -> None:
        self.jars = [str(j) for j in jars]
        self.conf = dict(conf or {})
        self.cores = cores
        self.port = free_port()
        self.root: Path | None = None
        self._proc: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    def _argv(self) -> list[str]:
        settings = {**LOW_OVERHEAD_SETTINGS, "spark.pyspark.python": sys.executable,
                    "spark.connect.grpc.binding.port": str(self.port),
                    "spark.connect.grpc.binding.address": "127.0.0.1",
                    "spark.driver.memory": "768m", "spark.sql.session.timeZone": "UTC",
                    "spark.streaming.kafka.consumer.poll.ms": "10000", **self.conf}
        argv = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS,
                "--master", f"local[{self.cores}]", "--name", "dstream_kafka-connect-tests"]
        if self.jars:
            argv += ["--jars", ",".join(self.jars)]
        for key, value in settings.items():
            argv += ["--conf", f"{key}={value}"]
        return argv

    def _env(self) -> dict[str, str]:
        path = os.environ.get("PYTHONPATH")
        return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable, "SPARK_SCALA_VERSION": "2.13",
                # executors import the dstream_kafka under test, from the checkout
                "PYTHONPATH": os.pathsep.join([str(ROOT), *([path] if path else [])])}

    def start(self, timeout: float = 240.0) -> ConnectServer:
        """Start the server; return once a client session ran a job on it."""
        if self._proc is not None and self._proc.running():
            return self
        self.root = Path(tempfile.mkdtemp(prefix="dstream-kafka-connect-"))
        self._proc = ManagedProcess("Spark Connect server", self._argv(),
                                    self.root / "server.log", env=self._env(), cwd=self.root)
        try:
            self._proc.start()
            wait_until(lambda: port_open(self.port), timeout, "the Spark Connect server to listen",
                       interval=0.5, alive=self._proc.death_note)
            wait_until(lambda: connect_client_works(self.url), timeout,
                       "a Spark Connect session to run a job", interval=1.0,
                       alive=self._proc.death_note)
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, lines: int = 40) -> str:
        return self._proc.log_tail(lines) if self._proc is not None else ""

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.stop(timeout=30.0)
            self._proc = None
        root, self.root = self.root, None
        self._discard(root)

    def __repr__(self) -> str:
        return f"ConnectServer({self.url})"


def connect_env(server: Any) -> dict[str, str]:
    """The environment of a client program of ``server``: its URL in ``SPARK_REMOTE``."""
    return {**os.environ, "SPARK_REMOTE": server.url,
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
