"""``KafkaRDD``: one RDD partition per offset range, read by executors through cached consumers.

The RDD is built on a JVM ``SparkContext.makeRDD`` of ``(index, topic, partition)`` elements,
one per partition, each with its preferred executor, so placement is real Spark scheduling
information (``getPreferredLocs`` reports it); that source is cached and reused by later RDDs
of the same partitions and locations. A Python function, which carries the offsets, maps each
element to the records of its range; transformations (``map``, ``filter``, ...) pipeline onto
it and return plain RDDs. Partition ``i`` reads ``offsetRanges()[i]``.

Records are :class:`~dstream_kafka.record.ConsumerRecord` tuples, which pickle, so unlike
Spark's ``KafkaRDD`` this RDD may be persisted or windowed without mapping first.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
import weakref
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Callable, NamedTuple, cast

from pyspark.accumulators import AccumulatorParam

from dstream_kafka._spark_internals import (
    PipelinedRDD,
    live_conf,
    located_source,
    python_rdd,
    source_preferred_locations,
)
from dstream_kafka.read.backends import CONFLUENT, DEFAULT_BACKEND, check_backend
from dstream_kafka.config import SparkConfReader
from dstream_kafka.read.consumer_cache import CacheKey, CacheSettings, acquire, cache_size, pre_position
from dstream_kafka.errors import ConfigurationError, FetchTimeoutError
from dstream_kafka.read.internal_consumer import RecordsDeletedError, counters_snapshot
from dstream_kafka.client.latest_offsets import any_reachable
from dstream_kafka.client.kafka_params import params_fingerprint
from dstream_kafka.ui.metrics import cache_accumulator, report_cache_counters
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.read.placement import preferred_locations_for
from dstream_kafka.record import ConsumerRecord

__all__ = [
    "KafkaRDD",
    "ReadSettings",
    "build_kafka_rdd",
    "read_range",
    "read_settings",
]

log = logging.getLogger(__name__)


class ReadSettings(NamedTuple):
    """What executors need besides the Kafka parameters; fixed on the driver per RDD.

    Attributes
    ----------
    groupId : str
        Executor group id (``spark-executor-<group.id>``), the cache key's first part.
    pollTimeoutMs : int
        ``spark.streaming.kafka.consumer.poll.ms``, else ``spark.network.timeout``.
    strict : bool
        False when ``spark.streaming.kafka.allowNonConsecutiveOffsets`` is true.
    useCache : bool
        Read through the executor consumer cache.
    cache : CacheSettings
    fingerprint : str
        Digest of the Kafka parameters (cached consumers built from others are replaced).
    backend : str
        ``spark.streaming.kafka.consumer.backend``: the executor client library,
        ``kafka-python`` (default) or ``confluent-kafka``.
    failOnDataLoss : bool
        False: records deleted after the range was planned are skipped and reported to the
        driver (:meth:`KafkaRDD.lostOffsetRanges`) instead of failing the task.
    outageMs : int
        How long a stream's read waits in all for a broker that accepts no connection before
        it fails: the planning side's bound, ``(spark.streaming.kafka.maxRetries + 1) x
        lookupTimeout + maxRetries x retryBackoff`` (0: fail after one poll timeout, as a
        ``createRDD`` read does).
    prePosition : bool
        After each task, move the worker's idle cached consumers of the RDD's other partitions
        to where their next read starts (:func:`~dstream_kafka.read.consumer_cache.pre_position`):
        true for direct streams on the confluent-kafka backend, whose client fetches in the
        background, with ``spark.streaming.kafka.consumer.cache.prePosition`` (default true).
    """

    groupId: str
    pollTimeoutMs: int
    strict: bool = True
    useCache: bool = True
    cache: CacheSettings = CacheSettings()
    fingerprint: str = ""
    backend: str = DEFAULT_BACKEND
    failOnDataLoss: bool = True
    prePosition: bool = False
    outageMs: int = 0


def read_settings(
    sc: Any,
    executor_params: Mapping[str, Any],
    use_cache: bool | None = None,
    poll_timeout_ms: int | None = None,
    stream: bool = False,
) -> ReadSettings:
    """Read the executor settings on the driver (workers have no SparkConf).

    ``sc`` is a SparkContext (its live SparkConf is read) or the conf object itself: a
    direct stream passes the conf it reads its own settings from, so one stream reads one
    conf. ``use_cache=None`` takes ``spark.streaming.kafka.consumer.cache.enabled``;
    ``poll_timeout_ms=None`` takes ``spark.streaming.kafka.consumer.poll.ms`` (else
    ``spark.network.timeout``). ``stream`` marks a direct stream's RDDs, whose tasks
    pre-position cached confluent-kafka consumers unless
    ``spark.streaming.kafka.consumer.cache.prePosition`` is false. The consumer backend
    (``spark.streaming.kafka.consumer.backend``) is checked here, on the driver: selecting
    confluent-kafka without the package raises
    :class:`~dstream_kafka.errors.MissingDependencyError` before any job runs.
    """
    conf = SparkConfReader(live_conf(sc))
    backend = conf.consumer_backend
    check_backend(backend, executor_params)
    cache = CacheSettings(
        conf.cache_initial_capacity, conf.cache_max_capacity, conf.cache_load_factor
    ).validated()
    if poll_timeout_ms is not None and (
        isinstance(poll_timeout_ms, bool)
        or not isinstance(poll_timeout_ms, int)
        or poll_timeout_ms < 0
    ):
        raise ConfigurationError(
            f"pollTimeoutMs must be a whole number >= 0, got {poll_timeout_ms!r}"
        )
    return ReadSettings(
        groupId=str(executor_params.get("group_id")),
        pollTimeoutMs=conf.poll_timeout_ms if poll_timeout_ms is None else poll_timeout_ms,
        strict=not conf.allow_non_consecutive_offsets,
        useCache=conf.consumer_cache_enabled if use_cache is None else bool(use_cache),
        cache=cache,
        fingerprint=params_fingerprint(executor_params),
        backend=backend,
        # kafka-python fetches only inside a read: moving its consumers ahead saves nothing.
        prePosition=stream and backend == CONFLUENT and conf.consumer_cache_pre_position,
        outageMs=((conf.max_retries + 1) * conf.lookup_timeout_ms
                  + conf.max_retries * conf.retry_backoff_ms) if stream else 0,
    )


def read_range(
    descriptor: Sequence[Any], kafka_config: Mapping[str, Any], settings: ReadSettings,
    on_lost: Callable[[tuple[str, int, int, int]], None] | None = None,
) -> Generator[ConsumerRecord, None, None]:
    """Yield the records of one range descriptor ``(index, topic, partition, from, until)``.

    An empty range acquires no consumer. The consumer is released when the iteration ends,
    fails or is abandoned; after a failure it is discarded rather than cached. With
    ``settings.failOnDataLoss`` false, records deleted from Kafka after planning are skipped:
    ``on_lost((topic, partition, from, until))`` gets each lost range and reading goes on at
    the log start. A read that gets nothing within its poll timeout while no bootstrap server
    accepts a connection (an outage) goes on from where it stopped, with a new consumer, until
    ``settings.outageMs`` have passed since its first poll timeout began (also after the broker
    is back: it may still be loading its partitions); then the
    :class:`~dstream_kafka.errors.FetchTimeoutError` fails the task.
    """
    _, topic, partition, from_offset, until_offset = descriptor
    outage_ends: float | None = None
    while from_offset < until_offset:
        reached = [from_offset]
        try:
            yield from _read_plain(topic, partition, from_offset, until_offset, kafka_config,
                                   settings, reached)
            return
        except RecordsDeletedError as lost:
            if settings.failOnDataLoss or on_lost is None:
                raise
            resume = max(from_offset, min(lost.earliest, until_offset))
            on_lost((topic, partition, lost.offset, resume))
            from_offset = resume
        except FetchTimeoutError:
            if outage_ends is None:
                if settings.outageMs <= settings.pollTimeoutMs or any_reachable(_servers(kafka_config)):
                    raise  # no outage bound, or the broker is up and sends nothing
                outage_ends = time.monotonic() + (settings.outageMs - settings.pollTimeoutMs) / 1000.0
            if time.monotonic() >= outage_ends:
                raise  # a broker back from the outage may still load its partitions until then
            log.warning("No Kafka broker at %s accepts a connection; reading %s-%d from offset %d "
                        "again, for up to %.0f s more (the stream's outage bound: "
                        "spark.streaming.kafka.maxRetries, lookupTimeout, retryBackoff)",
                        _servers(kafka_config), topic, partition, reached[0],
                        outage_ends - time.monotonic())
            from_offset = reached[0]


def _servers(kafka_config: Mapping[str, Any]) -> str:
    servers = kafka_config.get("bootstrap_servers") or kafka_config.get("bootstrap.servers") or ""
    return servers if isinstance(servers, str) else ",".join(map(str, servers))


def _read_plain(topic: str, partition: int, from_offset: int, until_offset: int,
                kafka_config: Mapping[str, Any], settings: ReadSettings, reached: list[int]
                ) -> Generator[ConsumerRecord, None, None]:
    handle = acquire(
        CacheKey(settings.groupId, topic, partition),
        kafka_config,
        fingerprint=settings.fingerprint,
        settings=settings.cache,
        use_cache=settings.useCache,
        backend=settings.backend,
    )
    with handle:
        try:
            yield from handle.internal.iter_range(
                from_offset, until_offset, settings.pollTimeoutMs, settings.strict
            )
        except FetchTimeoutError:
            reached[0] = max(from_offset, handle.internal.next_offset)  # handed out before it
            raise


class _ChainedReaders(itertools.chain[ConsumerRecord]):
    """The records of several range readers, chained in C; :meth:`close` closes them all.

    A reader acquires its consumer when its first record is requested and releases it when
    it ends or is closed, so closing early (``take``) gives the consumer back at once.
    """

    readers: list[Generator[ConsumerRecord, None, None]]

    @classmethod
    def of(cls, readers: list[Generator[ConsumerRecord, None, None]]) -> _ChainedReaders:
        chained = cast(_ChainedReaders, cls.from_iterable(readers))  # from_iterable builds a cls
        chained.readers = readers
        return chained

    def close(self) -> None:
        for reader in self.readers:
            reader.close()


def _partition_reader(
    kafka_config: Mapping[str, Any], settings: ReadSettings, ranges: Sequence[tuple[Any, ...]],
    cache_counters: Any = None, losses: Any = None,
) -> Callable[[int, Iterable[Any]], Iterator[ConsumerRecord]]:
    # ``losses`` is a Spark accumulator of lost ranges (failOnDataLoss=false), else None.
    on_lost = None if losses is None else (lambda lost: losses.add([lost]))

    def read_partition(_split: int, elements: Iterable[Any]) -> Iterator[ConsumerRecord]:
        before = counters_snapshot()
        # Drain the input first: a Python worker whose input was not fully read is not reused,
        # and with it would go its cached consumers. The ranges are chained in C, so each
        # record passes through no Python frame but the range reader's.
        descriptors = []
        for index, topic, partition in elements:
            descriptor = ranges[index]
            if descriptor[1:3] != (topic, partition):  # a source cached for other partitions
                raise RuntimeError(f"partition {index} is {topic}-{partition}, its range is "
                                   f"{descriptor[1]}-{descriptor[2]}")
            descriptors.append(descriptor)
        readers = [read_range(descriptor, kafka_config, settings, on_lost)
                   for descriptor in descriptors]
        if settings.prePosition and settings.useCache and descriptors:
            # Before reading (the previous batch's guesses may have been wrong) and after.
            mover = _PrePositioner(settings, ranges, descriptors)
            readers = [mover.step(), *readers, mover.step()]
        if cache_counters is not None:  # the driver's sum of executor counters (metrics.py)
            readers.append(report_cache_counters(cache_counters, before))
        return _ChainedReaders.of(readers)

    return read_partition


class _PrePositioner:
    """Pre-positions a worker's idle cached consumers of the RDD's other partitions
    (:func:`~dstream_kafka.read.consumer_cache.pre_position`); ranges of RDD partitions before this
    task's count as started, Spark starting a stage's tasks in partition order."""

    def __init__(self, settings: ReadSettings, ranges: Sequence[tuple[Any, ...]],
                 descriptors: Sequence[tuple[Any, ...]]) -> None:
        self.settings = settings
        self.ranges = ranges
        self.index = max(d[0] for d in descriptors)
        self.own = {(d[1], d[2]) for d in descriptors}  # this task's reads seek on their own
        self.spans: dict[tuple[str, int], tuple[int, int, bool]] | None = None

    def step(self) -> Generator[ConsumerRecord, None, None]:
        """A reader that yields nothing and moves the consumers once reached."""
        if cache_size() > 1:  # one consumer: this task's own
            if self.spans is None:
                self.spans = {(d[1], d[2]): (d[3], d[4], d[0] < self.index) for d in self.ranges
                              if (d[1], d[2]) not in self.own}
            try:
                pre_position(self.settings.groupId, self.spans,
                             fingerprint=self.settings.fingerprint, backend=self.settings.backend)
            except Exception:  # an optimisation: never the reason a task fails
                log.debug("Pre-positioning cached consumers failed", exc_info=True)
        yield from ()


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
        descriptors = [
            (i, r.topic, r.partition, r.fromOffset, r.untilOffset) for i, r in enumerate(ranges)
        ]
        self._source_jrdd = _located_source(sc, [(r.topic, r.partition) for r in ranges], locations)
        source = python_rdd(self._source_jrdd, sc)
        # Ranges lost while reading come back to the driver through an accumulator.
        self._losses = None if settings.failOnDataLoss else sc.accumulator([], _LostRanges())
        reader = _partition_reader(dict(kafka_config), settings, descriptors,
                                   cache_accumulator(sc), self._losses)
        super().__init__(source, reader, True)
        self._offset_ranges = ranges
        self._settings = settings
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
        from dstream_kafka.read.placement import PreferConsistent, preferred_hosts_for

        ranges = list(offsetRanges)
        hosts = preferred_hosts_for(
            locationStrategy or PreferConsistent,
            [r.topicPartition() for r in ranges],
            leader_lookup,
        )
        return build_kafka_rdd(
            sc,
            fix_kafka_params(kafkaParams),
            ranges,
            hosts,
            use_cache=use_consumer_cache,
            poll_timeout_ms=poll_timeout_ms,
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


class _LostRanges(AccumulatorParam):
    """Accumulates ``(topic, partition, from, until)`` tuples of ranges lost while reading."""

    def zero(self, value: Any) -> list[tuple[str, int, int, int]]:
        return []

    def addInPlace(self, value1: Any, value2: Any) -> Any:
        value1.extend(value2)
        return value1


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
