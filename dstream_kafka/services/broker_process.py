"""The ``dstream-kafka broker start|stop|status`` commands: one CLI-started cluster per machine user.

``start`` runs in the foreground and records its pid, the bootstrap servers and the broker pids
in ``<run dir>/broker.json``; ``stop`` signals that process, which stops the brokers cleanly.
A second ``start`` while the first runs is refused with a message saying how to stop it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

from dstream_kafka.errors import ServiceAlreadyRunningError
from dstream_kafka.services.environment import cache_dir
from dstream_kafka.services.kafka import KafkaCluster

__all__ = ["run_dir", "read_state", "start_broker_foreground", "stop_broker", "broker_status"]


def run_dir() -> Path:
    """Folder of the state file: ``$DSTREAM_KAFKA_RUN_DIR`` or ``<cache>/run``."""
    path = Path(os.environ.get("DSTREAM_KAFKA_RUN_DIR") or cache_dir() / "run")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _state_path() -> Path:
    return run_dir() / "broker.json"


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie still answers kill(0); treat it as gone.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def read_state() -> dict | None:
    """Return the recorded state of a running CLI broker, cleaning up a stale record."""
    path = _state_path()
    if not path.is_file():
        return None
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        path.unlink(missing_ok=True)
        return None
    if _alive(state.get("pid")):
        return state
    # The CLI process died without cleaning up (SIGKILL): stop its orphaned brokers.
    for pid in state.get("broker_pids", []):
        if _alive(pid):
            try:
                os.killpg(pid, signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
    path.unlink(missing_ok=True)
    return None


def start_broker_foreground(brokers: int = 1, data_dir: str | None = None,
                            out: TextIO = sys.stdout) -> int:
    """Start a cluster, print its bootstrap servers and block until SIGINT/SIGTERM or ``stop``."""
    state = read_state()
    if state is not None:
        raise ServiceAlreadyRunningError(
            f"a Kafka broker started by `dstream-kafka broker start` is already running "
            f"(pid {state['pid']}, bootstrap servers {state['bootstrap_servers']}); "
            "use it, or stop it first with `dstream-kafka broker stop`."
        )
    cluster = KafkaCluster(brokers=brokers, data_dir=data_dir)
    stop_event = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop_event.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        cluster.start()
        record = {
            "pid": os.getpid(),
            "bootstrap_servers": cluster.bootstrap_servers,
            "brokers": brokers,
            "data_dir": str(cluster.data_dir),
            "broker_pids": [p for p in cluster.broker_pids().values() if p],
            "started_at": time.time(),
        }
        tmp = _state_path().with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2))
        os.replace(tmp, _state_path())
        out.write(f"{cluster.bootstrap_servers}\n")
        out.write(
            f"Kafka {cluster.version} is running in KRaft mode with {brokers} broker(s); "
            f"data in {cluster.data_dir}.\n"
            "Stop it with Ctrl-C or `dstream-kafka broker stop`.\n"
        )
        out.flush()
        while not stop_event.wait(1.0):
            dead = [n for n, p in cluster.broker_pids().items() if p and not _alive(p)]
            if dead:
                out.write(f"Kafka node(s) {dead} exited; stopping.\n")
                return 1
        return 0
    finally:
        cluster.stop()
        _state_path().unlink(missing_ok=True)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        out.write("Kafka stopped.\n")
        out.flush()


def stop_broker(timeout: float = 60.0, out: TextIO = sys.stdout) -> int:
    """Stop the broker started by ``dstream-kafka broker start``; returns an exit code."""
    state = read_state()
    if state is None:
        out.write("No broker started by `dstream-kafka broker start` is running.\n")
        return 0
    pid = state["pid"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(pid):
        out.write(f"The broker process {pid} did not stop within {timeout:.0f}s.\n")
        return 1
    read_state()  # removes the record and any orphaned broker if the process could not
    out.write(f"Stopped the Kafka broker at {state['bootstrap_servers']}.\n")
    return 0


def broker_status(out: TextIO = sys.stdout) -> int:
    """Print the bootstrap servers of the running CLI broker; exit code 1 when none runs."""
    state = read_state()
    if state is None:
        out.write("No broker started by `dstream-kafka broker start` is running.\n")
        return 1
    out.write(f"{state['bootstrap_servers']}\n")
    return 0
