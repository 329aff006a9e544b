"""A private ZooKeeper server from Debian's ``zookeeper`` package, run as the ``zookeeper`` user."""

from __future__ import annotations

import atexit
import os
import pwd
import shutil
import socket
import tempfile
from pathlib import Path

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.operate.services.environment import (
    LocalService,
    ManagedProcess,
    debian_install_hint,
    free_port,
    require_java,
    run_as,
    wait_until,
)

__all__ = ["ZooKeeperServer"]

_JAR = Path("/usr/share/java/zookeeper.jar")
_CONF = Path("/etc/zookeeper/conf")


def _ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"ruok")
            return sock.recv(8) == b"imok"
    except OSError:
        return False


class ZooKeeperServer(LocalService):
    """A standalone ZooKeeper on 127.0.0.1 with a free port and data in a temporary folder."""

    user = "zookeeper"

    def __init__(self) -> None:
        self.port = 0
        self._root: Path | None = None
        self._process: ManagedProcess | None = None

    @property
    def hosts(self) -> str:
        """The connection string for kazoo: ``127.0.0.1:<port>``."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> "ZooKeeperServer":
        """Write a config, start the server as its own user and wait for ``imok``."""
        if self._process is not None:
            return self
        java = require_java()
        if not _JAR.is_file():
            raise MissingDependencyError(
                "ZooKeeper is required for the ZooKeeper offset store tests but "
                f"{_JAR} was not found; install it with `{debian_install_hint('zookeeper')}`."
            )
        self._root = Path(tempfile.mkdtemp(prefix="dstream-kafka-zk-"))
        (self._root / "data").mkdir()
        self.port = free_port()
        (self._root / "zoo.cfg").write_text(
            "tickTime=500\n"
            f"dataDir={self._root / 'data'}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,stat,srvr\n"
            "minSessionTimeout=1000\n"
        )
        user = self.user if _user_exists(self.user) else None
        if os.geteuid() == 0 and user:
            for path in [self._root, *self._root.rglob("*")]:
                shutil.chown(path, user, user)
        argv = [java, "-Xmx256m", "-cp", f"{_CONF}:{_JAR}",
                f"-Dzookeeper.log.dir={self._root}",
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(self._root / "zoo.cfg")]
        if user:
            argv = run_as(user, argv)
        self._process = ManagedProcess("ZooKeeper", argv, self._root / "zookeeper.out")
        self._process.start()
        atexit.register(self.stop)
        wait_until(lambda: _ruok(self.port), timeout, "ZooKeeper to answer ruok",
                   alive=self._process.death_note)
        return self

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        if self._process is None:
            return
        self._process.stop(timeout=20)
        self._process = None
        self._discard(self._root)


def _user_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False
