"""The Kafka direct stream: where each batch is planned and where its offsets are committed.

Per batch, on the driver's scheduler thread (Spark's ``DirectKafkaInputDStream.compute``):

1. a metadata refresh finds new partitions and matching topics (a rejoin when they changed),
   and a paused ``poll(0)`` keeps the driver consumer in its group and applies rebalances;
2. partitions that appeared start at their stored/committed offset, else at their first offset;
   partitions that were revoked fail the batch (another stream uses the same ``group.id``);
3. the latest offsets are clamped by the rate limits (``maxRatePerPartition``, backpressure,
   ``maxOffsetsPerTrigger``) into this batch's ``OffsetRange`` list, one per partition;
4. the offset store's write-ahead log records the ranges, then a :class:`KafkaRDD` is built.

After every output operation of the batch has finished, :meth:`on_batch_completed` commits the
ranges to the offset store, sends the ``commitAsync`` queue to Kafka (without waiting for the
answer) and records the progress. Where partitions start and resume is
:mod:`dstream_kafka.plan.positions`; the driver consumer, the group's member, is
:mod:`dstream_kafka.plan.driver_consumer`; progress records are :mod:`dstream_kafka.plan.progress`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from dstream_kafka import _kafka_internals
from dstream_kafka.plan.bounded_run import BoundedRun, stop_when_all_done
from dstream_kafka.plan.backpressure import RateController, create_rate_estimator, estimated_rate
from dstream_kafka.plan.commit_queue import COMMIT_WAIT_ON_STOP_S, CommitCallback, CommitQueue
from dstream_kafka.config import SparkConfReader
from dstream_kafka.plan.consumer_strategy import Assign, ConsumerStrategy
from dstream_kafka.plan.driver_consumer import DriverConsumer, application_identity
from dstream_kafka.errors import BrokerTimeoutError, ConfigurationError
from dstream_kafka.monitor.lag import LagMonitor, log_end_lookup
from dstream_kafka.client.latest_offsets import latest_offsets
from dstream_kafka.client.reachability import any_reachable
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.read.placement import LocationStrategy, PreferBrokers, locations_for
from dstream_kafka.plan.progress import BatchProgress, ProgressAccessors, ProgressTracker, describe_ranges
from dstream_kafka.plan.rate import (
    DefaultPerPartitionConfig,
    PerPartitionConfig,
    TriggerGate,
    batch_ends,
)
from dstream_kafka.plan.positions import PartitionPositions
from dstream_kafka.plan.range_calculator import split_ranges
from dstream_kafka.plan.start_positions import API_TIMEOUT_MS
from dstream_kafka.plan.stream_options import StartOptions
from dstream_kafka.stores.base import check_offset_store
from dstream_kafka.streaming.input import InputDStream

if TYPE_CHECKING:
    from datetime import datetime

    from dstream_kafka.read.kafka_rdd import KafkaRDD

    from dstream_kafka.stores.base import OffsetStore
    from dstream_kafka.stores.transactional import TransactionalOffsetStore
    from dstream_kafka.streaming.context import StreamingContext
    from dstream_kafka.streaming.listener import BatchInfo

__all__ = ["API_TIMEOUT_MS", "BatchProgress", "CommitCallback", "DirectKafkaInputDStream"]

log = logging.getLogger(__name__)

#: With ``batchDuration=0``: the longest time between two look-ups for new partitions.
DISCOVERY_PERIOD_S = 1.0

class PlannedBatch(NamedTuple):
    """One engine batch as the stream planned it, kept until the batch completes or fails.

    Attributes
    ----------
    time : int
        The engine's batch time (epoch ms).
    storeTime : int
        The batch time the offset store knows the batch by: ``time``, except for a replayed
        uncommitted batch, which keeps its original time in the store.
    ranges : list of OffsetRange
    behind : dict
        Offsets between each partition's until offset and its latest offset when planned.
    planMs : float
        Driver time spent planning the batch.
    rdd : KafkaRDD or None
    """

    time: int
    storeTime: int
    ranges: list[OffsetRange]
    behind: dict[TopicPartition, int]
    planMs: float
    rdd: KafkaRDD | None

    @classmethod
    def unknown(cls, batch_time: int) -> PlannedBatch:
        """A batch this stream holds no plan of (its planning failed): no ranges to commit."""
        return cls(batch_time, batch_time, [], {}, 0.0, None)


class DirectKafkaInputDStream(ProgressAccessors, InputDStream[Any]):
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

    def __init__(self, ssc: StreamingContext, locationStrategy: LocationStrategy,
                 consumerStrategy: ConsumerStrategy,
                 perPartitionConfig: PerPartitionConfig | None = None,
                 offsetStore: OffsetStore | None = None, maxOffsetsPerTrigger: int | None = None,
                 failOnDataLoss: bool | None = None,
                 options: Mapping[str, Any] | None = None) -> None:
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
        start_options = StartOptions.parse(options, failOnDataLoss).checked(consumerStrategy)
        maxOffsetsPerTrigger = start_options.max_offsets(maxOffsetsPerTrigger)
        check_offset_store(offsetStore)
        # Every spark.* key this stream uses is read from this one copy of the SparkConf, and
        # every stream key is checked at once, before the stream joins the graph.
        conf = SparkConfReader(ssc.sparkContext.getConf())
        conf.check_stream_settings()
        super().__init__(ssc)
        self.startOptions = start_options
        self.locationStrategy = locationStrategy
        self.consumerStrategy = consumerStrategy
        self.perPartitionConfig = perPartitionConfig or DefaultPerPartitionConfig(conf)
        self.maxOffsetsPerTrigger = maxOffsetsPerTrigger
        self.failOnDataLoss = start_options.fail_on_data_loss
        self.offsetStore = offsetStore
        self._group_id = _group_of(consumerStrategy)
        # Fixed once per stream (Spark does it when the stream is created), not per batch.
        self._executor_params = consumerStrategy.client_configs.executor
        self._conf = conf
        self._commits = CommitQueue(self._group_id)
        self._planned: dict[int, PlannedBatch] = {}  # by engine batch time
        self._progress = ProgressTracker()
        self.rateController: RateController | None = None
        if conf.backpressure_enabled and ssc.batch_duration == 0:
            raise ConfigurationError(
                "spark.streaming.backpressure.enabled needs a fixed batch interval, which "
                "batchDuration=0 has not; cap batches with maxOffsetsPerTrigger instead")
        if conf.backpressure_enabled:
            estimator = create_rate_estimator(conf, int(ssc.batch_duration * 1000))
            self.rateController = RateController(self.id, estimator)
        self.initialRate = conf.backpressure_initial_rate
        self._max_retries = conf.max_retries
        self._retry_backoff_ms = conf.retry_backoff_ms
        self._lookup_timeout_ms = conf.lookup_timeout_ms
        self._use_cache = conf.consumer_cache_enabled
        self._read_settings: Any = None
        low = start_options.min_offsets_per_trigger
        self._gate = None if low is None else TriggerGate(low, start_options.max_trigger_delay_ms)
        self._peeked: dict[TopicPartition, int] | None = None  # latest offsets has_new_data saw
        self._last_plan = time.monotonic()  # batchDuration=0: rates apply to the time since
        self._discovered = float("-inf")  # batchDuration=0: when partitions were last looked for
        self._completed_time: int | None = None  # the batch time of the last completed batch
        if offsetStore is not None and self._group_id is None:
            raise ConfigurationError(
                "an offset store needs kafkaParams['group.id'] to know whose offsets to keep; "
                "set it to a name for this application")
        # Whose offsets the store keeps: the Kafka group, or (checkpoint folder, no group) the
        # stream itself.
        self._store_group = self._group_id or f"stream-{self.id}"
        self._positions = PartitionPositions(consumerStrategy, group_id=self._group_id,
                                             store_group=self._store_group,
                                             fail_on_data_loss=self.failOnDataLoss,
                                             start_options=start_options)
        self._bounded: BoundedRun | None = None  # with an ending option, from the start on
        self._store_epoch: int | None = None  # the offset store's epoch when this run started
        self._stopping = threading.Event()  # set when the context's stop begins
        self._lag: LagMonitor | None = None  # the lag timer, from start to stop
        self._member = DriverConsumer(consumerStrategy, self._group_id,
                                      conf.assignment_timeout_ms / 1000.0, self._stopping,
                                      lambda: self.currentOffsets, lambda: self.offsetStore,
                                      subscribes=not isinstance(consumerStrategy, Assign),
                                      application=self._application)
        #: Called with the assigned partitions before the start offsets are read.
        self._start_hooks: list[Callable[[set[TopicPartition]], None]] = []

    def add_start_hook(self, hook: Callable[[set[TopicPartition]], None]) -> None:
        """Call ``hook(partitions)`` at each start, once this driver holds its partitions and
        before their start offsets are read (an exactly-once output ends the open
        transactions of a crashed run there, whose pending offsets would hold the read)."""
        self._start_hooks.append(hook)

    def _application(self) -> str:
        """What identifies this stream across restarts (its static group member's id)."""
        layout = self.checkpoint_layout
        return application_identity(None if layout is None else layout.root, self._sc.appName or "", self.id)

    @property
    def name(self) -> str:
        return f"Kafka 0.10 direct stream [{self.id}]"

    @property
    def currentOffsets(self) -> dict[TopicPartition, int]:
        return self._positions.current

    @currentOffsets.setter
    def currentOffsets(self, offsets: dict[TopicPartition, int]) -> None:
        self._positions.current = offsets

    # ------------------------------------------------------------------ driver consumer
    def _driver(self) -> Any:
        return self._member.get()

    def start(self) -> None:
        layout = self.checkpoint_layout
        if self.offsetStore is None and layout is not None:
            # ssc.checkpoint(dir) without an explicit store: the offsets log lives in the
            # checkpoint folder, so getOrCreate resumes exactly where the last run committed.
            from dstream_kafka.stores import CheckpointOffsetStore

            self.offsetStore = CheckpointOffsetStore(f"{layout.root.rstrip('/')}/sources/{self.id}",
                                                     spark_context=self._sc)
        if self.offsetStore is not None:
            # Every write of this run carries it: after stop() closed the store, a batch the
            # stop abandoned (still in its output) is refused instead of committing.
            self._store_epoch = self.offsetStore.epoch
        self._progress.start(self._conf.conf, str(self), f"{self._store_group}/{self.id}", self.id,
                             store=self.offsetStore, group=self._store_group, context=self._ssc)
        self._positions.on_data_loss = self._progress.data_loss
        try:
            self.startOptions.check_cluster(self.consumerStrategy.client_configs)
            stored = self._positions.load(self.offsetStore)
            consumer = self._driver()
            self._member.paranoid_poll()
            for hook in self._start_hooks:
                hook(self._member.assignment())
            self._positions.start(consumer, self.offsetStore, stored, self._member.assignment())
            if self.startOptions.bounded:
                self._bounded = BoundedRun(self.startOptions.ends(consumer, self.currentOffsets))
            self._start_lag_timer()
        except BaseException:
            # The context stops only the streams that started: leave the group now, or this
            # driver would keep its partitions from the next stream of the same group.id.
            self._member.close()
            raise

    def _start_lag_timer(self) -> None:
        interval = self._conf.lag_interval_ms
        if not interval:
            return
        self._lag = LagMonitor(
            self.id, log_end_lookup(self.consumerStrategy.client_configs), interval,
            int(self._ssc.batch_duration * 1000), rate_cap=self._conf.max_rate_per_partition or None,
            store="no" if self.offsetStore is None else type(self.offsetStore).__name__)
        self._lag.started(self.currentOffsets)
        self._progress.watch_lag(self._lag)
        self._ssc.addStreamingListener(self._lag.listener)
        self._lag.start()

    @property
    def lag(self) -> LagMonitor | None:
        """The lag timer (``spark.streaming.kafka.lag.interval``), or None when it is off."""
        return self._lag

    def latestOffsets(self) -> dict[TopicPartition, int]:
        """Return the latest offset of every assigned partition, tracking new and revoked ones."""
        # Without an interval, partition discovery (a metadata refresh, which kafka-python
        # spaces by retry.backoff.ms, 100 ms) runs at most once a second, not at every check.
        now = time.monotonic()
        discover = self._ssc.batch_duration > 0 or now - self._discovered >= DISCOVERY_PERIOD_S
        if discover:
            self._discovered = now
        self._member.paranoid_poll(discover)
        return self._positions.latest_of(self._driver(), self._member.assignment(),
                                         self.offsetStore, self._latest)

    def _latest(self, parts: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        servers = self.consumerStrategy.executorKafkaParams.get("bootstrap.servers", "bootstrap.servers")
        return latest_offsets(self._driver(), parts, self._max_retries, self._retry_backoff_ms,
                              self._lookup_timeout_ms, str(servers), self._vanished,
                              stopping=self._stopping)

    def _vanished(self, parts: Sequence[TopicPartition]) -> set[TopicPartition]:
        """Those of ``parts`` that were deleted; none while no bootstrap server accepts a
        connection (a broker outage, which the retries ride out, is not a deletion)."""
        servers = self.consumerStrategy.executorKafkaParams.get("bootstrap.servers", "")
        if not any_reachable(str(servers)):
            return set()
        return self._positions.find_vanished(self._driver(), parts)

    def _clamp(self, latest: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        current = {tp: self.currentOffsets[tp] for tp in latest}
        rate = estimated_rate(self.rateController, self.initialRate)
        seconds = self._ssc.batch_duration or time.monotonic() - self._last_plan
        return batch_ends(latest, current, seconds, self.perPartitionConfig, rate,
                          self.maxOffsetsPerTrigger, self._bounded)

    def _held_back(self, latest: Mapping[TopicPartition, int], now_ms: float) -> bool:
        """Whether minOffsetsPerTrigger holds this batch's new offsets back (not in a bounded
        run, which reads to its end as Trigger.AvailableNow)."""
        if self._gate is None or self._bounded is not None:
            return False
        new = sum(max(end - self.currentOffsets.get(tp, end), 0) for tp, end in latest.items())
        return not self._gate.ready(new, now_ms)

    def has_new_data(self) -> bool:
        """Whether the next batch would read records (one latest-offset look-up; a context of
        ``batchDuration=0`` asks before each batch, and the batch reuses the look-up)."""
        with self._member.lock:
            latest = self.latestOffsets()
            if self._positions.replay is not None:
                ready = True
            elif self._held_back(latest, time.monotonic() * 1000.0):
                ready = False
            else:
                until = self._clamp(latest)
                ready = any(until[tp] > self.currentOffsets[tp] for tp in until) or (
                    # a bounded run at its ends still plans its last batch, then stops
                    self._bounded is not None and self._bounded.last_batch is None)
            self._peeked = latest if ready else None
            return ready

    # ------------------------------------------------------------------ batches
    def compute(self, batch_time: int) -> Any:
        started = time.perf_counter()
        self._commits.deliver()
        with self._member.lock:
            latest, self._peeked = self._peeked or self.latestOffsets(), None
            replay = self._positions.take_replay(latest)
            now_ms = time.monotonic() * 1000.0
            if replay is not None:
                store_time, until = replay
            elif self._held_back(latest, now_ms):  # minOffsetsPerTrigger: an empty batch
                store_time, until = batch_time, {tp: self.currentOffsets[tp] for tp in latest}
            else:
                store_time, until = batch_time, self._clamp(latest)
                if self._gate is not None and any(
                        until[tp] > self.currentOffsets[tp] for tp in until):
                    self._gate.fired(now_ms)
            self._last_plan = now_ms / 1000.0
            ranges = self._positions.ranges_to(until)
            if self.offsetStore is not None:
                self.offsetStore.plan(self._store_group, store_time, ranges, epoch=self._store_epoch)
            rdd = self._make_rdd(ranges)
            if self._lag is not None:
                self._lag.planned(ranges, len(self._planned) + 1)
            behind = {tp: max(latest.get(tp, until[tp]) - until[tp], 0) for tp in until}
            self._planned[batch_time] = PlannedBatch(
                batch_time, store_time, ranges, behind,
                (time.perf_counter() - started) * 1000.0, rdd)
            self.report_input_info(batch_time, sum(r.count() for r in ranges), {
                "offsets": ranges, "Description": describe_ranges(ranges)})
            self._positions.advance(until, latest, replaying=replay is not None)
            if self._bounded is not None:
                self._bounded.planned(batch_time, self.currentOffsets,
                                      self._positions.replay is not None)
            return rdd

    @property
    def finished(self) -> bool:
        """Whether this stream lets its context stop: unbounded, or a bounded run that has
        processed and committed everything up to its end offsets."""
        return not self.startOptions.bounded or (self._bounded is not None and self._bounded.done)

    def _make_rdd(self, ranges: Sequence[OffsetRange]) -> Any:
        from dstream_kafka.read.kafka_rdd import build_kafka_rdd
        from dstream_kafka.read.settings import read_settings

        leader_lookup = self._leader_host if self.locationStrategy is PreferBrokers else None
        locations = locations_for(self._sc, self.locationStrategy, ranges, leader_lookup)
        if self._read_settings is None:
            # Deferred to the first batch; read from the stream's one SparkConf copy.
            self._read_settings = read_settings(
                self._conf, self.consumerStrategy.client_configs, self._use_cache, stream=True
            )._replace(failOnDataLoss=self.failOnDataLoss)
        pieces = self._split(ranges)
        if pieces is not None:  # spread over every executor; the cache still keys by partition
            return build_kafka_rdd(self._sc, self._executor_params, pieces,
                                   locations=[None] * len(pieces),
                                   settings=self._read_settings._replace(prePosition=False))
        return build_kafka_rdd(self._sc, self._executor_params, list(ranges), locations=locations,
                               settings=self._read_settings)

    def _split(self, ranges: Sequence[OffsetRange]) -> list[OffsetRange] | None:
        """The pieces of ``ranges`` the ``minPartitions`` option asks for, or ``None`` when it
        is not set or the batch already has that many non-empty ranges."""
        wanted = self.startOptions.min_partitions
        if wanted is None:
            return None
        pieces = [p.range for p in split_ranges(ranges, wanted)]
        return pieces if pieces != [r for r in ranges if r.count() > 0] else None

    def _leader_host(self, tp: TopicPartition) -> str | None:
        return _kafka_internals.leader_host(self._driver(), tp)

    def on_batch_completed(self, batch_time: int, batch_info: BatchInfo) -> None:
        batch = self._planned.pop(batch_time, None) or PlannedBatch.unknown(batch_time)
        started = time.perf_counter()
        store = self.offsetStore
        if self._lag is not None:
            if batch.rdd is not None:  # its jobs ended: each task's wall time is known
                self._lag.tasks_timed(batch.rdd.taskTimes(), batch.ranges)
            self._lag.commit_started()
        if store is not None and not store.committed_in(self._store_group, batch.storeTime):
            store.commit(self._store_group, batch.storeTime, batch.ranges, epoch=self._store_epoch)
        if self._lag is not None:
            self._lag.committed(batch.ranges)
        self._record_read_losses(batch.rdd, batch.storeTime)
        self._commits.send(self._commit_async)
        commit_ms = (time.perf_counter() - started) * 1000.0
        processing = batch_info.processing_delay
        # batchDuration=0: the input rate is over the time since the previous batch (batch times
        # are then the wall clock at planning)
        since, self._completed_time = self._completed_time, batch_time
        seconds = self._ssc.batch_duration
        if not seconds and since is not None:
            seconds = (batch_time - since) / 1000.0
        progress = self._progress.record(
            batch_time, batch.ranges, batch.behind, seconds, processing,
            batch_info.scheduling_delay, batch.planMs, commit_ms)
        if self.rateController is not None:
            self.rateController.on_batch_completed(batch_info.processing_end_time,
                                                   progress.numRecords, processing,
                                                   batch_info.scheduling_delay)
        self._progress.notify(progress)
        if self._bounded is not None and self._bounded.completed(batch_time):
            stop_when_all_done(self._ssc, self.name, self._bounded)

    def _record_read_losses(self, rdd: KafkaRDD | None, store_time: int) -> None:
        """Log and store the ranges executors skipped because they were deleted from Kafka
        after the batch was planned (failOnDataLoss=false). After the commit: a loss record
        moves a stored offset equal to its start, which would break the commit's continuity."""
        for lost in rdd.lostOffsetRanges() if rdd is not None else []:
            log.warning("Records [%d, %d) of %s-%d were deleted from Kafka after batch %d was "
                           "planned and before executors read them; skipped (failOnDataLoss=false)",
                           lost.fromOffset, lost.untilOffset, lost.topic, lost.partition,
                           store_time)
            self._progress.data_loss(lost.topic, lost.partition, lost.fromOffset,
                                     lost.untilOffset)
            if self.offsetStore is not None:
                self.offsetStore.record_data_loss(self._store_group, lost.topicPartition(),
                                                  lost.fromOffset, lost.untilOffset, store_time,
                                                  epoch=self._store_epoch)

    def on_batch_failed(self, batch_time: int, error: BaseException) -> None:
        # Nothing is committed for a failed batch; the next start re-reads it.
        self._planned.pop(batch_time, None)

    def foreachRDD(self, func: Callable[[KafkaRDD], None] | Callable[[datetime, KafkaRDD], None]) -> None:
        """Run ``func(rdd)`` or ``func(time, rdd)`` on the driver for every batch.

        Every RDD of this stream is a :class:`~dstream_kafka.read.kafka_rdd.KafkaRDD`, so ``func``
        may be typed to take one and call ``rdd.offsetRanges()`` without a cast.
        """
        # A function of a KafkaRDD is what the base calls it with; the base is typed for any RDD.
        super().foreachRDD(cast(Any, func))

    def foreachBatch(self, func: Callable[[Any, int], None], includeHeaders: bool = False) -> None:
        """Run ``func(df, batch_id)`` on the driver for every batch, as Structured Streaming's.

        ``df`` is the batch's DataFrame in Structured Streaming's Kafka schema
        (:meth:`~dstream_kafka.read.kafka_rdd.KafkaRDD.toDF`, ``headers`` with
        ``includeHeaders``); ``dstream_kafka.sql.offsetRanges(df)`` returns the batch's
        ranges. ``batch_id`` is the time in epoch milliseconds the batch was planned at, kept
        by the offset store: a batch run again after a restart (its ranges replayed from the
        store's write-ahead log) gets the ``batch_id`` of its first run, not the new engine
        time, so a sink that keys its writes on ``batch_id`` writes it once. It is what
        ``stream.transaction(batch_id)`` takes. The batch's offsets are committed (offset
        store, ``commitAsync`` queue) only after ``func`` and the batch's other outputs
        returned; when ``func`` raises, nothing is committed.
        """
        from dstream_kafka.streaming import datetime_to_ms

        def run(time: datetime, rdd: KafkaRDD) -> None:
            func(rdd.toDF(includeHeaders=includeHeaders), self.batchId(datetime_to_ms(time)))

        self.foreachRDD(run)

    def batchId(self, batch_time: Any) -> int:
        """Return the id the offset store knows the batch at engine time ``batch_time`` by.

        ``batch_time`` is the time ``foreachRDD(lambda time, rdd: ...)`` received (a datetime)
        or epoch milliseconds. The id is that time, except for a batch replayed after a
        restart (planned but not committed by an earlier run), which keeps the time of its
        first run: the same range always has the same id. A batch this stream does not hold
        (finished, or not planned) is answered with ``batch_time`` itself.
        """
        from dstream_kafka.streaming import datetime_to_ms

        ms = batch_time if isinstance(batch_time, int) else datetime_to_ms(batch_time)
        batch = self._planned.get(ms)
        return ms if batch is None else batch.storeTime

    # ------------------------------------------------------------------ commits
    def transaction(self, batch_time: Any) -> Any:
        """Open the offset store's transaction for one batch, to write results in it.

        ``batch_time`` is the time ``foreachRDD(lambda time, rdd: ...)`` received (a datetime)
        or epoch milliseconds, or the ``batch_id`` ``foreachBatch`` passed. On normal exit the batch's offsets are committed in the same
        database transaction as everything written through the returned object; an exception
        rolls both back. Needs a transactional store (``OffsetStores.sqlite``/``postgres``).
        Once the stream was stopped, its batches' transactions are refused
        (:class:`~dstream_kafka.errors.OffsetFencedError`) and roll back.

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
        if store is None or not store.transactional:
            raise ConfigurationError(
                "stream.transaction() needs a transactional offset store; create the stream with "
                "offsetStore=OffsetStores.sqlite(path) or OffsetStores.postgres(dsn)")
        ms = batch_time if isinstance(batch_time, int) else datetime_to_ms(batch_time)
        batch = self._planned.get(ms)
        if batch is None:  # a replayed batch's foreachBatch id is its store time
            batch = next((b for b in list(self._planned.values()) if b.storeTime == ms), None)
        if batch is None:
            raise ConfigurationError(
                f"no running batch at {batch_time!r}: call stream.transaction(time) with the time "
                "passed to foreachRDD, while that batch's output runs")
        # transactional stores are TransactionalOffsetStore's (the flag is its contract)
        transactional = cast("TransactionalOffsetStore", store)
        return transactional.transaction(self._store_group, batch.storeTime, batch.ranges,
                                         epoch=self._store_epoch)

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

    def _commit_async(self, offsets: dict[Any, Any]) -> Any:
        with self._member.lock:
            return self._driver().commit_async(offsets)

    # ------------------------------------------------------------------ checkpoints and stop
    def checkpoint_data(self, batch_time: int) -> dict[str, Any] | None:
        # Describe batch_time itself: later batches may be planned already, so the driver
        # position (currentOffsets) can be ahead of what this checkpoint covers.
        ranges = self._planned.get(batch_time, PlannedBatch.unknown(batch_time)).ranges
        return {"currentOffsets": [[r.topic, r.partition, r.untilOffset] for r in ranges]}

    def restore_checkpoint_data(self, data: Mapping[str, Any]) -> None:
        if self.offsetStore is None and data:
            self.currentOffsets = {TopicPartition(t, p): int(o) for t, p, o in data.get("currentOffsets", [])}

    def on_stop_requested(self) -> None:
        # A planning thread waiting for an unanswered broker gives up now, so the stop (and the
        # consumer close, which needs the planner's lock) keeps its bound.
        self._stopping.set()

    def stop(self) -> None:
        self._stopping.set()
        if self._lag is not None:
            self._lag.stop()
            self._ssc.removeStreamingListener(self._lag.listener)
        if self.offsetStore is not None:
            # First: from here on no batch of this run writes to the store (a batch the stop
            # abandoned is refused and rolled back; see OffsetStore.epoch).
            self.offsetStore.close()
        if self.rateController is not None:
            self.rateController.stop(wait=False)
        # Commits sent for finished batches complete before the consumer goes (Kafka's close
        # waits for in-flight async commits too), and their callbacks run; with no broker to
        # answer them the stop does not wait (its bound holds), they fail with the consumer.
        servers = str(self.consumerStrategy.executorKafkaParams.get("bootstrap.servers", ""))
        answerable = not self._commits.in_flight() or any_reachable(servers)
        self._commits.deliver(wait_s=COMMIT_WAIT_ON_STOP_S if answerable else 0.0)
        self._member.close()
        self._progress.stop()  # after the lag timer's: its series go from /metrics


def _group_of(strategy: ConsumerStrategy) -> str | None:
    params = strategy.executorKafkaParams
    group = params.get("group.id") or params.get("group_id")
    return str(group) if group else None
