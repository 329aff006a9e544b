"""``KafkaRDD``: one RDD partition per offset range, read by executors through cached consumers.

The RDD is built on a JVM ``SparkContext.makeRDD`` of ``(index, topic, partition)`` elements,
one per partition, each with its preferred executor, so placement is real Spark scheduling
information (``getPreferredLocs`` reports it); that source is cached and reused by later RDDs
of the same partitions and locations. A Python function, which carries the offsets, maps each
element to the records of its range; transformations (``map``, ``filter``, ...) pipeline onto
it and return plain RDDs. Partition ``i`` reads ``offsetRanges()[i]``.

Records are :class:`~dstream_kafka.record.ConsumerRecord` tuples, which pickle, so unlike
Spark's ``KafkaRDD`` this RDD may be persisted or windowed without mapping first.

This module is the driver side; what the function does on executors is
:mod:`dstream_kafka.read.task`, which never imports this module.
"""

from __future__ import annotations

import collections
import itertools
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from dstream_kafka._spark_internals import (
    PipelinedRDD,
    located_source,
    python_rdd,
    source_preferred_locations,
)
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.read.counters import cache_accumulator
from dstream_kafka.read.placement import PreferConsistent, locations_for, preferred_locations_for
from dstream_kafka.read.settings import read_settings
from dstream_kafka.read.task import (LostRanges, RangeTask, ReadSettings, partition_reader,
                                     task_time_accumulator)
from dstream_kafka.record import ConsumerRecord

__all__ = [
    "KafkaRDD",
    "build_kafka_rdd",
    "read_settings",
]


#: Located source RDDs kept per SparkContext (a stream reuses one while its partitions and
#: their preferred executors stay the same).
SOURCE_CACHE_SIZE = 64

_sources: weakref.WeakKeyDictionary[Any, collections.OrderedDict[Any, Any]] = weakref.WeakKeyDictionary()
_sources_lock = threading.Lock()


def _located_source(
    sc: Any, partitions: Sequence[tuple[str, int]], locations: Sequence[str | None]
) -> Any:
    """Return a JVM RDD whose partition ``i`` holds ``(i, topic, partition)`` and prefers ``locations[i]``.

    Only the partitions and their locations are in the JVM; the offsets travel with each
    RDD's Python function. So the source is built once (about 50 JVM calls) and reused by every
    batch with the same partitions on the same executors, which makes planning a batch cost
    no JVM round trip for it. Thread-safe.
    """
    key = (tuple(partitions), tuple(locations))
    with _sources_lock:
        cached = _sources.setdefault(sc, collections.OrderedDict())
        jrdd = cached.get(key)
        if jrdd is not None:
            cached.move_to_end(key)
            return jrdd
    jrdd = located_source(sc, [(i, t, p) for i, (t, p) in enumerate(partitions)], locations)
    with _sources_lock:
        cached[key] = jrdd
        while len(cached) > SOURCE_CACHE_SIZE:
            cached.popitem(last=False)
    return jrdd


