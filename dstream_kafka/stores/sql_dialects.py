"""What differs between the SQL offset stores: SQLite (sqlite3) and PostgreSQL (psycopg2).

A dialect connects, begins transactions, names column types, converts the store's ``?``
placeholders and turns driver errors into :class:`~dstream_kafka.errors.OffsetStoreError`
without echoing secrets: the PostgreSQL dialect removes the password (and any other secret
connection parameter) from every message it wraps, and its ``repr`` never shows them.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

from dstream_kafka.errors import ConfigurationError, MissingDependencyError, OffsetStoreError

__all__ = ["Dialect", "PostgresDialect", "SqliteDialect", "quote_identifier", "validate_prefix"]

_PREFIX = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")
_SECRET_KEYS = ("password", "sslpassword", "sslkey", "passfile")


def validate_prefix(prefix: str, what: str = "table_prefix") -> str:
    """Return ``prefix`` if it is a safe identifier part (letters, digits, ``_``, at most 41)."""
    if not isinstance(prefix, str) or not (prefix == "" or _PREFIX.fullmatch(prefix)):
        raise ConfigurationError(
            f"{what} must be letters, digits and underscores, starting with a letter or underscore, "
            f"at most 41 characters (e.g. 'dstream_kafka_'), got {prefix!r}")
    return prefix


def quote_identifier(name: str) -> str:
    """Quote an SQL identifier (standard double quotes, embedded quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


class Dialect:
    """Base of the dialects; one instance per store."""

    name = "sql"
    paramstyle = "qmark"
    text = "TEXT"
    bigint = "BIGINT"
    timestamp = "TEXT"
    id_column = "INTEGER PRIMARY KEY AUTOINCREMENT"
    now = "CURRENT_TIMESTAMP"
    for_update = ""
    errors: tuple[type[BaseException], ...] = ()
    integrity_errors: tuple[type[BaseException], ...] = ()
    connection_errors: tuple[type[BaseException], ...] = ()

    def connect(self) -> Any:
        raise NotImplementedError

    def begin(self, conn: Any, write: bool) -> None:
        """Start a transaction (a write transaction takes its locks up front where it can)."""

    def sql(self, statement: str) -> str:
        """Convert the store's ``?`` placeholders to the driver's style."""
        return statement

    def scrub(self, text: str) -> str:
        """Return ``text`` without secrets."""
        return text

    def wrap(self, what: str, exc: BaseException) -> OffsetStoreError:
        """Return an OffsetStoreError for a driver error, without secrets."""
        message = self.scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else "")
        return OffsetStoreError(f"{self.describe()}: {what} failed: {type(exc).__name__}: {message}")

    def to_datetime(self, value: Any) -> _dt.datetime:
        if isinstance(value, _dt.datetime):
            return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
        return _dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))

    def describe(self) -> str:
        raise NotImplementedError


class SqliteDialect(Dialect):
    """sqlite3 in WAL mode; a write transaction is ``BEGIN IMMEDIATE`` (takes the write lock)."""

    name = "sqlite"
    now = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

    def __init__(self, path: str | os.PathLike[str], timeout: float = 30.0, *, create: bool = True) -> None:
        import sqlite3

        self.path = os.fspath(path)
        self.timeout = timeout
        self.create = create  # False: the file must exist; nothing is created or converted
        self.errors = (sqlite3.Error,)
        self.integrity_errors = (sqlite3.IntegrityError,)
        self.connection_errors = ()

    def connect(self) -> Any:
        import sqlite3

        target, uri = self.path, False
        if not self.create:
            if not os.path.isfile(self.path):
                raise ConfigurationError(
                    f"No such offset store: the SQLite file {os.path.abspath(self.path)} does not exist. Check the "
                    "path in the store URI (a stream creates its store when it first starts); nothing was created.")
            # mode=rw: never create the file, even if it disappears after the check.
            target, uri = "file:" + urllib.parse.quote(os.path.abspath(self.path)) + "?mode=rw", True
        elif self.path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        try:
            # isolation_level=None: the store issues BEGIN/COMMIT itself.
            conn = sqlite3.connect(target, timeout=self.timeout, isolation_level=None,
                                   check_same_thread=False, uri=uri)
            if self.create:  # a store's file is in WAL mode already; switching another file is a write
                conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise self.wrap("connecting", exc) from None
        return conn

    def begin(self, conn: Any, write: bool) -> None:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")

    def describe(self) -> str:
        return f"SQLite offset store {self.path}"


