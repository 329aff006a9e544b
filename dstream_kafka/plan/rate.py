"""Rate control for direct streams, with Spark's arithmetic.

* :func:`max_messages_per_partition` and :func:`clamp` are
  ``DirectKafkaInputDStream.maxMessagesPerPartition`` / ``clamp``: how far each partition
  may advance in one batch.
* Spark's backpressure (``PIDRateEstimator.scala``, ``RateController.scala``) is
  :mod:`dstream_kafka.plan.backpressure`.
* :func:`max_offsets_per_trigger_limit` is Structured Streaming's ``maxOffsetsPerTrigger``
  split (``KafkaMicroBatchStream.rateLimit``); :class:`TriggerGate` its
  ``minOffsetsPerTrigger`` / ``maxTriggerDelay`` hold-back.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, TypeVar

from dstream_kafka.plan.backpressure import LONG_MAX, double_to_long
from dstream_kafka.config import SparkConfReader

__all__ = [
    "DefaultPerPartitionConfig",
    "PerPartitionConfig",
    "TriggerGate",
    "clamp",
    "max_messages_per_partition",
    "max_offsets_per_trigger_limit",
]

K = TypeVar("K")


class PerPartitionConfig(ABC):
    """Per-partition rate settings; subclass it to vary rates by topic partition.

    Instances must be picklable, as Spark's are ``Serializable``.
    """

    @abstractmethod
    def maxRatePerPartition(self, tp: Any) -> int:
        """Maximum records per second for ``tp``; ``0`` or less means unlimited."""

    def minRatePerPartition(self, tp: Any) -> int:
        """Minimum records per batch-second for ``tp`` once any limit applies (default 1)."""
        return 1


class DefaultPerPartitionConfig(PerPartitionConfig):
    """The same rates for every partition, from ``spark.streaming.kafka.maxRatePerPartition``
    (default 0, unlimited) and ``spark.streaming.kafka.minRatePerPartition`` (default 1).

    The configuration is read once, at construction.
    """

    def __init__(self, conf: Any = None) -> None:
        reader = SparkConfReader(conf)
        self.maxRate = reader.max_rate_per_partition
        self.minRate = reader.min_rate_per_partition

    def maxRatePerPartition(self, tp: Any) -> int:
        return self.maxRate

    def minRatePerPartition(self, tp: Any) -> int:
        return self.minRate


def max_messages_per_partition(
    latest: Mapping[K, int],
    current: Mapping[K, int],
    batch_duration_s: float,
    per_partition_config: PerPartitionConfig,
    rate: float | None = None,
) -> dict[K, int] | None:
    """Return how many records each partition may read this batch, or ``None`` for no limit.

    Parameters
    ----------
    latest : Mapping
        Latest available offset per topic partition.
    current : Mapping
        Current (next to read) offset per topic partition; must cover ``latest``.
    batch_duration_s : float
        Batch interval in seconds (Spark: ``batchDuration.milliseconds / 1000``).
    per_partition_config : PerPartitionConfig
    rate : float, optional
        The estimated rate in records/s when backpressure is on (see
        :func:`~dstream_kafka.plan.backpressure.estimated_rate`), ``None`` when it is off.

    Returns
    -------
    dict or None
        With a positive ``rate``, each partition's share is ``lag / totalLag * rate`` (a
        double), capped by its ``maxRatePerPartition`` when that is positive; otherwise the
        share is ``maxRatePerPartition``. When the shares sum to more than zero each
        partition gets ``max(long(batch_duration_s * share), minRatePerPartition)``; when the
        sum is zero or NaN (no lag) the result is ``None``. A partition with no max rate
        next to ones with a max rate therefore gets ``minRatePerPartition`` records, as in
        Spark.
    """
    ppc = per_partition_config
    missing = [tp for tp in latest if tp not in current]
    if missing:
        raise KeyError(f"No current offset for {missing!r}; every latest partition needs one")

    limits: dict[K, float] = {}
    if rate is not None and rate > 0:
        lags = {tp: max(latest[tp] - current[tp], 0) for tp in latest}
        total_lag = float(sum(lags.values()))
        for tp, lag in lags.items():
            # Java gives NaN for 0 / 0.0; Python raises, so spell it out.
            share = lag / total_lag * rate if total_lag else math.nan
            max_rate = ppc.maxRatePerPartition(tp)
            # Java Math.min propagates NaN; Python's min would not.
            limits[tp] = (
                share if max_rate <= 0 or math.isnan(share) else min(share, float(max_rate))
            )
    else:
        limits = {tp: float(ppc.maxRatePerPartition(tp)) for tp in latest}

    if not sum(limits.values()) > 0:  # NaN compares False, as in Spark
        return None
    secs = float(batch_duration_s)
    return {
        tp: max(double_to_long(secs * limit), ppc.minRatePerPartition(tp))
        for tp, limit in limits.items()
    }


def clamp(
    latest: Mapping[K, int],
    current: Mapping[K, int],
    batch_duration_s: float,
    per_partition_config: PerPartitionConfig,
    rate: float | None = None,
) -> dict[K, int]:
    """Return this batch's until offsets: ``min(current + maxMessages, latest)`` per
    partition, or ``latest`` unchanged when :func:`max_messages_per_partition` gives no limit.
    """
    limits = max_messages_per_partition(
        latest, current, batch_duration_s, per_partition_config, rate
    )
    if limits is None:
        return dict(latest)
    return {tp: min(current[tp] + n, latest[tp]) for tp, n in limits.items()}


def max_offsets_per_trigger_limit(
    limit: int,
    start: Mapping[K, int],
    latest: Mapping[K, int],
    new_partition_starts: Mapping[K, int] | None = None,
) -> dict[K, int]:
    """Split ``limit`` offsets over partitions in proportion to their backlog.

    Structured Streaming's ``maxOffsetsPerTrigger``: partition ``tp`` with backlog
    ``size = latest - begin > 0`` advances by ``limit * size / total`` offsets, rounded up
    when below 1 (small partitions are not starved) and down otherwise, and never past
    ``latest``. ``begin`` is ``start[tp]``, else ``new_partition_starts[tp]``; partitions with
    neither, or no backlog, end at ``latest``. With a total backlog below 1 the result is
    ``latest``. Rounding up can make the total exceed ``limit``.

    Examples
    --------
    >>> max_offsets_per_trigger_limit(10, {"a": 0, "b": 0, "c": 0}, {"a": 101, "b": 11, "c": 1})
    {'a': 8, 'b': 1, 'c': 1}
    """
    new_starts = new_partition_starts or {}
    begins: dict[K, int] = {}
    sizes: dict[K, int] = {}
    for tp, end in latest.items():
        begin = start[tp] if tp in start else new_starts.get(tp)
        if begin is not None and end - begin > 0:
            begins[tp] = begin
            sizes[tp] = end - begin
    total = float(sum(sizes.values()))
    if total < 1:
        return dict(latest)
    result: dict[K, int] = {}
    for tp, end in latest.items():
        if tp not in sizes:
            result[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        step = double_to_long(math.ceil(prorate) if prorate < 1 else math.floor(prorate))
        # SPARK-26718: saturate instead of overflowing a Java long.
        off = LONG_MAX if step > LONG_MAX - begins[tp] else begins[tp] + step
        result[tp] = min(end, off)
    return result


def batch_ends(latest: Mapping[K, int], current: Mapping[K, int], seconds: float,
               per_partition: PerPartitionConfig, rate: float | None,
               max_offsets_per_trigger: int | None, bounded: Any = None) -> dict[K, int]:
    """A batch's end offsets: ``latest`` limited by the per-partition rates over ``seconds``
    (:func:`clamp`), then by maxOffsetsPerTrigger, then by a bounded run's ends (``bounded``,
    a :class:`~dstream_kafka.plan.bounded_run.BoundedRun`)."""
    until = clamp(latest, current, seconds, per_partition, rate)
    if max_offsets_per_trigger is not None:
        capped = max_offsets_per_trigger_limit(max_offsets_per_trigger, current, until)
        until = {tp: min(until[tp], capped[tp]) for tp in until}
    if bounded is not None:
        until = bounded.limit(until, current)
    return until


class TriggerGate:
    """Structured Streaming's ``minOffsetsPerTrigger`` with ``maxTriggerDelay``
    (``KafkaMicroBatchStream.delayBatch``): a batch reads new offsets only once at least
    ``min_offsets`` are available, or once ``max_delay_ms`` has passed since the last batch
    that read any (or since the start: the first batch with data is never held back).

    Parameters
    ----------
    min_offsets : int
        The fewest new offsets, summed over partitions, a batch waits for.
    max_delay_ms : int
        The longest a batch with fewer waits.
    """

    def __init__(self, min_offsets: int, max_delay_ms: int) -> None:
        self.min_offsets = min_offsets
        self.max_delay_ms = max_delay_ms
        self.last_trigger_ms: float | None = None  # monotonic ms of the last batch with data

    def ready(self, new_offsets: int, now_ms: float) -> bool:
        """Whether a batch may read the ``new_offsets`` available at ``now_ms`` (monotonic)."""
        if new_offsets <= 0:
            return False
        last = self.last_trigger_ms
        return (last is None or now_ms - last >= self.max_delay_ms
                or new_offsets >= self.min_offsets)

    def fired(self, now_ms: float) -> None:
        """Note that a batch read new offsets at ``now_ms``."""
        self.last_trigger_ms = now_ms