class KafkaRDD(PipelinedRDD[tuple[int, str, int], ConsumerRecord]):
    """An RDD of :class:`~dstream_kafka.record.ConsumerRecord`, one partition per offset range.

    Use :func:`~dstream_kafka.kafka_utils.KafkaUtils.createRDD` (or :func:`build_kafka_rdd`)
    rather than the constructor, which trusts its input.

    Records pickle, so the RDD may be persisted, windowed or shuffled as it is (Spark's
    ``KafkaRDD.persist`` warns that its records are not serializable; there is no need here).

    In the default strict mode ``count``, ``countApprox`` and ``isEmpty`` run no job and
    ``take(n)`` runs one job on only the partitions it needs; with
    ``spark.streaming.kafka.allowNonConsecutiveOffsets=true`` they are the generic RDD
    actions, which read the data. ``offsetRanges()`` implements ``HasOffsetRanges``.

    Parameters
    ----------
    sc : SparkContext
    kafka_config : mapping
        Executor consumer settings from :func:`~dstream_kafka.client.kafka_params.fix_kafka_params`.
    offset_ranges : sequence of OffsetRange
    locations : sequence of (str or None)
        Preferred executor location of each range.
    settings : ReadSettings

    Raises
    ------
    ConfigurationError
        If ``kafka_config`` lacks the executor fixes (Spark's ``require`` in ``KafkaRDD``).
    """

    def __init__(
        self,
        sc: Any,
        kafka_config: Mapping[str, Any],
        offset_ranges: Sequence[OffsetRange],
        locations: Sequence[str | None],
        settings: ReadSettings,
    ) -> None:
        if (
            kafka_config.get("auto_offset_reset") != "none"
            or kafka_config.get("enable_auto_commit") is not False
        ):
            raise ConfigurationError(
                "KafkaRDD needs executor Kafka parameters with auto.offset.reset=none and "
                "enable.auto.commit=false; build them with fix_kafka_params(kafkaParams)"
            )
        ranges = list(offset_ranges)
        if len(locations) != len(ranges):
            raise ConfigurationError(
                f"Got {len(locations)} preferred locations for {len(ranges)} offset ranges"
            )
        tasks = [RangeTask(i, r.topic, r.partition, r.fromOffset, r.untilOffset)
                 for i, r in enumerate(ranges)]
        self._source_jrdd = _located_source(sc, [(r.topic, r.partition) for r in ranges], locations)
        source = python_rdd(self._source_jrdd, sc)
        # Ranges lost while reading come back to the driver through an accumulator.
        self._losses = None if settings.failOnDataLoss else sc.accumulator([], LostRanges())
        # Each task's wall time comes back under the source RDD's id (known before this RDD's).
        self._times = task_time_accumulator(sc)
        self._times_tag = int(self._source_jrdd.id())
        reader = partition_reader(dict(kafka_config), settings, tasks,
                                  cache_accumulator(sc), self._losses, self._times,
                                  self._times_tag)
        super().__init__(source, reader, True)
        self._offset_ranges = ranges
        self._settings = settings
        self._kafka_config = dict(kafka_config)
        self._lost_ranges: list[OffsetRange] = []

    def add_lost_ranges(self, ranges: Sequence[OffsetRange]) -> None:
        """Report ``ranges``, already gone from Kafka when the RDD was planned, in
        :meth:`lostOffsetRanges` (ahead of those executors find while reading)."""
        self._lost_ranges.extend(ranges)

    @classmethod
    def create(
        cls,
        sc: Any,
        kafkaParams: Mapping[str, Any],
        offsetRanges: Sequence[OffsetRange],
        locationStrategy: Any = None,
        use_consumer_cache: bool | None = None,
        leader_lookup: Callable[[TopicPartition], str | None] | None = None,
        poll_timeout_ms: int | None = None,
    ) -> KafkaRDD:
        """Build an RDD for a direct stream batch: no cluster round trip, no validation job.

        ``kafkaParams`` are the user's (``fix_kafka_params`` is applied here; it is
        idempotent and only warns about values it overrides). ``locationStrategy`` defaults
        to ``PreferConsistent``; ``PreferBrokers`` needs ``leader_lookup(tp) -> host``.
        ``use_consumer_cache=None`` follows ``spark.streaming.kafka.consumer.cache.enabled``.
        """
        from dstream_kafka.client.kafka_params import fix_kafka_params

        ranges = list(offsetRanges)
        locations = locations_for(sc, locationStrategy or PreferConsistent, ranges, leader_lookup)
        return build_kafka_rdd(
            sc,
            fix_kafka_params(kafkaParams),
            ranges,
            use_cache=use_consumer_cache,
            poll_timeout_ms=poll_timeout_ms,
            locations=locations,
        )

    def offsetRanges(self) -> list[OffsetRange]:
        """Return the offset ranges; element ``i`` is read by partition ``i``."""
        return list(self._offset_ranges)

    def lostOffsetRanges(self) -> list[OffsetRange]:
        """Return the ranges that were not read because they were no longer in Kafka.

        With ``failOnDataLoss=False`` only: those already gone when the RDD was planned
        (:meth:`~dstream_kafka.kafka_utils.KafkaUtils.createRDDFromOptions`), then those
        that executors found deleted while reading (after the jobs that read them finished;
        each once, however many jobs read the RDD).
        """
        read_lost = sorted(set(self._losses.value)) if self._losses is not None else []
        return list(self._lost_ranges) + [OffsetRange(*lost) for lost in read_lost]

    def taskTimes(self) -> dict[str, float]:
        """Return the wall time in ms of each task that read its records to the end, by the
        name of what it read (``topic-partition``, with ``split N`` for a split range): from
        the task's start to the end of its records, the processing pipelined after the read
        included; the longest run when several jobs read the RDD. Empty before the first job
        ends, and once :data:`~dstream_kafka.read.task.TASK_TIMES_KEPT` newer RDDs ran."""
        entries = list(self._times.value.get(self._times_tag, ()))
        times: dict[str, float] = {}
        for _, name, ms in entries:
            times[name] = max(ms, times.get(name, 0.0))
        return times

    def toDF(self, schema: Any = None, sampleRatio: float | None = None, *,
             includeHeaders: bool = False, spark: Any = None) -> Any:
        """Return a DataFrame of this RDD's ranges in Structured Streaming's Kafka schema.

        Given ``schema`` or ``sampleRatio``, PySpark's own ``RDD.toDF`` converts the
        :class:`~dstream_kafka.record.ConsumerRecord` tuples instead.

        The DataFrame of :meth:`~dstream_kafka.kafka_utils.KafkaUtils.createDataFrame` (one
        Spark partition per range, ``dstream_kafka.sql.offsetRanges(df)``), read with this
        RDD's Kafka parameters and read settings when it runs: it reads Kafka, not records
        this RDD may have persisted. ``spark`` defaults to the active session of this RDD's
        context. Ranges lost when planning are ``dstream_kafka.sql.lostOffsetRanges(df)``.

        Raises
        ------
        ConfigurationError
            When the RDD's Kafka parameters have a key or value deserializer (the columns are
            binary).
        MissingDependencyError
            Without pyarrow (``pip install dstream_kafka[dataframe]``).
        """
        from pyspark.sql import SparkSession

        from dstream_kafka.sql.frame import build_dataframe, check_raw_bytes

        if schema is not None or sampleRatio is not None:
            return super().toDF(schema, sampleRatio)
        check_raw_bytes(self._kafka_config)
        if spark is None:
            spark = SparkSession.builder.getOrCreate()
        return build_dataframe(spark, self._kafka_config, self._offset_ranges,
                               bool(includeHeaders), self._settings, self._lost_ranges)

    def preferredLocations(self, split: int) -> list[str]:
        """Return the Spark preferred locations of partition ``split`` (read from the JVM)."""
        return source_preferred_locations(self._source_jrdd, split)

    @property
    def readSettings(self) -> ReadSettings:
        """The executor settings shipped with every task of this RDD."""
        return self._settings

    def count(self) -> int:
        """Return the number of records: ``sum(range.count())`` with no job in strict mode."""
        if not self._settings.strict:
            return super().count()
        return sum(r.count() for r in self._offset_ranges)

    def countApprox(self, timeout: int, confidence: float = 0.95) -> int:
        """Return :meth:`count`, exact and without a job in strict mode."""
        if not self._settings.strict:
            return super().countApprox(timeout, confidence)
        return self.count()

    def isEmpty(self) -> bool:
        """Return True when no range holds a record (no job in strict mode)."""
        if not self._settings.strict:
            return super().isEmpty()
        return self.count() == 0

    def take(self, num: int) -> list[ConsumerRecord]:
        """Return the first ``num`` records in partition order.

        In strict mode each partition's share is known in advance (Spark's quota plan), so
        one job runs on only the partitions that contribute and each reads only its share.
        """
        if not self._settings.strict:
            return super().take(num)
        if num < 1:
            return []
        quotas: dict[int, int] = {}
        remaining = num
        for index, r in enumerate(self._offset_ranges):
            if remaining <= 0:
                break
            if r.count() > 0:
                quotas[index] = min(remaining, r.count())
                remaining -= quotas[index]
        if not quotas:
            return []

        def take_quota(split: int, records: Iterable[ConsumerRecord]) -> list[ConsumerRecord]:
            it = iter(records)
            try:
                return list(itertools.islice(it, quotas[split]))
            finally:
                close = getattr(it, "close", None)
                if close is not None:
                    close()  # releases the consumer now, not at garbage collection

        limited = self.mapPartitionsWithIndex(take_quota, preservesPartitioning=True)
        return self.ctx.runJob(limited, lambda it: it, list(quotas))

    def __repr__(self) -> str:
        more = "..." if len(self._offset_ranges) > 3 else ""
        return f"KafkaRDD[{len(self._offset_ranges)} ranges] {self._offset_ranges[:3]!r}{more}"


