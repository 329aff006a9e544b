"""``dstream-kafka hbase start|stop|status``: one HBase server started from the command line.

Mirrors ``dstream-kafka broker start|stop|status`` (one per machine user): ``start`` runs in the foreground, prints the
Thrift gateway's ``host:port`` on its first line and records its pid, the gateway address and
the JVM pids in ``<run dir>/hbase.json``; ``stop`` signals that process, which stops HBase (and
removes its temporary folder); a second ``start`` while one runs is refused. The argument
parsing lives in :mod:`dstream_kafka.cli`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

from dstream_kafka.errors import ServiceAlreadyRunningError
from dstream_kafka.services.environment import cache_dir
from dstream_kafka.services.hbase import HBaseServer

__all__ = ["read_hbase_state", "start_hbase_foreground", "stop_hbase", "hbase_status"]


def _state_path() -> Path:
    folder = Path(os.environ.get("DSTREAM_KAFKA_RUN_DIR") or cache_dir() / "run")
    folder.mkdir(parents=True, exist_ok=True)
    return folder / "hbase.json"


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie still answers kill(0)
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def read_hbase_state() -> dict[str, Any] | None:
    """Return the record of the running command-line HBase, cleaning up after a killed one.

    Returns
    -------
    dict or None
        ``pid``, ``thrift`` (``host:port``), ``zookeeper_port``, ``data_dir``, ``jvm_pids`` and
        ``started_at``; None when no command-line HBase runs.
    """
    path = _state_path()
    if not path.is_file():
        return None
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        path.unlink(missing_ok=True)
        return None
    if _alive(state.get("pid")):
        return state
    # The foreground process died without cleaning up (SIGKILL): kill its orphaned JVMs.
    for pid in state.get("jvm_pids", []):
        if _alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    folder = state.get("data_dir")
    if state.get("temporary") and folder and Path(folder).name.startswith("dstream-kafka-hbase-"):
        shutil.rmtree(folder, ignore_errors=True)
    path.unlink(missing_ok=True)
    return None


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
    state = read_hbase_state()
    if state is not None:
        raise ServiceAlreadyRunningError(
            f"an HBase started by `dstream-kafka hbase start` is already running "
            f"(pid {state['pid']}, Thrift gateway {state['thrift']}); "
            "use it, or stop it first with `dstream-kafka hbase stop`."
        )
    server = HBaseServer(heap=heap, data_dir=data_dir)
    stop_event = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop_event.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        record = {
            "pid": os.getpid(),
            "thrift": server.thrift_url,
            "zookeeper_port": server.zookeeper_port,
            "data_dir": str(server.data_dir),
            "jvm_pids": server.pids(),
            "temporary": data_dir is None,
            "started_at": time.time(),
        }
        tmp = _state_path().with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2))
        os.replace(tmp, _state_path())
        out.write(f"{server.thrift_url}\n")
        out.write(
            f"HBase {server.version} is running in standalone mode; Thrift1 gateway (happybase, "
            f"buffered transport, binary protocol) on {server.thrift_url}, ZooKeeper on "
            f"127.0.0.1:{server.zookeeper_port}; data in {server.data_dir} "
            f"({'kept' if data_dir else 'removed on stop'}).\n"
            "Stop it with Ctrl-C or `dstream-kafka hbase stop`.\n"
        )
        out.flush()
        while not stop_event.wait(1.0):
            if not server.running():
                out.write("HBase exited on its own; stopping.\n")
                return 1
        return 0
    finally:
        server.stop()
        _state_path().unlink(missing_ok=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        out.write("HBase stopped.\n")
        out.flush()


def stop_hbase(timeout: float = 90.0, out: TextIO = sys.stdout) -> int:
    """Stop the HBase started by ``dstream-kafka hbase start``; returns an exit code."""
    state = read_hbase_state()
    if state is None:
        out.write("No HBase started by `dstream-kafka hbase start` is running.\n")
        return 0
    pid = state["pid"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(pid):
        out.write(f"The HBase process {pid} did not stop within {timeout:.0f}s.\n")
        return 1
    read_hbase_state()  # removes the record and kills orphaned JVMs if the process could not
    out.write(f"Stopped HBase at {state['thrift']}.\n")
    return 0


def hbase_status(out: TextIO = sys.stdout) -> int:
    """Print the gateway address of the command-line HBase; exit code 1 when none runs."""
    state = read_hbase_state()
    if state is None:
        out.write("No HBase started by `dstream-kafka hbase start` is running.\n")
        return 1
    out.write(f"{state['thrift']}\n")
    return 0
