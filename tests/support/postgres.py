"""A private PostgreSQL server from Debian's packages, run as the ``postgres`` user on 127.0.0.1."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services.environment import LocalService, debian_install_hint, free_port, run_as

__all__ = ["PostgresServer", "postgres_bin_dir"]


def postgres_bin_dir(root: Path = Path("/usr/lib/postgresql")) -> Path:
    """Return Debian's server binary folder of the newest installed PostgreSQL under ``root``."""
    versions = sorted(
        (p for p in root.glob("*") if (p / "bin" / "initdb").is_file()),
        key=lambda p: int(p.name) if p.name.isdigit() else 0,
    ) if root.is_dir() else []
    if not versions:
        raise MissingDependencyError(
            "the PostgreSQL server is required for the PostgreSQL offset store tests but "
            f"initdb was not found under {root}; install it with "
            f"`{debian_install_hint('postgresql')}`."
        )
    return versions[-1] / "bin"


class PostgresServer(LocalService):
    """A throwaway PostgreSQL cluster (initdb, pg_ctl start, createdb) with a clean stop.

    Parameters
    ----------
    dbname : str
        Database created on start.
    password : str, optional
        When given, TCP logins need it (scram-sha-256); otherwise TCP logins are trusted.
        The password is written only to a 0600 file that initdb reads and that is then removed.
    """

    user = "postgres"

    def __init__(self, dbname: str = "dstream", password: str | None = None) -> None:
        self.dbname = dbname
        self._password = password
        self.port = 0
        self._root: Path | None = None
        self._bin: Path | None = None
        self._started = False

    @property
    def data_dir(self) -> Path:
        assert self._root is not None
        return self._root / "data"

    def dsn_params(self) -> dict[str, Any]:
        """Keyword arguments for ``psycopg2.connect`` (includes the password when set)."""
        params: dict[str, Any] = {"host": "127.0.0.1", "port": self.port, "user": self.user,
                                  "dbname": self.dbname}
        if self._password is not None:
            params["password"] = self._password
        return params

    @property
    def dsn(self) -> str:
        """A libpq connection string without the password (safe to print)."""
        return f"host=127.0.0.1 port={self.port} user={self.user} dbname={self.dbname}"

    def _pg(self, tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        assert self._bin is not None
        proc = subprocess.run(run_as(self.user, [str(self._bin / tool), *args]),
                              capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise ServiceError(f"PostgreSQL {tool} failed (exit {proc.returncode}): "
                               f"{(proc.stderr or proc.stdout)[-2000:]}")
        return proc

    def start(self) -> "PostgresServer":
        """Create the cluster in a temporary folder, start it on a free port, create the database."""
        if self._started:
            return self
        self._bin = postgres_bin_dir()
        self._root = Path(tempfile.mkdtemp(prefix="dstream-kafka-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self._root, self.user, self.user)
        os.chmod(self._root, 0o700)
        init_args = ["-D", str(self.data_dir), "-U", self.user, "-E", "UTF8",
                     "--locale=C.UTF-8", "-N"]
        pwfile = None
        if self._password is not None:
            pwfile = self._root / "pw"
            pwfile.write_text(self._password + "\n")
            os.chmod(pwfile, 0o600)
            if os.geteuid() == 0:
                shutil.chown(pwfile, self.user, self.user)
            init_args += ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={pwfile}"]
        else:
            init_args += ["--auth=trust"]
        try:
            self._pg("initdb", *init_args)
        finally:
            if pwfile is not None:
                pwfile.unlink(missing_ok=True)
        self.port = free_port()
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self._root} -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100")
        self._pg("pg_ctl", "-D", str(self.data_dir), "-l", str(self._root / "server.log"),
                 "-o", opts, "-w", "-t", "60", "start")
        self._started = True
        atexit.register(self.stop)
        self._pg("createdb", "-h", str(self._root), "-p", str(self.port), "-U", self.user, self.dbname)
        return self

    def connect(self, **overrides: Any) -> Any:
        """Return a new psycopg2 connection to the database."""
        try:
            import psycopg2
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise MissingDependencyError(
                "psycopg2 is required; install it with `pip install dstream_kafka[postgres]`."
            ) from exc
        return psycopg2.connect(**{**self.dsn_params(), **overrides})

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its folder."""
        if not self._started:
            return
        self._started = False
        self._pg("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "60", "stop", check=False)
        self._discard(self._root)
