"""Children tied to their parent (Linux's parent-death signal) and the lock-holder look-up."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from dstream_kafka.operate.services.lifeline import lock_holder, parent_death_signal_supported, popen_tied

pytestmark = pytest.mark.skipif(not parent_death_signal_supported(), reason="Linux only")


def _gone(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as fh:
                if fh.read().split(")")[-1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


def test_a_tied_child_dies_when_its_parent_is_sigkilled() -> None:
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import time
        from dstream_kafka.operate.services.lifeline import popen_tied
        print(popen_tied(["sleep", "600"]).pid, flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    assert _gone(child)


def test_a_child_started_from_a_short_lived_thread_outlives_that_thread() -> None:
    started: list[subprocess.Popen[bytes]] = []
    worker = threading.Thread(target=lambda: started.append(popen_tied(["sleep", "600"])))
    worker.start()
    worker.join()
    (child,) = started
    try:
        assert not _gone(child.pid, timeout=0.5)
    finally:
        child.kill()
        child.wait()


def test_lock_holder_names_the_process_holding_a_posix_lock(tmp_path: Path) -> None:
    lock = tmp_path / ".lock"
    lock.touch()
    assert lock_holder(lock) is None
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, time
        fd = os.open({str(lock)!r}, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        assert lock_holder(lock) == holder.pid
    finally:
        holder.kill()
        holder.wait()
    assert lock_holder(lock) is None
    assert lock_holder(tmp_path / "missing") is None
