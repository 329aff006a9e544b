"""A micro-batch streaming engine on PySpark RDDs, with PySpark's ``pyspark.streaming`` API.

``StreamingContext`` and ``DStream`` mirror ``pyspark.streaming`` (same method names,
arguments, ``pprint`` format and listener callbacks) but run entirely in Python on the
driver: a scheduler thread generates one RDD per stream and batch time, a job thread runs
the output operations. Input sources subclass :class:`InputDStream`.
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
