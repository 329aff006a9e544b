"""Store URIs: one string names an offset store, for the command line and for scripts.

=========================================  ==================================================================
URI                                        store
=========================================  ==================================================================
``checkpoint:DIR``                         :class:`~dstream_kafka.stores.CheckpointOffsetStore` in ``DIR``
                                           (a local path or a Hadoop URI: ``checkpoint:hdfs://nn/app``)
``kafka://HOST:PORT[,HOST:PORT...]``       :class:`~dstream_kafka.stores.KafkaGroupOffsetStore`
``sqlite:///PATH``                         :class:`~dstream_kafka.stores.SqliteOffsetStore`; ``PATH`` is
                                           relative, ``sqlite:////abs/file.db`` absolute (as SQLAlchemy)
``postgresql://USER@HOST:PORT/DB``         :class:`~dstream_kafka.stores.PostgresOffsetStore`; the password
                                           comes from ``PGPASSWORD`` or ``~/.pgpass`` (libpq), never the URI
``zookeeper://HOST:PORT[/ROOT]``           :class:`~dstream_kafka.stores.ZooKeeperOffsetStore` (``ROOT`` is
                                           the chroot)
``hbase://HOST:PORT[/TABLE]``              :class:`~dstream_kafka.stores.HBaseOffsetStore` (Thrift1 gateway)
``structured-streaming:DIR``               a Structured Streaming query's checkpoint folder (local path),
                                           :class:`~dstream_kafka.stores.structured_streaming.StructuredStreamingCheckpoint`
=========================================  ==================================================================

Ports may be left out (Kafka 9092, PostgreSQL 5432, ZooKeeper 2181, HBase Thrift 9090). A bad
URI raises :class:`~dstream_kafka.errors.ConfigurationError` naming the part that is wrong and
the expected form; a PostgreSQL password is never repeated in a message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.stores.base import OffsetStore

__all__ = ["SCHEMES", "StoreURI", "open_store", "parse_store_uri"]

#: Every scheme, with the form a message shows.
SCHEMES: dict[str, str] = {
    "checkpoint": "checkpoint:DIR",
    "kafka": "kafka://HOST:PORT",
    "sqlite": "sqlite:///PATH",
    "postgresql": "postgresql://USER@HOST:PORT/DB",
    "zookeeper": "zookeeper://HOST:PORT/ROOT",
    "hbase": "hbase://HOST:PORT/TABLE",
    "structured-streaming": "structured-streaming:DIR",
}
_DEFAULT_PORTS = {"kafka": 9092, "postgresql": 5432, "zookeeper": 2181, "hbase": 9090}
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$")


@dataclass(frozen=True)
class StoreURI:
    """A parsed store URI (no password: a PostgreSQL one is refused).

    Attributes
    ----------
    scheme : str
        One of :data:`SCHEMES`.
    hosts : tuple of (str, int)
        ``(host, port)`` pairs; empty for ``checkpoint`` and ``sqlite``.
    path : str
        The directory (checkpoint), the file (sqlite), the database (postgresql), the chroot
        (zookeeper, ``""`` for none) or the table (hbase, ``""`` for the default).
    user : str
        The PostgreSQL user (``""`` elsewhere).
    """

    scheme: str
    hosts: tuple[tuple[str, int], ...] = ()
    path: str = ""
    user: str = ""

    def host_list(self) -> str:
        """Return the hosts as ``host:port,host:port``."""
        return ",".join(f"{h}:{p}" for h, p in self.hosts)

    def __str__(self) -> str:
        if self.scheme in ("checkpoint", "structured-streaming"):
            return f"{self.scheme}:{self.path}"
        if self.scheme == "sqlite":
            return f"sqlite:///{self.path}"
        user = f"{self.user}@" if self.user else ""
        tail = f"/{self.path}" if self.path else ""
        return f"{self.scheme}://{user}{self.host_list()}{tail}"


def _error(uri_form: str, what: str) -> ConfigurationError:
    return ConfigurationError(f"--store: {what}; expected {uri_form}")


def _hosts(scheme: str, netloc: str, *, many: bool) -> tuple[tuple[str, int], ...]:
    form = SCHEMES[scheme]
    if not netloc:
        raise _error(form, "the URI names no host")
    entries = netloc.split(",")
    if len(entries) > 1 and not many:
        raise _error(form, f"{scheme} takes one HOST:PORT, got {len(entries)}")
    out = []
    for entry in entries:
        m = re.fullmatch(r"(\[[^\]]*\]|[^:]*)(?::([^:]*))?", entry)
        host, port_text = (m.group(1), m.group(2)) if m else (entry, None)
        if not host or not _HOST.match(host):
            raise _error(form, f"{entry!r} is not HOST or HOST:PORT")
        if port_text is None:
            port = _DEFAULT_PORTS[scheme]
        elif port_text.isdigit() and 1 <= int(port_text) <= 65535:
            port = int(port_text)
        else:
            raise _error(form, f"the port of {entry!r} must be a number from 1 to 65535")
        out.append((host, port))
    return tuple(out)


def parse_store_uri(uri: str) -> StoreURI:
    """Parse a store URI (see the module table) without connecting to anything.

    Parameters
    ----------
    uri : str
        ``checkpoint:DIR``, ``kafka://HOST:PORT``, ``sqlite:///PATH``,
        ``postgresql://USER@HOST:PORT/DB``, ``zookeeper://HOST:PORT/ROOT``,
        ``hbase://HOST:PORT/TABLE`` or ``structured-streaming:DIR``.

    Returns
    -------
    StoreURI

    Raises
    ------
    ConfigurationError
        Naming ``--store``, what is wrong and the expected form. A PostgreSQL password in the
        URI is refused without being repeated.
    """
    if not isinstance(uri, str) or not uri.strip():
        raise ConfigurationError("--store: the store URI is empty; expected one of "
                                 + ", ".join(SCHEMES.values()))
    scheme, sep, rest = uri.partition(":")
    scheme = scheme.lower()
    if not sep or scheme not in SCHEMES:
        shown = scheme if sep and len(scheme) < 40 and scheme.isprintable() else "(none)"
        raise ConfigurationError(
            f"--store: unknown store scheme {shown!r}; use one of " + ", ".join(SCHEMES.values()))
    form = SCHEMES[scheme]
    if scheme in ("checkpoint", "structured-streaming"):
        if not rest.strip():
            raise _error(form, "the checkpoint directory is empty")
        return StoreURI(scheme, path=rest)
    if not rest.startswith("//"):
        raise _error(form, f"{scheme}: must be followed by //")
    if scheme == "postgresql":
        # Split by hand so a password is never parsed into a message.
        body = rest[2:]
        netloc, _, dbpart = body.partition("/")
        userinfo, at, hostpart = netloc.rpartition("@")
        if not at:
            hostpart, userinfo = netloc, ""
        if ":" in userinfo:
            raise ConfigurationError(
                "--store: a postgresql:// URI must not contain a password; put it in PGPASSWORD "
                "or ~/.pgpass and use postgresql://USER@HOST:PORT/DB")
        if "?" in dbpart or "#" in dbpart:
            raise _error(form, "query strings and fragments are not supported")
        user, db = unquote(userinfo), unquote(dbpart)
        if not user:
            raise _error(form, "the URI names no USER")
        if not db or "/" in db:
            raise _error(form, "the URI names no DB (or more than one path part)")
        return StoreURI(scheme, _hosts(scheme, hostpart, many=False), db, user)
    parts = urlsplit(uri)
    if parts.query or parts.fragment:
        raise _error(form, "query strings and fragments are not supported")
    netloc, path = parts.netloc, unquote(parts.path)
    if "@" in netloc:
        raise _error(form, f"{scheme} URIs take no user")
    if scheme == "sqlite":
        if netloc:
            raise _error(form, "sqlite URIs have no host: use three slashes, sqlite:///file.db")
        if len(path) < 2:
            raise _error(form, "the SQLite file path is empty")
        return StoreURI(scheme, path=path[1:])
    hosts = _hosts(scheme, netloc, many=scheme in ("kafka", "zookeeper"))
    path = path.strip("/")
    if scheme == "kafka" and path:
        raise _error(form, "kafka URIs have no path")
    if scheme == "hbase" and "/" in path:
        raise _error(form, f"{path!r} is not one HBase table name")
    return StoreURI(scheme, hosts, path)


def open_store(uri: str, *, timeout: float = 10.0, spark_context: Any = None,
               create_table: bool = False, create: bool = True) -> OffsetStore:
    """Return the offset store a URI names (see the module table).

    Parameters
    ----------
    uri : str
        A store URI.
    timeout : float
        Seconds the store waits for its service (connect, lock, request), so an unreachable
        store fails quickly.
    spark_context : SparkContext, optional
        For a checkpoint directory on a Hadoop URI.
    create_table : bool
        Let the HBase store create its table (False: a missing table is an error, so a typo
        in the URI creates nothing).
    create : bool
        False opens the store for reading: it must exist, and nothing is created (no folder,
        file, table or node). A missing checkpoint directory (or one without ``commits/``),
        SQLite file, SQL offsets table, ZooKeeper chroot or HBase table raises
        :class:`~dstream_kafka.errors.ConfigurationError` ("No such offset store: ...")
        on first use. The Kafka group store and a Structured Streaming checkpoint never create
        anything when read.

    Returns
    -------
    OffsetStore
        Not connected yet: stores connect on first use.

    Raises
    ------
    ConfigurationError
        On a malformed URI (see :func:`parse_store_uri`).
    """
    parsed = parse_store_uri(uri)
    from dstream_kafka.stores import OffsetStores

    if parsed.scheme == "checkpoint":
        return OffsetStores.checkpoint(parsed.path, spark_context=spark_context, create=create)
    if parsed.scheme == "structured-streaming":
        from dstream_kafka.stores.structured_streaming import StructuredStreamingCheckpoint

        return StructuredStreamingCheckpoint(parsed.path)
    if parsed.scheme == "sqlite":
        return OffsetStores.sqlite(parsed.path, timeout=timeout, create=create)
    if parsed.scheme == "kafka":
        ms = int(timeout * 1000)
        return OffsetStores.kafka({"bootstrap.servers": parsed.host_list(), "request.timeout.ms": ms,
                                   "bootstrap.timeout.ms": ms},
                                  timeout_ms=ms)
    if parsed.scheme == "postgresql":
        (host, port), = parsed.hosts
        return OffsetStores.postgres(None, host=host.strip("[]"), port=port, user=parsed.user,
                                     dbname=parsed.path, timeout=timeout, create=create)
    if parsed.scheme == "zookeeper":
        chroot = f"/{parsed.path}" if parsed.path else ""
        return OffsetStores.zookeeper(parsed.host_list() + chroot, timeout=timeout, create=create)
    (host, port), = parsed.hosts
    kwargs: dict[str, Any] = {"table": parsed.path} if parsed.path else {}
    return OffsetStores.hbase(host.strip("[]"), port, timeout=timeout, create_table=create_table and create,
                              **kwargs)
