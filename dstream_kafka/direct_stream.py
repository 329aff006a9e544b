"""The Kafka direct stream: where each batch is planned and where its offsets are committed.

Per batch, on the driver's scheduler thread (Spark's ``DirectKafkaInputDStream.compute``):

1. a paused ``poll(0)`` keeps the driver consumer in its group and applies rebalances;
2. partitions that appeared start at their stored/committed offset, else at their first offset;
   partitions that were revoked fail the batch (another stream uses the same ``group.id``);
3. the latest offsets are clamped by the rate limits (``maxRatePerPartition``, backpressure,
   ``maxOffsetsPerTrigger``) into this batch's ``OffsetRange`` list, one per partition;
4. the offset store's write-ahead log records the ranges, then a :class:`KafkaRDD` is built.

After every output operation of the batch has finished, :meth:`on_batch_completed` commits the
ranges to the offset store, sends the ``commitAsync`` queue to Kafka (without waiting for the
answer) and records the progress.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from dstream_kafka.commit_queue import COMMIT_WAIT_ON_STOP_S, CommitCallback, CommitQueue
from dstream_kafka.consumer_strategy import ConsumerStrategy, seek_back
from dstream_kafka.errors import (
    BrokerTimeoutError,
    ConfigurationError,
    DataLossError,
    PartitionsRevokedError,
)
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.placement import LocationStrategy, PreferBrokers
from dstream_kafka.rate import (
    DefaultPerPartitionConfig,
    PerPartitionConfig,
    RateController,
    clamp,
    create_rate_estimator,
    estimated_rate,
    max_offsets_per_trigger_limit,
)
from dstream_kafka.streaming.input import InputDStream

__all__ = ["DirectKafkaInputDStream", "BatchProgress", "CommitCallback"]

logger = logging.getLogger(__name__)

#: Longest time one batch's driver poll waits for a group rebalance to complete.
REJOIN_TIMEOUT_S = 30.0

#: Longest wait for the broker's answer to a driver look-up that needs the group coordinator
#: (Kafka's default.api.timeout.ms); without one, kafka-python waits for ever.
API_TIMEOUT_MS = 60_000


_REVOKED = (
    "Previously tracked partitions {parts} been revoked by Kafka because of consumer rebalance. "
    "This is mostly due to another stream with same group id joined, please check if there're "
    "different streaming application misconfigure to use same group id. Fundamentally "
    "different stream should use different group id"
)


@dataclass(frozen=True)
class BatchProgress:
    """What one completed batch read and how long it took (all times in milliseconds).

    ``offsetsBehindLatest`` is, per partition, how far this batch's until offset stayed behind
    the latest offset seen when the batch was planned (0 when the batch caught up). ``planMs``
    is the driver time spent planning the batch (latest offsets, rate limits, write-ahead log,
    RDD creation); ``commitMs`` the time spent committing it (offset store and commitAsync).
    """

    batchTime: int
    ranges: tuple[OffsetRange, ...]
    numRecords: int
    inputRate: float
    processingRate: float
    schedulingDelay: int | None
    processingDelay: int | None
    offsetsBehindLatest: dict[TopicPartition, int] = field(default_factory=dict)
    planMs: float = 0.0
    commitMs: float = 0.0

    def describe(self) -> str:
        """Spark's input description: one line per non-empty range, largest first."""
        lines = [f"topic: {r.topic}\tpartition: {r.partition}\toffsets: {r.fromOffset} to "
                 f"{r.untilOffset}\tcount: {r.count()}"
                 for r in sorted(self.ranges, key=lambda r: -r.count()) if r.count()]
        return "\n".join(lines)