class PostgresDialect(Dialect):
    """psycopg2; rows of the group are locked with ``SELECT ... FOR UPDATE`` before a commit.

    Parameters
    ----------
    dsn : str, optional
        A libpq connection string or ``postgresql://`` URI (may contain a password).
    params : dict
        ``psycopg2.connect`` keyword arguments (may contain ``password``); they override ``dsn``.
    timeout : float
        Seconds to connect (libpq ``connect_timeout``, unless the DSN or ``params`` set it) and
        to wait for a lock (``lock_timeout`` of the session).
    """

    name = "postgres"
    paramstyle = "pyformat"
    timestamp = "TIMESTAMPTZ"
    id_column = "BIGSERIAL PRIMARY KEY"
    now = "now()"
    for_update = " FOR UPDATE"

    def __init__(self, dsn: str | None = None, params: Mapping[str, Any] | None = None,
                 timeout: float = 30.0) -> None:
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
            raise ConfigurationError(
                f"PostgreSQL store timeout must be a positive number of seconds, got {timeout!r}: "
                "pass e.g. OffsetStores.postgres(dsn, timeout=30.0)")
        self.timeout = float(timeout)
        try:
            import psycopg2
            import psycopg2.extensions
        except ImportError:
            raise MissingDependencyError(
                "The PostgreSQL offset store needs psycopg2: install dstream_kafka[postgres] "
                "(pip install 'dstream_kafka[postgres]')") from None
        merged: dict[str, Any] = {}
        if dsn:
            try:
                merged.update(psycopg2.extensions.parse_dsn(dsn))
            except Exception:
                raise ConfigurationError(
                    "Invalid PostgreSQL DSN (its text is not shown because it may contain a password); "
                    "use 'host=... port=... dbname=... user=...' or postgresql://user@host:port/dbname, "
                    "or pass keyword arguments") from None
        merged.update({k: v for k, v in (params or {}).items() if v is not None})
        merged.setdefault("connect_timeout", max(1, math.ceil(self.timeout)))  # libpq: whole seconds
        self._params = merged
        self._secrets = [str(merged[k]) for k in _SECRET_KEYS if merged.get(k)]
        self.errors = (psycopg2.Error,)
        self.integrity_errors = (psycopg2.IntegrityError,)
        self.connection_errors = (psycopg2.OperationalError, psycopg2.InterfaceError)

    def connect(self) -> Any:
        import psycopg2

        try:
            conn = psycopg2.connect(**self._params)
        except psycopg2.Error as exc:
            raise self.wrap("connecting", exc) from None
        except Exception as exc:  # e.g. a wrong keyword argument; psycopg2 may echo the DSN
            raise OffsetStoreError(f"{self.describe()}: connecting failed: {type(exc).__name__}: "
                                   f"{self.scrub(str(exc))}") from None
        conn.autocommit = False
        try:
            # A lock held by another session (a second driver, a migration) would otherwise
            # block a store call forever; SET is transactional, hence the commit.
            with conn.cursor() as cur:
                cur.execute(f"SET lock_timeout = '{int(self.timeout * 1000)}ms'")
            conn.commit()
        except psycopg2.Error as exc:
            conn.close()
            raise self.wrap("setting lock_timeout", exc) from None
        return conn

    def wrap(self, what: str, exc: BaseException) -> OffsetStoreError:
        error = super().wrap(what, exc)
        if "lock timeout" in str(exc):
            error.args = (f"{error.args[0]} (another session held a lock on the offset tables for longer "
                          f"than the store's timeout of {self.timeout:g} s; nothing was written: "
                          "OffsetStores.postgres(dsn, timeout=...) sets the bound)",)
        return error

    def sql(self, statement: str) -> str:
        return statement.replace("%", "%%").replace("?", "%s")

    def scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text

    def describe(self) -> str:
        p = self._params
        return (f"PostgreSQL offset store (host={p.get('host', '')}, port={p.get('port', '')}, "
                f"dbname={p.get('dbname', p.get('database', ''))}, user={p.get('user', '')})")
