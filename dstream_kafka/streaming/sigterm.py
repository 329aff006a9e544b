"""The driver's SIGTERM handler: the first SIGTERM stops the StreamingContext, in a new thread.

Spark's ``spark.streaming.stopGracefullyOnShutdown`` chooses whether that stop is graceful
(:meth:`~dstream_kafka.streaming.context.StreamingContext.start` installs the handler); a
second SIGTERM gets the handler that was there before.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from typing import Any, Callable

__all__ = ["install_sigterm_handler"]

log = logging.getLogger(__name__)


class _SigtermHook:
    """Our SIGTERM handler: the first signal starts ``on_sigterm`` in a thread.

    The previous handler is put back as soon as the first signal arrives, so a second
    SIGTERM gets the old behaviour (by default: terminate now).
    """

    def __init__(self, on_sigterm: Callable[[], None]) -> None:
        self._on_sigterm: Callable[[], None] | None = on_sigterm
        self._previous: Any = signal.getsignal(signal.SIGTERM)

    def __call__(self, signum: int, frame: Any) -> None:
        callback, self._on_sigterm = self._on_sigterm, None
        self._restore()
        if callback is None:
            self._delegate(signum, frame)
            return
        log.warning("SIGTERM received: stopping the StreamingContext")
        threading.Thread(target=callback, name="dstream-sigterm-stop", daemon=False).start()

    def uninstall(self) -> None:
        """Disarm; put the previous handler back when possible (main thread only)."""
        self._on_sigterm = None
        self._restore()

    def _restore(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # the disarmed handler delegates to the previous one instead
        previous = self._previous  # read first: the identity test below narrows ``self``
        if signal.getsignal(signal.SIGTERM) is self:
            signal.signal(signal.SIGTERM, previous)

    def _delegate(self, signum: int, frame: Any) -> None:
        previous = self._previous
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_DFL:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)


def install_sigterm_handler(on_sigterm: Callable[[], None]) -> _SigtermHook | None:
    """Install a SIGTERM handler that runs ``on_sigterm`` once, in a new thread.

    Python only allows signal handlers from the main thread; elsewhere nothing is
    installed and ``None`` is returned.
    """
    if threading.current_thread() is not threading.main_thread():
        return None
    hook = _SigtermHook(on_sigterm)
    signal.signal(signal.SIGTERM, hook)
    return hook