class DirectKafkaInputDStream(InputDStream):
    """A stream of :class:`~dstream_kafka.record.ConsumerRecord` RDDs, one Kafka partition per
    Spark partition, read exactly once per batch between committed offsets.

    Create it with :meth:`KafkaUtils.createDirectStream`. ``commitAsync`` is thread-safe.

    Attributes
    ----------
    currentOffsets : dict
        The next offset to read per partition (the driver position; advanced when a batch is
        planned, before its jobs run, as in Spark).
    rateController : RateController or None
        Set when ``spark.streaming.backpressure.enabled``; replaceable (tests use a constant
        estimator, as Spark's suite does).
    initialRate : int
        ``spark.streaming.backpressure.initialRate``: the rate used until the estimator has one.
    """

    def __init__(self, ssc: Any, locationStrategy: LocationStrategy, consumerStrategy: ConsumerStrategy,
                 perPartitionConfig: PerPartitionConfig | None = None, offsetStore: Any = None,
                 maxOffsetsPerTrigger: int | None = None, failOnDataLoss: bool = True) -> None:
        if not isinstance(consumerStrategy, ConsumerStrategy):
            raise ConfigurationError(
                "consumerStrategy must come from ConsumerStrategies.Subscribe/SubscribePattern/Assign "
                f"or subclass ConsumerStrategy, got {type(consumerStrategy).__name__}")
        if not isinstance(locationStrategy, LocationStrategy):
            raise ConfigurationError(
                "locationStrategy must be LocationStrategies.PreferConsistent, PreferBrokers or "
                f"PreferFixed(hostMap), got {type(locationStrategy).__name__}")
        if maxOffsetsPerTrigger is not None and (
                isinstance(maxOffsetsPerTrigger, bool) or not isinstance(maxOffsetsPerTrigger, int)
                or maxOffsetsPerTrigger <= 0):
            raise ConfigurationError(
                f"maxOffsetsPerTrigger must be a positive int, got {maxOffsetsPerTrigger!r}")
        super().__init__(ssc)
        conf = ssc.sparkContext.getConf()
        self.locationStrategy = locationStrategy
        self.consumerStrategy = consumerStrategy
        self.perPartitionConfig = perPartitionConfig or DefaultPerPartitionConfig(conf)
        self.maxOffsetsPerTrigger = maxOffsetsPerTrigger
        self.failOnDataLoss = bool(failOnDataLoss)
        self.offsetStore = offsetStore
        self._group_id = _group_of(consumerStrategy)
        from dstream_kafka.kafka_params import fix_kafka_params

        # Fixed once per stream (Spark does it when the stream is created), not per batch.
        self._executor_params = fix_kafka_params(consumerStrategy.executorKafkaParams)
        self._conf = conf
        self._consumer: Any = None
        self._consumer_lock = threading.RLock()
        self.currentOffsets: dict[TopicPartition, int] = {}
        # Where partitions continue that the store (or a re-run batch) knows but the group has
        # not assigned to this driver yet, e.g. while a killed driver still holds them.
        self._unassigned_offsets: dict[TopicPartition, int] = {}
        self._replay: tuple[int, list[OffsetRange]] | None = None
        self._commits = CommitQueue(self._group_id)
        self._batches: dict[int, tuple[list[OffsetRange], dict[TopicPartition, int]]] = {}
        self._plan_ms: dict[int, float] = {}
        # Engine batch time -> the batch time the offset store knows it by (differs only for a
        # replayed uncommitted batch, which keeps its original time in the store).
        self._store_times: dict[int, int] = {}
        self._first_start_pending = False
        self.recentProgress: collections.deque[BatchProgress] = collections.deque(maxlen=100)
        self._progress_listeners: list[Callable[[BatchProgress], None]] = []
        self.rateController: RateController | None = None
        from dstream_kafka.config import SparkConfReader

        reader = SparkConfReader(conf)
        if reader.backpressure_enabled:
            estimator = create_rate_estimator(conf, int(ssc.batch_duration * 1000))
            self.rateController = RateController(self.id, estimator)
        self.initialRate = reader.backpressure_initial_rate
        self._use_cache = reader.consumer_cache_enabled
        self._read_settings: Any = None
        if offsetStore is not None and self._group_id is None:
            raise ConfigurationError(
                "an offset store needs kafkaParams['group.id'] to know whose offsets to keep; "
                "set it to a name for this application")
        # Whose offsets the store keeps: the Kafka group, or (checkpoint folder, no group) the
        # stream itself.
        self._store_group = self._group_id or f"stream-{self.id}"

    # ------------------------------------------------------------------ driver consumer
    @property
    def name(self) -> str:
        return f"Kafka 0.10 direct stream [{self.id}]"

    def _driver(self) -> Any:
        with self._consumer_lock:
            if self._consumer is None:
                self._consumer = self.consumerStrategy.onStart(dict(self.currentOffsets))
                if self.offsetStore is not None:
                    # While the driver is the group's member, the broker refuses commits from
                    # any other client of that group: stores commit through this consumer.
                    self.offsetStore.bind_consumer(self._consumer, self._consumer_lock)
            return self._consumer

    def _paranoid_poll(self) -> None:
        consumer = self._driver()
        assigned = consumer.assignment()
        if assigned:
            consumer.pause(*assigned)
        records = consumer.poll(timeout_ms=0)
        # poll(0) cannot complete a group rejoin (JoinGroup/SyncGroup need round trips), so
        # when another member joined, poll briefly until the rebalance is through; otherwise
        # the group would wait for us until max.poll.interval.ms.
        deadline = time.monotonic() + REJOIN_TIMEOUT_S
        while _needs_rejoin(consumer) and time.monotonic() < deadline:
            records = {**records, **consumer.poll(timeout_ms=100)}
        if records:
            # A poll should not return data for paused partitions; if it did, undo it so the
            # driver's position never moves past what executors will read.
            seek_back(consumer, records)

    def _assignment(self) -> set[TopicPartition]:
        return {TopicPartition(tp.topic, tp.partition) for tp in self._driver().assignment()}

    def start(self) -> None:
        stored: dict[TopicPartition, int] = {}
        layout = self.checkpoint_layout
        if self.offsetStore is None and layout is not None:
            # ssc.checkpoint(dir) without an explicit store: the offsets log lives in the
            # checkpoint folder, so getOrCreate resumes exactly where the last run committed.
            from dstream_kafka.stores import CheckpointOffsetStore

            self.offsetStore = CheckpointOffsetStore(f"{layout.root.rstrip('/')}/sources/{self.id}",
                                                     spark_context=self._sc)
        if self.offsetStore is not None:
            stored = self.offsetStore.load(self._store_group, _topics_of(self.consumerStrategy))
            pending = self.offsetStore.pending(self._store_group)
            if pending is not None:
                # A batch was planned but never committed: re-run exactly its ranges first.
                self._replay = (pending.batch_time_ms, list(pending.ranges))
                logger.warning("Re-running uncommitted batch %s over %s", pending.batch_time_ms,
                               list(pending.ranges))
        self.currentOffsets = dict(stored)
        consumer = self._driver()
        self._paranoid_poll()
        from kafka import TopicPartition as KTP

        assigned = self._assignment()
        # If the group handed out nothing yet (a slow join), partitions that arrive later are
        # still this first start's: they begin at the strategy's offsets / auto.offset.reset.
        self._first_start_pending = not stored and not assigned
        for tp in sorted(set(self.currentOffsets) - assigned):
            self._forget_unassigned(tp)
        for tp in assigned:
            if tp not in self.currentOffsets:
                self.currentOffsets[tp] = self._start_offset(tp, first_start=not stored)
        if stored:
            self._check_retention(self.currentOffsets)
        for tp, off in self.currentOffsets.items():
            consumer.seek(KTP(tp.topic, tp.partition), off)

    def _forget_unassigned(self, tp: TopicPartition) -> None:
        """Drop a stored partition the driver was not given; a vanished one is data loss."""
        off = self.currentOffsets.pop(tp)
        existing = self._driver().partitions_for_topic(tp.topic) or set()
        if tp.partition in existing:
            logger.warning("Stored offset %s of %s-%s is not read by this stream (not assigned "
                           "to it); leaving it as it is", off, tp.topic, tp.partition)
            self._unassigned_offsets[tp] = off  # where it continues if it is assigned later
            return
        problem = (f"partition {tp.topic}-{tp.partition} has stored offset {off} for group "
                   f"{self._store_group} but no longer exists in Kafka (topic deleted or recreated)")
        if self.failOnDataLoss:
            raise DataLossError(problem + "; restore it, or set failOnDataLoss=False to continue "
                                "without it (the loss is recorded in the offset store)")
        logger.warning("%s; continuing without it (failOnDataLoss=False)", problem)
        if self.offsetStore is not None:
            self.offsetStore.record_data_loss(self._store_group, tp, off, off, None)

    def _start_offset(self, tp: TopicPartition, first_start: bool) -> int:
        """Where a partition without a stored offset starts.

        On a first start: the strategy's explicit offset, else the position Kafka gives the
        driver consumer (committed offset, else ``auto.offset.reset``). A partition that appears
        later starts where the offset store (or a re-run batch) left it when the group assigned
        it only after the start, else at its committed offset, else at its first offset.
        """
        from kafka import TopicPartition as KTP

        consumer = self._driver()
        ktp = KTP(tp.topic, tp.partition)
        explicit = getattr(self.consumerStrategy, "offsets", {})
        if tp in explicit:
            return explicit[tp]
        if tp in self._unassigned_offsets:
            # Stored (or re-run) before the group gave it to us: the store's offset wins over
            # Kafka's committed offset, which a store other than Kafka never moves.
            return self._unassigned_offsets.pop(tp)
        from kafka.errors import KafkaTimeoutError

        if first_start:
            try:
                return int(consumer.position(ktp, timeout_ms=API_TIMEOUT_MS))
            except KafkaTimeoutError as exc:
                raise _no_answer(f"the starting position of {tp.topic}-{tp.partition}") from exc
            except Exception as exc:
                raise ConfigurationError(
                    f"No starting offset for {tp.topic}-{tp.partition}: it has no committed offset "
                    "and auto.offset.reset is 'none'; give explicit offsets to the consumer strategy "
                    "or set auto.offset.reset to 'earliest' or 'latest'") from exc
        try:
            committed = consumer.committed(ktp, timeout_ms=API_TIMEOUT_MS) if self._group_id else None
        except KafkaTimeoutError as exc:
            raise _no_answer(f"the committed offset of {tp.topic}-{tp.partition}") from exc
        if committed is not None:
            return int(committed)
        return int(consumer.beginning_offsets([ktp])[ktp])

    def _check_retention(self, offsets: Mapping[TopicPartition, int]) -> None:
        from kafka import TopicPartition as KTP

        consumer = self._driver()
        ktps = [KTP(tp.topic, tp.partition) for tp in offsets]
        earliest = consumer.beginning_offsets(ktps)
        latest = consumer.end_offsets(ktps)
        for tp, off in offsets.items():
            ktp = KTP(tp.topic, tp.partition)
            first, last = int(earliest[ktp]), int(latest[ktp])
            if first <= off <= last:
                continue
            problem = (f"stored offset {off} of {tp.topic}-{tp.partition} for group {self._group_id} "
                       f"is outside the log: earliest available {first}, latest {last}")
            if self.failOnDataLoss or off > last:
                raise DataLossError(
                    problem + ". Records were deleted (retention) or the topic was recreated. "
                    "Restore the data, or set failOnDataLoss=False to continue from the earliest "
                    "offset and record the lost range in the offset store.")
            logger.warning("%s; continuing from %s (failOnDataLoss=False)", problem, first)
            if self.offsetStore is not None:
                self.offsetStore.record_data_loss(self._store_group, tp, off, first, None)
            self.currentOffsets[tp] = first

    def latestOffsets(self) -> dict[TopicPartition, int]:
        """Return the latest offset of every assigned partition, tracking new and revoked ones."""
        from kafka import TopicPartition as KTP

        self._paranoid_poll()
        parts = self._assignment()
        listener = getattr(self._driver(), "_dstream_listener", None)
        revoked = set(self.currentOffsets) - parts
        if revoked:
            raise PartitionsRevokedError(_REVOKED.format(parts=sorted(revoked)))
        first_start = self._first_start_pending
        for tp in sorted(parts - set(self.currentOffsets)):
            self.currentOffsets[tp] = self._start_offset(tp, first_start=first_start)
            self._first_start_pending = False
            logger.info("New partition %s-%s starts at offset %s", tp.topic, tp.partition,
                        self.currentOffsets[tp])
        if listener is not None:
            listener.revoked.clear()
        ends = self._driver().end_offsets([KTP(tp.topic, tp.partition) for tp in parts])
        return {TopicPartition(tp.topic, tp.partition): int(off) for tp, off in ends.items()}

    def _clamp(self, latest: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        current = {tp: self.currentOffsets[tp] for tp in latest}
        rate = estimated_rate(self.rateController, self.initialRate)
        until = clamp(latest, current, self._ssc.batch_duration, self.perPartitionConfig, rate)
        if self.maxOffsetsPerTrigger is not None:
            capped = max_offsets_per_trigger_limit(self.maxOffsetsPerTrigger, current, until)
            until = {tp: min(until[tp], capped[tp]) for tp in until}
        return until

    # ------------------------------------------------------------------ batches
    def compute(self, batch_time: int) -> Any:
        started = time.perf_counter()
        self._commits.deliver()
        with self._consumer_lock:
            latest = self.latestOffsets()
            replaying = False
            if self._replay is not None:
                replaying = True
                replay_time, ranges = self._replay
                self._replay = None
                self._store_times[batch_time] = replay_time
                until = {r.topicPartition(): r.untilOffset for r in ranges}
                for r in ranges:
                    self.currentOffsets[r.topicPartition()] = r.fromOffset
                # Partitions the replayed batch did not know yet start from here next batch.
                until.update({tp: self.currentOffsets[tp] for tp in latest if tp not in until})
            else:
                until = self._clamp(latest)
            ranges = [OffsetRange(tp.topic, tp.partition, self.currentOffsets[tp], until[tp])
                      for tp in sorted(until)]
            store_time = self._store_times.get(batch_time, batch_time)
            if self.offsetStore is not None:
                self.offsetStore.plan(self._store_group, store_time, ranges)
            rdd = self._make_rdd(ranges)
            behind = {tp: max(latest.get(tp, until[tp]) - until[tp], 0) for tp in until}
            self._batches[batch_time] = (ranges, behind)
            self._plan_ms[batch_time] = (time.perf_counter() - started) * 1000.0
            self.report_input_info(batch_time, sum(r.count() for r in ranges), {
                "offsets": ranges,
                "Description": BatchProgress(batch_time, tuple(ranges), 0, 0.0, 0.0, None, None).describe(),
            })
            self.currentOffsets.update(until)
            if replaying:
                # The re-run batch may cover partitions the group has not assigned to this
                # driver yet: remember where they continue rather than track them, or the next
                # batch would take them for revoked.
                for tp in [tp for tp in until if tp not in latest]:
                    self._unassigned_offsets[tp] = self.currentOffsets.pop(tp)
            return rdd

    def _make_rdd(self, ranges: Sequence[OffsetRange]) -> Any:
        from dstream_kafka.kafka_rdd import build_kafka_rdd, read_settings
        from dstream_kafka.placement import preferred_hosts_for

        leader_lookup = self._leader_host if self.locationStrategy is PreferBrokers else None
        hosts = preferred_hosts_for(self.locationStrategy, [r.topicPartition() for r in ranges],
                                    leader_lookup)
        if self._read_settings is None:
            # The SparkConf is fixed once the context runs: read it for the first batch only.
            self._read_settings = read_settings(self._conf, self._executor_params, self._use_cache)
        return build_kafka_rdd(self._sc, self._executor_params, list(ranges), hosts,
                               settings=self._read_settings)

    def _leader_host(self, tp: TopicPartition) -> str | None:
        client = self._driver()._client
        leader = client.cluster.leader_for_partition(tp)
        if leader is None or leader < 0:
            return None
        broker = client.cluster.broker_metadata(leader)
        return broker.host if broker is not None else None

    def on_batch_completed(self, batch_time: int, batch_info: Any) -> None:
        ranges, behind = self._batches.pop(batch_time, ([], {}))
        store_time = self._store_times.pop(batch_time, batch_time)
        started = time.perf_counter()
        if self.offsetStore is not None:
            committed_in = getattr(self.offsetStore, "committed_in", None)
            if not (committed_in and committed_in(self._store_group, store_time)):
                self.offsetStore.commit(self._store_group, store_time, ranges)
        self._commits.send(self._commit_async)
        commit_ms = (time.perf_counter() - started) * 1000.0
        self._record_progress(batch_time, ranges, behind, batch_info,
                              self._plan_ms.pop(batch_time, 0.0), commit_ms)

    def on_batch_failed(self, batch_time: int, error: BaseException) -> None:
        # Nothing is committed for a failed batch; the next start re-reads it.
        self._batches.pop(batch_time, None)
        self._plan_ms.pop(batch_time, None)
        self._store_times.pop(batch_time, None)

    def _record_progress(self, batch_time: int, ranges: list[OffsetRange],
                         behind: dict[TopicPartition, int], info: Any, plan_ms: float,
                         commit_ms: float) -> None:
        records = sum(r.count() for r in ranges)
        processing = getattr(info, "processing_delay", None)
        scheduling = getattr(info, "scheduling_delay", None)
        progress = BatchProgress(
            batchTime=batch_time, ranges=tuple(ranges), numRecords=records,
            inputRate=records / self._ssc.batch_duration if self._ssc.batch_duration else 0.0,
            processingRate=(records * 1000.0 / processing) if processing else 0.0,
            schedulingDelay=scheduling, processingDelay=processing, offsetsBehindLatest=behind,
            planMs=plan_ms, commitMs=commit_ms,
        )
        self.recentProgress.append(progress)
        if self.rateController is not None:
            end = getattr(info, "processing_end_time", None)
            self.rateController.on_batch_completed(end, records, processing, scheduling)
        for listener in list(self._progress_listeners):
            try:
                listener(progress)
            except Exception:
                logger.exception("Progress listener %r failed", listener)

    @property
    def lastProgress(self) -> BatchProgress | None:
        """The progress of the most recent completed batch, or None."""
        return self.recentProgress[-1] if self.recentProgress else None

    def addProgressListener(self, listener: Callable[[BatchProgress], None]) -> None:
        """Call ``listener(progress)`` on the scheduler thread after each completed batch."""
        self._progress_listeners.append(listener)

    # ------------------------------------------------------------------ commits
    def transaction(self, batch_time: Any) -> Any:
        """Open the offset store's transaction for one batch, to write results in it.

        ``batch_time`` is the time ``foreachRDD(lambda time, rdd: ...)`` received (a datetime)
        or epoch milliseconds. On normal exit the batch's offsets are committed in the same
        database transaction as everything written through the returned object; an exception
        rolls both back. Needs a transactional store (``OffsetStores.sqlite``/``postgres``).

        Examples
        --------
        >>> def save(time, rdd):                                      # doctest: +SKIP
        ...     rows = rdd.collect()
        ...     with stream.transaction(time) as tx:
        ...         tx.executemany("INSERT INTO counts VALUES (?, ?)", rows)
        >>> counts.foreachRDD(save)                                   # doctest: +SKIP
        """
        from dstream_kafka.streaming import datetime_to_ms

        store = self.offsetStore
        if store is None or not getattr(store, "transactional", False):
            raise ConfigurationError(
                "stream.transaction() needs a transactional offset store; create the stream with "
                "offsetStore=OffsetStores.sqlite(path) or OffsetStores.postgres(dsn)")
        ms = batch_time if isinstance(batch_time, int) else datetime_to_ms(batch_time)
        if ms not in self._batches:
            raise ConfigurationError(
                f"no running batch at {batch_time!r}: call stream.transaction(time) with the time "
                "passed to foreachRDD, while that batch's output runs")
        return store.transaction(self._store_group, self._store_times.get(ms, ms), self._batches[ms][0])

    def commitAsync(self, offsetRanges: Sequence[OffsetRange], callback: CommitCallback | None = None) -> None:
        """Queue offsets to commit to the user's ``group.id``; thread-safe, never blocks.

        The queue is sent after every output operation of the current batch has finished, as one
        asynchronous commit of the highest ``untilOffset`` per partition through the driver
        consumer; the batch does not wait for the broker's answer (Spark sends its queue with
        ``commitAsync`` in the next batch's planning and does not wait either). Only the most
        recent ``callback`` is kept (as in Spark); it gets ``(offsets, None)`` on success and
        ``(offsets, error)`` on failure, on the stream's planning thread: when the next batch is
        planned, or when the stream stops, which first waits for commits still in flight.
        """
        ranges = list(offsetRanges)
        for r in ranges:
            if not isinstance(r, OffsetRange):
                raise ConfigurationError(f"commitAsync takes OffsetRange values, got {type(r).__name__}")
        if self._group_id is None:
            raise ConfigurationError("commitAsync needs kafkaParams['group.id'] to commit to")
        self._commits.add(ranges, callback)

    def _commit_async(self, offsets: dict) -> Any:
        with self._consumer_lock:
            return self._driver().commit_async(offsets)

    # ------------------------------------------------------------------ checkpoints and stop
    def checkpoint_data(self, batch_time: int) -> dict | None:
        # Describe batch_time itself: later batches may be planned already, so the driver
        # position (currentOffsets) can be ahead of what this checkpoint covers.
        ranges = self._batches.get(batch_time, ([], {}))[0]
        return {"currentOffsets": [[r.topic, r.partition, r.untilOffset] for r in ranges]}

    def restore_checkpoint_data(self, data: dict) -> None:
        if self.offsetStore is None and data:
            self.currentOffsets = {TopicPartition(t, p): int(o) for t, p, o in data.get("currentOffsets", [])}

    def stop(self) -> None:
        if self.rateController is not None:
            self.rateController.stop(wait=False)
        # Commits sent for finished batches complete before the consumer goes (Kafka's close
        # waits for in-flight async commits too), and their callbacks run.
        self._commits.deliver(wait_s=COMMIT_WAIT_ON_STOP_S)
        with self._consumer_lock:
            if self._consumer is not None:
                try:
                    self._consumer.close(autocommit=False)
                finally:
                    self._consumer = None
        if self.offsetStore is not None:
            self.offsetStore.close()

    def persist(self, *args: Any, **kwargs: Any) -> Any:
        # Our records are plain tuples, so unlike Spark's ConsumerRecord they persist fine.
        return super().persist(*args, **kwargs)


def _no_answer(what: str) -> BrokerTimeoutError:
    return BrokerTimeoutError(
        f"Kafka did not return {what} within {API_TIMEOUT_MS // 1000} s (the group coordinator "
        "did not answer); check that the brokers in bootstrap.servers are up and reachable")


def _needs_rejoin(consumer: Any) -> bool:
    # kafka-python has no public "rebalance pending" query; the coordinator knows.
    coordinator = getattr(consumer, "_coordinator", None)
    try:
        return bool(coordinator is not None and coordinator.need_rejoin())
    except Exception:
        return False


def _group_of(strategy: ConsumerStrategy) -> str | None:
    params = strategy.executorKafkaParams
    group = params.get("group.id") or params.get("group_id")
    return str(group) if group else None


def _topics_of(strategy: ConsumerStrategy) -> list[str] | None:
    topics = getattr(strategy, "topics", None)
    if topics:
        return list(topics)
    tps = getattr(strategy, "topicPartitions", None)
    if tps:
        return sorted({tp.topic for tp in tps})
    return None
