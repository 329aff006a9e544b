"""Where a context's and its streams' outputs register, so the engine and the planner name none.

Spark's Streaming tab is a ``StreamingListener`` that the UI adds to the listener bus; here
every output of what a context and its direct streams do registers a factory in this module,
and the engine (:class:`~dstream_kafka.streaming.context.StreamingContext`) and the planner
(:class:`~dstream_kafka.plan.progress.ProgressTracker`) call the factories without importing
the outputs. Two kinds exist:

* a **context output** (the Streaming page) is made once per context by
  ``factory(sparkContext, batch_ms, conf)``; it may add a
  :class:`~dstream_kafka.streaming.listener.StreamingListener` to the context's listener bus,
  is started before the inputs and stopped after them (:class:`ContextOutput`);
* a **stream output** (the progress file, the Prometheus metrics, the page's stream charts) is
  made each time a direct stream starts by ``factory(run)``, ``run`` a :class:`StreamRun`; it
  then hears the stream's events on the stream's scheduler thread, in registration order
  (:class:`StreamOutput`: each batch's progress, the lag timer, each data loss, the stop).

A factory returns None when the configuration does not ask for its output, and raises
:class:`~dstream_kafka.errors.ConfigurationError` for a setting it cannot use. Adding an
output means one module that calls :func:`register_context_output` or
:func:`register_stream_output` when imported, imported before the context starts (the
package's own outputs are in :data:`BUILTIN_OUTPUTS`, imported on first use).
"""

from __future__ import annotations

import importlib
import itertools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dstream_kafka.streaming.listener import StreamingListener

__all__ = ["BUILTIN_OUTPUTS", "ContextOutput", "DataLoss", "StreamOutput", "StreamRun",
           "context_outputs", "register_context_output", "register_stream_output",
           "stream_label", "stream_outputs"]

#: Modules that register the package's outputs, imported the first time outputs are made: the
#: Prometheus metrics and the Streaming page (the progress file registers in plan/progress.py,
#: imported by every direct stream).
BUILTIN_OUTPUTS = ("dstream_kafka.ui.outputs",)

_lock = threading.Lock()
_loaded = False
_context_factories: list[Callable[[Any, int, Any], ContextOutput | None]] = []
_stream_factories: list[Callable[[StreamRun], StreamOutput | None]] = []
# The number of each context that asked for a label, in the order they asked: a weak map, so a
# context that is gone is not kept alive, and a counter that never hands a number out twice.
_contexts: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_context_numbers = itertools.count(1)


def stream_label(context: Any, stream: int) -> str:
    """The label every output gives stream number ``stream`` of ``context``: ``"<context>-<stream>"``
    (the ``stream`` label of the Prometheus metrics).

    A context gets its number (1, 2, ...) the first time one of its streams asks, and keeps it
    for its life; no two contexts of the process get the same number. ``context`` None (a
    stream without a StreamingContext, such as a DataFrame stream) gets a new number each call.
    """
    with _lock:
        if context is None:
            number = next(_context_numbers)
        else:
            number = _contexts.get(context) or 0
            if not number:
                number = _contexts[context] = next(_context_numbers)
    return f"{number}-{stream}"


class ContextOutput:
    """An output of one StreamingContext; override what it needs.

    ``listener``, when not None, is added to the context's listener bus before :meth:`start`.
    """

    listener: StreamingListener | None = None

    def start(self) -> object:
        """The context starts: called before its inputs start (they may feed this output)."""
        return None

    def stop(self) -> None:
        """The context stopped (also after a start that failed)."""

    def job_description_setter(self) -> Callable[[str], None] | None:
        """The scheduler's ``set_job_description`` for the batches' jobs, or None for Spark's
        ``setJobDescription`` (the first output that returns one is used)."""
        return None


@dataclass(frozen=True)
class StreamRun:
    """One run (one start) of a direct stream, as its output factories see it.

    ``conf`` is the stream's SparkConf, ``label`` its :func:`stream_label`, ``stream`` its
    number in the context, ``description`` its name, ``store`` its offset store (or None) and
    ``group`` the store's group, ``context`` its StreamingContext (None without one). No Kafka
    parameter is here, so no secret reaches an output.
    """

    conf: Any
    label: str
    stream: int
    description: str
    store: Any = None
    group: str = ""
    context: Any = None


@dataclass(frozen=True)
class DataLoss:
    """A stream skipped records that Kafka deleted (``failOnDataLoss=False``).

    ``topic``, ``partition`` and ``[fromOffset, untilOffset)`` say what, when known (a start
    position that fell behind the log start knows only its partition: offsets are -1 then).
    """

    label: str
    topic: str = ""
    partition: int = -1
    fromOffset: int = -1
    untilOffset: int = -1


class StreamOutput:
    """An output of one run of a direct stream; override what it needs.

    Every callback runs on the stream's scheduler thread; one that raises is logged and stops
    neither the other outputs nor the stream.
    """

    def onProgress(self, progress: Any) -> None:
        """A batch completed: ``progress`` is its :class:`~dstream_kafka.plan.progress.BatchProgress`."""

    def onLagMonitor(self, monitor: Any) -> None:
        """The stream's lag timer (:class:`~dstream_kafka.monitor.lag.LagMonitor`) starts;
        ``monitor.add_listener`` subscribes to its samples."""

    def onDataLoss(self, loss: DataLoss) -> None:
        """The stream skipped deleted records."""

    def close(self) -> None:
        """The run stopped: nothing of it should stay (series, open files)."""


def register_context_output(factory: Callable[[Any, int, Any], ContextOutput | None]) -> None:
    """Make ``factory(sparkContext, batch_ms, conf)`` for each later StreamingContext."""
    with _lock:
        if factory not in _context_factories:
            _context_factories.append(factory)


def register_stream_output(factory: Callable[[StreamRun], StreamOutput | None]) -> None:
    """Make ``factory(run)`` each time a direct stream starts (in registration order)."""
    with _lock:
        if factory not in _stream_factories:
            _stream_factories.append(factory)


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    for module in BUILTIN_OUTPUTS:  # each registers its outputs when imported
        importlib.import_module(module)
    _loaded = True


def context_outputs(sc: Any, batch_ms: int, conf: Any) -> list[ContextOutput]:
    """The outputs a new context with ``conf`` gets (not started yet)."""
    _load_builtin()
    with _lock:
        factories = list(_context_factories)
    return [out for out in (f(sc, batch_ms, conf) for f in factories) if out is not None]


def stream_outputs(run: StreamRun) -> list[StreamOutput]:
    """The outputs of ``run``, in registration order."""
    _load_builtin()
    with _lock:
        factories = list(_stream_factories)
    return [out for out in (f(run) for f in factories) if out is not None]
