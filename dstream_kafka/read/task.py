"""The executor task of a Kafka RDD: read the records of its offset ranges through cached consumers.

Everything a task needs on an executor is here and nowhere else: the driver side
(:mod:`dstream_kafka.read.kafka_rdd`) builds one :func:`partition_reader` per RDD, carrying
its :class:`RangeTask` list and :class:`ReadSettings`, and Spark ships that function to the
executors, which import this module and the read path below it (consumer cache, counters,
backends) to run it: never the driver side, nor :mod:`dstream_kafka.ui`.
"""

from __future__ import annotations

import collections
import itertools
import logging
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any, Callable, NamedTuple, cast

from pyspark.accumulators import AccumulatorParam

from dstream_kafka.errors import FetchTimeoutError
from dstream_kafka.client.reachability import any_reachable
from dstream_kafka.read.backends import DEFAULT_BACKEND, LIBRDKAFKA_KEY
from dstream_kafka.read.consumer_cache import CacheKey, CacheSettings, acquire, cache_size, pre_position
from dstream_kafka.read.counters import counters_snapshot, report_cache_counters
from dstream_kafka.read.internal_consumer import RecordsDeletedError
from dstream_kafka.record import ConsumerRecord

__all__ = [
    "TASK_TIMES_KEPT",
    "LostRanges",
    "RangeTask",
    "ReadSettings",
    "TaskTimes",
    "partition_reader",
    "read_range",
    "task_time_accumulator",
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
        driver (:meth:`~dstream_kafka.read.kafka_rdd.KafkaRDD.lostOffsetRanges`) instead of
        failing the task.
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
    librdkafka : mapping or None
        The confluent-kafka backend's settings, translated once on the driver
        (:func:`~dstream_kafka.read.backends.check_backend`); None for kafka-python.
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
    librdkafka: Mapping[str, Any] | None = None


class RangeTask(NamedTuple):
    """One offset range as a task reads it: RDD partition ``split`` reads
    ``[fromOffset, untilOffset)`` of ``topic``-``partition``.

    A tuple, so a list of them pickles about as small as plain tuples (the class is named
    once per pickle). ``split`` is the RDD partition's index (``index`` is tuple's method).
    """

    split: int
    topic: str
    partition: int
    fromOffset: int
    untilOffset: int


def read_range(
    descriptor: Sequence[Any], kafka_config: Mapping[str, Any], settings: ReadSettings,
    on_lost: Callable[[tuple[str, int, int, int]], None] | None = None,
) -> Generator[ConsumerRecord, None, None]:
    """Yield the records of one range: a :class:`RangeTask` or a tuple
    ``(index, topic, partition, from, until)``.

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
        except FetchTimeoutError as timeout:
            reachable = any_reachable(_servers(kafka_config))
            if reachable and _partition_gone(kafka_config, topic, partition):
                # Deleted after the range was planned: every record of it is gone (a read
                # waits for them in vain, which is no compaction gap either).
                if settings.failOnDataLoss or on_lost is None:
                    raise RecordsDeletedError(
                        f"Topic partition {topic}-{partition} no longer exists in Kafka: it was "
                        f"deleted after the range [{from_offset}, {until_offset}) was planned, so "
                        f"records [{reached[0]}, {until_offset}) cannot be read; plan the read "
                        "again (recreate the topic or leave it out), or set failOnDataLoss=false "
                        "to skip them and record the loss",
                        topic, partition, reached[0], until_offset) from timeout
                on_lost((topic, partition, reached[0], until_offset))
                return
            if outage_ends is None:
                if settings.outageMs <= settings.pollTimeoutMs or reachable:
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


def _partition_gone(kafka_config: Mapping[str, Any], topic: str, partition: int) -> bool:
    """Whether fresh metadata lacks ``topic``'s ``partition`` (False when it cannot be had)."""
    from dstream_kafka.client.offset_reader import offset_reader

    try:
        with offset_reader(dict(kafka_config)) as reader:
            return partition not in reader.existing_partitions([topic])[topic]
    except Exception:  # no answer: the poll timeout's own error says more
        log.debug("Metadata of %s unknown after a poll timeout", topic, exc_info=True)
        return False


def _servers(kafka_config: Mapping[str, Any]) -> str:
    servers = kafka_config.get("bootstrap_servers") or kafka_config.get("bootstrap.servers") or ""
    return servers if isinstance(servers, str) else ",".join(map(str, servers))


def _read_plain(topic: str, partition: int, from_offset: int, until_offset: int,
                kafka_config: Mapping[str, Any], settings: ReadSettings, reached: list[int]
                ) -> Generator[ConsumerRecord, None, None]:
    if settings.librdkafka is not None:  # a new confluent-kafka client takes it as it is
        kafka_config = {**kafka_config, LIBRDKAFKA_KEY: settings.librdkafka}
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


def partition_reader(
    kafka_config: Mapping[str, Any], settings: ReadSettings, ranges: Sequence[tuple[Any, ...]],
    cache_counters: Any = None, losses: Any = None, task_times: Any = None, tag: int = 0,
) -> Callable[[int, Iterable[Any]], Iterator[ConsumerRecord]]:
    """Return the function an RDD maps its source partitions with: ``(split, elements)`` to
    the records of the ranges the elements ``(index, topic, partition)`` name.

    Parameters
    ----------
    kafka_config : mapping
        Executor consumer settings.
    settings : ReadSettings
    ranges : sequence of RangeTask or of 5-tuples
        Every range of the RDD, element ``i`` read by partition ``i``.
    cache_counters : Accumulator, optional
        Where each task adds what its worker's consumer-cache counters moved by.
    losses : Accumulator, optional
        Of :class:`LostRanges`: the ranges found deleted while reading (failOnDataLoss=false).
    task_times : Accumulator, optional
        Of :class:`TaskTimes`: each task that reaches the end of its records adds its wall time
        under ``tag``.
    tag : int
        The RDD's key in ``task_times``.
    """
    on_lost = None if losses is None else (lambda lost: losses.add([lost]))
    tasks = [RangeTask(*r) for r in ranges]  # plain 5-tuples too
    # split ranges (minPartitions) share a topic-partition: their split tells them apart
    seen = collections.Counter((t.topic, t.partition) for t in tasks)

    def read_partition(split: int, elements: Iterable[Any]) -> Iterator[ConsumerRecord]:
        started = time.monotonic()
        before = counters_snapshot()
        # Drain the input first: a Python worker whose input was not fully read is not reused,
        # and with it would go its cached consumers. The ranges are chained in C, so each
        # record passes through no Python frame but the range reader's.
        mine = []
        for index, topic, partition in elements:
            task = tasks[index]
            if (task.topic, task.partition) != (topic, partition):  # a source cached for others
                raise RuntimeError(f"partition {index} is {topic}-{partition}, its range is "
                                   f"{task.topic}-{task.partition}")
            mine.append(task)
        readers = [read_range(task, kafka_config, settings, on_lost) for task in mine]
        if settings.prePosition and settings.useCache and mine:
            # Before reading (the previous batch's guesses may have been wrong) and after.
            mover = _PrePositioner(settings, tasks, mine)
            readers = [mover.step(), *readers, mover.step()]
        if cache_counters is not None:  # the driver's sum of executor counters
            readers.append(report_cache_counters(cache_counters, before))
        if task_times is not None:
            name = ",".join(f"{t.topic}-{t.partition}" + (f" split {t.split}"
                                                          if seen[(t.topic, t.partition)] > 1 else "")
                            for t in mine) or f"split {split}"
            readers.append(_report_task_time(task_times, tag, split, name, started))
        return _ChainedReaders.of(readers)

    return read_partition


class _PrePositioner:
    """Pre-positions a worker's idle cached consumers of the RDD's other partitions
    (:func:`~dstream_kafka.read.consumer_cache.pre_position`); ranges of RDD partitions before this
    task's count as started, Spark starting a stage's tasks in partition order."""

    def __init__(self, settings: ReadSettings, ranges: Sequence[RangeTask],
                 mine: Sequence[RangeTask]) -> None:
        self.settings = settings
        self.ranges = ranges
        self.split = max(t.split for t in mine)
        self.own = {(t.topic, t.partition) for t in mine}  # this task's reads seek on their own
        self.spans: dict[tuple[str, int], tuple[int, int, bool]] | None = None

    def step(self) -> Generator[ConsumerRecord, None, None]:
        """A reader that yields nothing and moves the consumers once reached."""
        if cache_size() > 1:  # one consumer: this task's own
            if self.spans is None:
                self.spans = {(t.topic, t.partition): (t.fromOffset, t.untilOffset,
                                                       t.split < self.split)
                              for t in self.ranges if (t.topic, t.partition) not in self.own}
            try:
                pre_position(self.settings.groupId, self.spans,
                             fingerprint=self.settings.fingerprint, backend=self.settings.backend)
            except Exception:  # an optimisation: never the reason a task fails
                log.debug("Pre-positioning cached consumers failed", exc_info=True)
        yield from ()


class LostRanges(AccumulatorParam[list[tuple[str, int, int, int]]]):
    """Accumulates ``(topic, partition, from, until)`` tuples of ranges lost while reading.

    Here, not beside the RDD: an accumulator ships its parameter with every task, and the
    executor imports the parameter's module to load it.
    """

    def zero(self, value: list[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int]]:
        return []

    def addInPlace(self, value1: list[tuple[str, int, int, int]],
                   value2: list[tuple[str, int, int, int]]) -> list[tuple[str, int, int, int]]:
        value1.extend(value2)
        return value1


#: The driver keeps the task times of this many RDDs, the most recent (highest ids).
TASK_TIMES_KEPT = 64


class TaskTimes(AccumulatorParam[dict[int, list[tuple[int, str, float]]]]):
    """Accumulates ``{tag: [(split, name, ms), ...]}``: the wall time of each Kafka RDD task,
    keyed by its RDD's tag (an id growing with each RDD); only the :data:`TASK_TIMES_KEPT`
    highest tags are kept, so the driver's value stays bounded on a stream that runs for days.
    """

    def zero(self, value: dict[int, list[tuple[int, str, float]]]
             ) -> dict[int, list[tuple[int, str, float]]]:
        return {}

    def addInPlace(self, value1: dict[int, list[tuple[int, str, float]]],
                   value2: dict[int, list[tuple[int, str, float]]]
                   ) -> dict[int, list[tuple[int, str, float]]]:
        for tag, entries in value2.items():
            value1.setdefault(tag, []).extend(entries)
        for tag in sorted(value1)[:-TASK_TIMES_KEPT]:
            del value1[tag]
        return value1


_times_lock = threading.Lock()
_times: tuple[Any, Any] | None = None  # (SparkContext, its task-time accumulator)


def task_time_accumulator(sc: Any) -> Any:
    """Driver side: the :class:`TaskTimes` accumulator of ``sc`` (one per SparkContext)."""
    global _times
    with _times_lock:
        if _times is None or _times[0] is not sc:
            _times = (sc, sc.accumulator({}, TaskTimes()))
        return _times[1]


def _report_task_time(accumulator: Any, tag: int, split: int, name: str,
                      started: float) -> Generator[ConsumerRecord, None, None]:
    """A reader that yields nothing and, once reached, adds the task's wall time so far: from
    its start to the end of its records, so the processing Spark pipelines after the read
    (the user's ``map``) counts too."""
    accumulator.add({tag: [(split, name, (time.monotonic() - started) * 1000.0)]})
    yield from ()
