"""Child processes that die with their parent, and the lock a stray Kafka broker leaves behind.

A service a program starts (a Kafka broker, HBase, a Spark standalone master or worker) runs in
its own session, so that Ctrl-C or a signal to the program's process group (``timeout``,
systemd) does not stop it in the middle of the program's own graceful stop: the program stops
it. When the program dies without doing so (SIGKILL, a crash), Linux's parent-death signal
(``prctl(PR_SET_PDEATHSIG)``) sends the child SIGTERM, so no JVM outlives its parent.

The kernel ties that signal to the *thread* that forked the child, not to the process: a child
forked by a short-lived thread would be stopped when the thread ends. :func:`popen_tied`
therefore forks from the main thread, or else from one long-lived spawner thread.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

__all__ = ["lock_holder", "parent_death_signal_supported", "popen_tied"]

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


# Looked up once in the parent: the forked child only calls it.
_PRCTL = _load_prctl()


def parent_death_signal_supported() -> bool:
    """Whether children get a signal when their parent dies (Linux only)."""
    return _PRCTL is not None


def _die_with_parent(sig: int) -> Callable[[], None] | None:
    prctl = _PRCTL
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:  # runs in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        # The parent may have died between fork and prctl: then no signal would ever come.
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec


_Request = tuple["Future[subprocess.Popen[bytes]]", Callable[[], Any]]


class _Spawner:
    """Forks children from one thread that lives as long as the process."""

    def __init__(self) -> None:
        self._requests: queue.SimpleQueue[_Request] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def call(self, start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
        if threading.current_thread() is threading.main_thread():
            return start()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="dstream-kafka-spawner",
                                                daemon=True)
                self._thread.start()
        future: Future[subprocess.Popen[bytes]] = Future()
        self._requests.put((future, start))
        return future.result()

    def _serve(self) -> None:
        while True:
            future, start = self._requests.get()
            try:
                future.set_result(start())
            except BaseException as exc:  # handed to the caller's thread
                future.set_exception(exc)


_SPAWNER = _Spawner()


def popen_tied(argv: Sequence[str], death_signal: int = signal.SIGTERM,
               **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """Start ``argv`` as :class:`subprocess.Popen` does, in a child that dies with this process.

    On Linux the child gets ``death_signal`` when this process ends for any reason, SIGKILL
    included; elsewhere it is started as ``Popen`` would start it.
    """
    preexec = _die_with_parent(death_signal)
    if preexec is not None:
        popen_kwargs["preexec_fn"] = preexec
    return _SPAWNER.call(lambda: subprocess.Popen(list(argv), **popen_kwargs))


def lock_holder(path: Path) -> int | None:
    """Return the id of the process holding a POSIX lock on ``path`` (``-1`` when it cannot
    be told), or None when the file is missing or unlocked.

    Kafka locks ``<log dir>/.lock`` this way (Java's ``FileChannel.tryLock``) while a broker
    uses the folder.
    """
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EACCES, errno.EAGAIN):
                return None
        else:
            fcntl.lockf(fd, fcntl.LOCK_UN)
            return None
        inode = os.fstat(fd).st_ino
    finally:
        os.close(fd)
    try:
        with open("/proc/locks") as fh:
            for line in fh:
                # "1: POSIX  ADVISORY  WRITE 4242 08:01:131090 0 EOF"
                fields = line.split()
                if len(fields) > 5 and fields[5].rsplit(":", 1)[-1] == str(inode):
                    return int(fields[4])
    except (OSError, ValueError):
        pass
    return -1
