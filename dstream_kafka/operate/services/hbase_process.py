"""``dstream-kafka hbase start|stop|status``: one HBase server started from the command line.

Like ``dstream-kafka broker start|stop|status`` (one per machine user): ``start`` runs in the
foreground, prints the Thrift gateway's ``host:port`` on its first line and records its pid, the
gateway address and the JVM pids in ``<run dir>/hbase.json``; ``stop`` signals that process,
which stops HBase (and removes its temporary folder); a second ``start`` while one runs is
refused. The life cycle is :class:`~dstream_kafka.operate.services.foreground.CommandLineService`'s; the
argument parsing lives in :mod:`dstream_kafka.cli`.
"""

from __future__ import annotations

import signal
import sys
from typing import Any, TextIO

from dstream_kafka.operate.services.foreground import CommandLineService
from dstream_kafka.operate.services.hbase import HBaseServer

__all__ = ["HBASE", "read_hbase_state", "start_hbase_foreground", "stop_hbase", "hbase_status"]

#: The command-line HBase's record: ``<run dir>/hbase.json``. Orphaned JVMs get SIGKILL: a
#: clean HBase shutdown waits on its (gone) ZooKeeper for many seconds.
HBASE = CommandLineService(name="hbase", noun="HBase", article="an", address_key="thrift",
                           address_label="Thrift gateway", child_pids_key="jvm_pids",
                           orphan_signal=signal.SIGKILL, temporary_prefix="dstream-kafka-hbase-")


def read_hbase_state() -> dict[str, Any] | None:
    """Return the record of the running command-line HBase, cleaning up after a killed one.

    Returns
    -------
    dict or None
        ``pid``, ``thrift`` (``host:port``), ``zookeeper_port``, ``data_dir``, ``jvm_pids``,
        ``temporary`` and ``started_at``; None when no command-line HBase runs.
    """
    return HBASE.read_state()


def start_hbase_foreground(data_dir: str | None = None, heap: str = "256m",
                           out: TextIO = sys.stdout) -> int:
    """Start HBase, print the gateway address and block until SIGINT/SIGTERM or ``stop``.

    Parameters
    ----------
    data_dir : str, optional
        Keep HBase's data in this folder (reused by a later start); a temporary folder otherwise.
    heap : str
        Heap of the HBase JVM.
    out : text stream
        Where the address and messages go.

    Returns
    -------
    int
        0 after a requested stop, 1 when the JVM exited on its own.

    Raises
    ------
    ServiceAlreadyRunningError
        A command-line HBase already runs.
    """
    HBASE.refuse_second_start()  # before the server object picks ports and folders
    server = HBaseServer(heap=heap, data_dir=data_dir)

    def start() -> dict[str, Any]:
        server.start()
        return {"thrift": server.thrift_url, "zookeeper_port": server.zookeeper_port,
                "data_dir": str(server.data_dir), "jvm_pids": server.pids(),
                "temporary": data_dir is None}

    def banner() -> str:
        return (f"HBase {server.version} is running in standalone mode; Thrift1 gateway "
                f"(happybase, buffered transport, binary protocol) on {server.thrift_url}, "
                f"ZooKeeper on 127.0.0.1:{server.zookeeper_port}; data in {server.data_dir} "
                f"({'kept' if data_dir else 'removed on stop'}).\n"
                "Stop it with Ctrl-C or `dstream-kafka hbase stop`.\n")

    def died() -> str | None:
        return None if server.running() else "HBase exited on its own; stopping.\n"

    return HBASE.serve(start, banner, died, server.stop, out)


def stop_hbase(timeout: float = 90.0, out: TextIO = sys.stdout) -> int:
    """Stop the HBase started by ``dstream-kafka hbase start``; returns an exit code."""
    return HBASE.stop(timeout, out)


def hbase_status(out: TextIO = sys.stdout) -> int:
    """Print the gateway address of the command-line HBase; exit code 1 when none runs."""
    return HBASE.status(out)
