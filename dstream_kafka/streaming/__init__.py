"""A micro-batch streaming engine on PySpark RDDs, with PySpark's ``pyspark.streaming`` API.

``StreamingContext`` and ``DStream`` mirror ``pyspark.streaming`` (same method names,
arguments, ``pprint`` format and listener callbacks) but run entirely in Python on the
driver: a scheduler thread generates one RDD per stream and batch time, a job thread runs
the output operations. Input sources subclass :class:`InputDStream`.

**The engine protocol.** The engine's modules share some underscore members across files;
they are the engine's internals (not for users, free to change with it), used only by the
modules named here and by ``dstream_kafka.compat.pyspark_kafka`` and
``dstream_kafka.plan.direct_stream``, which subclass the engine's streams:

* ``DStream`` (``dstream.py``) to the graph, the context, ``windowed.py``, ``state.py`` and
  subclasses: ``_ssc`` and ``_sc`` (its contexts), ``_parents``, ``_slide_ms``,
  ``_remember_ms``, ``_storage_level``, ``_generated`` (batch time -> RDD) and ``_owned``
  (ids of the RDDs it persisted and unpersists when it forgets them; the graph adds those a
  checkpoint restores); ``_get_or_compute(time_ms)``, ``_slice(from_ms, to_ms)``,
  ``_clear_before(time_ms)``, ``_parent_remember_ms()``; for checkpoints ``_keeps_state``,
  ``_state_checkpoint_ms()`` and ``_durable_rdds(time_ms)``; ``_kind()``, the stream's type
  as a checkpoint records it (the graph compares it on recovery).
* ``dstream._call_site(name)``: the user's line that called ``name`` (``context.py`` keeps
  where ``start()`` was called).
* ``StreamingContext`` (``context.py``) to the streams and the graph: ``_batch_ms``,
  ``_state`` and ``_checkpoint_layout()``.
* ``graph._STOPPING``: the state between ``stop()`` and the end of the last batch, which
  ``StreamingContext.getState()`` reports as ``ACTIVE``.
* ``ListenerBus._thread`` (``listener.py``): one of the engine's threads, from which a
  ``stop()`` must not wait for the engine to end.
"""

from __future__ import annotations

from dstream_kafka.streaming.checkpoint_state import CheckpointLayout
from dstream_kafka.streaming.context import StreamingContext
from dstream_kafka.streaming.dstream import DStream
from dstream_kafka.streaming.input import InputDStream, QueueInputDStream
from dstream_kafka.streaming.listener import (
    BatchInfo,
    OutputOperationInfo,
    StreamingListener,
    StreamInputInfo,
    Time,
)
from dstream_kafka.streaming.clock import (
    datetime_to_ms,
    first_batch_time,
    ms_to_datetime,
    seconds_to_ms,
)

__all__ = [
    "BatchInfo",
    "CheckpointLayout",
    "DStream",
    "InputDStream",
    "OutputOperationInfo",
    "QueueInputDStream",
    "StreamingContext",
    "StreamingListener",
    "StreamInputInfo",
    "Time",
    "datetime_to_ms",
    "first_batch_time",
    "ms_to_datetime",
    "seconds_to_ms",
]