def build_kafka_rdd(
    sc: Any,
    executor_params: Mapping[str, Any],
    offset_ranges: Sequence[OffsetRange],
    preferred_hosts: Mapping[TopicPartition, str | None] | None = None,
    use_cache: bool | None = None,
    poll_timeout_ms: int | None = None,
    locations: Sequence[str | None] | None = None,
    settings: ReadSettings | None = None,
) -> KafkaRDD:
    """Build a :class:`KafkaRDD` without driver-side validation (for direct streams).

    Parameters
    ----------
    executor_params : mapping
        Output of :func:`~dstream_kafka.client.kafka_params.fix_kafka_params`.
    preferred_hosts : mapping, optional
        ``{TopicPartition: host}`` from the location strategy; placement falls back to all
        executors for partitions without one.
    use_cache : bool, optional
        ``None`` follows ``spark.streaming.kafka.consumer.cache.enabled``; restored
        checkpoints pass False (the same partition may be read by several threads).
    locations : sequence of (str or None), optional
        Precomputed preferred locations, one per range (skips executor lookup).
    settings : ReadSettings, optional
        Precomputed :func:`read_settings` (a stream reads them once); ``use_cache`` and
        ``poll_timeout_ms`` are then ignored.
    """
    if settings is None:
        settings = read_settings(sc, executor_params, use_cache, poll_timeout_ms)
    if locations is None:
        locations = preferred_locations_for(sc, offset_ranges, preferred_hosts)
    return KafkaRDD(sc, executor_params, offset_ranges, locations, settings)
