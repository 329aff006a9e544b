"""Batch-time arithmetic of the streaming engine: pure functions on epoch milliseconds.

Batch times are multiples of the batch interval since the epoch, as Spark's
``RecurringTimer``; a stream with a slide produces RDDs at whole slides after the graph's
zero time. Unit-tested in ``tests/unit/test_scheduler_timing.py``.
"""

from __future__ import annotations

import math
import time
from datetime import datetime

from dstream_kafka.config import parse_time_string
from dstream_kafka.errors import ConfigurationError

__all__ = [
    "datetime_to_ms",
    "due_batch_times",
    "first_batch_time",
    "graceful_stop_timeout_ms",
    "is_valid_time",
    "ms_to_datetime",
    "now_ms",
    "parse_duration_ms",
    "seconds_to_ms",
    "slice_times",
]


def now_ms() -> int:
    """Return the wall clock in integer milliseconds since the epoch."""
    return int(time.time() * 1000)


def seconds_to_ms(seconds: float, what: str = "duration") -> int:
    """Convert a positive duration in seconds (floats allowed) to whole milliseconds.

    Rounds to the nearest millisecond, so ``0.1`` and ``1.001`` give 100 and 1001 (PySpark
    truncates, which turns ``1.001`` into 1000).

    Raises
    ------
    ConfigurationError
        When the value is not a finite number or rounds to less than 1 ms.
    """
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ConfigurationError(f"{what} must be a number of seconds, got {seconds!r}")
    if not math.isfinite(seconds):
        raise ConfigurationError(f"{what} must be finite, got {seconds!r}")
    ms = int(round(seconds * 1000))
    if ms < 1:
        raise ConfigurationError(f"{what} must be at least 1 ms, got {seconds!r} s")
    return ms


def ms_to_datetime(ms: int) -> datetime:
    """Return the local naive datetime PySpark passes to ``foreachRDD(func(time, rdd))``."""
    return datetime.fromtimestamp(ms / 1000.0)


def datetime_to_ms(value: datetime | float) -> int:
    """Return epoch ms of a naive local datetime, or of a number of epoch seconds."""
    if isinstance(value, datetime):
        return int(round(value.timestamp() * 1000))
    return int(round(float(value) * 1000))


def first_batch_time(now: int, interval_ms: int) -> int:
    """Return the first batch time after ``now``: the next multiple of ``interval_ms``.

    This is Spark's ``RecurringTimer.getStartTime``: ``(floor(now / interval) + 1) * interval``,
    so a ``now`` that is itself a multiple still moves to the next one.
    """
    return (now // interval_ms + 1) * interval_ms


def is_valid_time(time_ms: int, zero_ms: int, slide_ms: int) -> bool:
    """Return whether a stream with ``slide_ms`` produces an RDD at ``time_ms``.

    Valid times are after the graph's zero time and a whole number of slides from it.
    """
    return time_ms > zero_ms and (time_ms - zero_ms) % slide_ms == 0


def slice_times(from_ms: int, to_ms: int, zero_ms: int, slide_ms: int) -> list[int]:
    """Return the valid times of a stream in the closed interval ``[from_ms, to_ms]``."""
    if to_ms < from_ms:
        return []
    # First multiple of the slide (relative to zero) at or after from_ms.
    offset = (from_ms - zero_ms) % slide_ms
    start = from_ms if offset == 0 else from_ms + (slide_ms - offset)
    start = max(start, zero_ms + slide_ms)
    return list(range(start, to_ms + 1, slide_ms))


def due_batch_times(next_time: int, now: int, interval_ms: int) -> list[int]:
    """Return every batch time from ``next_time`` that is due at ``now``, oldest first.

    This is a late loop's backlog; the scheduler plans it one batch a turn, oldest first, and
    never skips a batch time.
    """
    if now < next_time:
        return []
    return list(range(next_time, now + 1, interval_ms))


def parse_duration_ms(text: str | int | float) -> int:
    """Parse a Spark time string (``"5000"``, ``"5000ms"``, ``"10s"``, ``"2min"``) to ms.

    A bare number is milliseconds, as Spark's ``getTimeAsMs``
    (:func:`~dstream_kafka.config.parse_time_string`).

    Raises
    ------
    ConfigurationError
        When ``text`` is not a time string.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return int(text)
    return parse_time_string(text if isinstance(text, str) else repr(text), "ms", key="duration")


def graceful_stop_timeout_ms(conf_value: str | int | None, batch_ms: int) -> int:
    """Return how long a graceful stop waits for queued batches.

    ``spark.streaming.gracefulStopTimeout`` when set, else 10 batch intervals (Spark's
    default).
    """
    if conf_value is None:
        return 10 * batch_ms
    return parse_duration_ms(conf_value)
