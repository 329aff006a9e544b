"""Local services started from the command line: one per machine user, run in the foreground.

``dstream-kafka broker start`` and ``dstream-kafka hbase start`` share this life cycle: ``start``
refuses a second instance, starts the server, records its pid, its address and its child
process ids in ``<run dir>/<name>.json``, prints the address on its first line and blocks until
SIGINT/SIGTERM (``stop`` sends SIGTERM) or until the server dies; ``status`` prints the address.
A record whose process is gone (SIGKILL) is cleaned up when next read: its orphaned children
are signalled and a temporary data folder is removed. On Linux the children do not wait for
that: they get SIGTERM as soon as the foreground process dies
(:mod:`~dstream_kafka.operate.services.lifeline`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from dstream_kafka.operate.services.errors import ServiceAlreadyRunningError
from dstream_kafka.operate.services.environment import cache_dir

__all__ = ["CommandLineService", "pid_alive", "run_dir"]


def run_dir() -> Path:
    """Folder of the state files: ``$DSTREAM_KAFKA_RUN_DIR`` or ``<cache>/run``."""
    path = Path(os.environ.get("DSTREAM_KAFKA_RUN_DIR") or cache_dir() / "run")
    path.mkdir(parents=True, exist_ok=True)
    return path


def pid_alive(pid: int | None) -> bool:
    """Return whether process ``pid`` runs (a zombie does not)."""
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


@dataclass(frozen=True)
class CommandLineService:
    """How one kind of command-line service is recorded, named and cleaned up.

    Attributes
    ----------
    name : str
        The CLI word (``dstream-kafka <name> start``) and the state file's stem.
    noun, article : str
        The service in messages (``"Kafka broker"``) and its indefinite article (``"a"``).
    address_key, address_label : str
        The record's key that ``status`` prints, and how messages call it.
    child_pids_key : str
        The record's key listing the server's processes (process group leaders).
    orphan_signal : int
        Sent to the process groups of a dead foreground process's children.
    temporary_prefix : str or None
        A record with ``"temporary": true`` whose ``data_dir`` name starts with this prefix has
        its folder removed once its process is gone.
    """

    name: str
    noun: str
    article: str
    address_key: str
    address_label: str
    child_pids_key: str
    orphan_signal: int = signal.SIGTERM
    temporary_prefix: str | None = None

    @property
    def _command(self) -> str:
        return f"`dstream-kafka {self.name} start`"

    def state_path(self) -> Path:
        """The state file of the running instance."""
        return run_dir() / f"{self.name}.json"

    def read_state(self) -> dict[str, Any] | None:
        """Return the record of the running instance, cleaning up after a killed one."""
        path = self.state_path()
        if not path.is_file():
            return None
        try:
            state: dict[str, Any] = json.loads(path.read_text())
        except (OSError, ValueError):
            path.unlink(missing_ok=True)
            return None
        if pid_alive(state.get("pid")):
            return state
        # The foreground process died without cleaning up (SIGKILL): stop its orphans.
        for pid in state.get(self.child_pids_key, []):
            if pid_alive(pid):
                try:
                    os.killpg(pid, self.orphan_signal)
                except (ProcessLookupError, PermissionError):
                    pass
        folder = state.get("data_dir")
        if (self.temporary_prefix and state.get("temporary") and folder
                and Path(folder).name.startswith(self.temporary_prefix)):
            shutil.rmtree(folder, ignore_errors=True)
        path.unlink(missing_ok=True)
        return None

    def refuse_second_start(self) -> None:
        """Raise :class:`ServiceAlreadyRunningError` when an instance runs."""
        state = self.read_state()
        if state is not None:
            raise ServiceAlreadyRunningError(
                f"{self.article} {self.noun} started by {self._command} is already running (pid {state['pid']}, "
                f"{self.address_label} {state[self.address_key]}); use it, or stop it first with "
                f"`dstream-kafka {self.name} stop`.")

    def serve(self, start: Callable[[], dict[str, Any]], banner: Callable[[], str],
              died: Callable[[], str | None], stop: Callable[[], None],
              out: TextIO = sys.stdout) -> int:
        """Start, record and print the server, then block until a signal or its death.

        ``start`` starts the server and returns its record (without ``pid``); ``banner`` gives
        the lines printed after the address; ``died`` returns a message once the server died
        on its own; ``stop`` stops it. Returns 0 after a requested stop, 1 after a death.
        Callers check :meth:`refuse_second_start` first, before their server takes ports.
        """
        stop_event = threading.Event()

        def on_signal(signum: int, _frame: object) -> None:
            stop_event.set()

        previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        started = False
        try:
            record = {"pid": os.getpid(), **start(), "started_at": time.time()}
            tmp = self.state_path().with_suffix(".tmp")
            tmp.write_text(json.dumps(record, indent=2))
            os.replace(tmp, self.state_path())
            out.write(f"{record[self.address_key]}\n{banner()}")
            out.flush()
            started = True
            while not stop_event.wait(1.0):
                message = died()
                if message is not None:
                    out.write(message)
                    return 1
            return 0
        finally:
            stop()
            self.state_path().unlink(missing_ok=True)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            if started:  # a failed start says why on stderr, not that a server stopped
                out.write(f"{self.noun} stopped.\n")
                out.flush()

    def stop(self, timeout: float, out: TextIO = sys.stdout) -> int:
        """Stop the running instance (SIGTERM to its foreground process); returns an exit code."""
        state = self.read_state()
        if state is None:
            out.write(f"No {self.noun} started by {self._command} is running.\n")
            return 0
        pid = state["pid"]
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(pid):
            out.write(f"The {self.noun} process {pid} did not stop within {timeout:.0f}s.\n")
            return 1
        self.read_state()  # removes the record and any orphan if the process could not
        out.write(f"{self.noun} at {state[self.address_key]} stopped.\n")
        return 0

    def status(self, out: TextIO = sys.stdout) -> int:
        """Print the running instance's address; exit code 1 when none runs."""
        state = self.read_state()
        if state is None:
            out.write(f"No {self.noun} started by {self._command} is running.\n")
            return 1
        out.write(f"{state[self.address_key]}\n")
        return 0
