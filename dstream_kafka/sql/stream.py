"""A Kafka stream of DataFrames whose driver loop runs in the client: Spark Connect's stream.

:func:`createDataFrameStream` plans each batch in the calling process, as the classic direct
stream plans it (:class:`~dstream_kafka.plan.direct_stream.DirectKafkaInputDStream`), with the
same parts: the consumer strategy's driver consumer, start positions and the re-run of an
uncommitted batch, data-loss handling, the rate limits, bounded runs and the offset stores. A
batch's DataFrame is :func:`~dstream_kafka.sql.frame.build_dataframe` of its ranges, so it runs
on a Spark Connect session (no SparkContext, no RDDs) and on a classic one alike. What the
classic engine adds and this loop has not: backpressure, windows and state, the Streaming page.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from dstream_kafka.client.latest_offsets import latest_offsets
from dstream_kafka.client.reachability import any_reachable
from dstream_kafka.config import SparkConfReader
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.plan.bounded_run import BoundedRun
from dstream_kafka.plan.consumer_strategy import Assign, ConsumerStrategy
from dstream_kafka.plan.driver_consumer import DriverConsumer
from dstream_kafka.plan.positions import PartitionPositions
from dstream_kafka.plan.progress import ProgressAccessors, ProgressTracker
from dstream_kafka.plan.rate import (
    DefaultPerPartitionConfig,
    PerPartitionConfig,
    batch_ends,
)
from dstream_kafka.plan.stream_options import StartOptions
from dstream_kafka.stores.base import check_offset_store

if TYPE_CHECKING:
    from dstream_kafka.stores.base import OffsetStore
    from dstream_kafka.stores.transactional import TransactionalOffsetStore

__all__ = ["KafkaDataFrameStream", "createDataFrameStream"]

log = logging.getLogger(__name__)

BatchFunction = Callable[[Any, int], None]


def createDataFrameStream(spark: Any, consumerStrategy: ConsumerStrategy, batchDuration: float, *,
                          offsetStore: OffsetStore | None = None,
                          perPartitionConfig: PerPartitionConfig | None = None,
                          maxOffsetsPerTrigger: int | None = None,
                          failOnDataLoss: bool | None = None,
                          options: Mapping[str, Any] | None = None,
                          includeHeaders: bool = False) -> KafkaDataFrameStream:
    """Create a Kafka stream of DataFrames, planned in this process, for classic and Spark
    Connect sessions.

    The arguments mean what they mean to ``KafkaUtils.createDirectStream``; ``spark`` is a
    ``SparkSession`` (classic or Spark Connect) and ``batchDuration`` the batch interval in
    seconds. An ending option (``options={"endingOffsets": "latest"}``) makes it a bounded run
    (Trigger.AvailableNow): it reads up to the end offsets resolved at its start, commits them
    and stops. ``spark.streaming.kafka.*`` settings are read from the session's configuration.

    Returns
    -------
    KafkaDataFrameStream
        Not started: give it ``foreachBatch(func)``, then ``start()``.
    """
    return KafkaDataFrameStream(spark, consumerStrategy, batchDuration, offsetStore=offsetStore,
                                perPartitionConfig=perPartitionConfig,
                                maxOffsetsPerTrigger=maxOffsetsPerTrigger,
                                failOnDataLoss=failOnDataLoss, options=options,
                                includeHeaders=includeHeaders)


def _trigger_options(options: StartOptions, maxOffsetsPerTrigger: int | None) -> int | None:
    """Return the cap on records per batch, from the keyword or the ``maxOffsetsPerTrigger``
    option where the options know it; refuse the trigger options this loop does not apply."""
    # Looked up by name: the trigger options are newer than this loop (issue #30).
    max_offsets = getattr(options, "max_offsets", None)
    if callable(max_offsets):
        maxOffsetsPerTrigger = max_offsets(maxOffsetsPerTrigger)
    for field, option, why in (
            ("min_offsets_per_trigger", "minOffsetsPerTrigger",
             "every batchDuration a batch reads what there is"),
            ("min_partitions", "minPartitions",
             "each batch reads one Spark partition per Kafka partition")):
        if getattr(options, field, None) is not None:
            raise ConfigurationError(
                f"option {option} is not supported by createDataFrameStream ({why}); leave it out")
    return maxOffsetsPerTrigger


class KafkaDataFrameStream(ProgressAccessors):
    """Batches of a Kafka stream as DataFrames in Structured Streaming's Kafka schema.

    Every ``batchDuration`` seconds a thread of this process plans the next offset ranges,
    calls ``func(df, batch_id)`` with their DataFrame, and once ``func`` has returned commits
    the ranges to the offset store and records the batch's progress. When ``func`` raises,
    nothing is committed, the stream stops, and :meth:`awaitTermination` raises the error; the
    next start reads that batch again (with a store that records planned batches, exactly its
    ranges under the same ``batch_id``).
    """

    def __init__(self, spark: Any, consumerStrategy: ConsumerStrategy, batchDuration: float, *,
                 offsetStore: OffsetStore | None = None,
                 perPartitionConfig: PerPartitionConfig | None = None,
                 maxOffsetsPerTrigger: int | None = None, failOnDataLoss: bool | None = None,
                 options: Mapping[str, Any] | None = None, includeHeaders: bool = False) -> None:
        from dstream_kafka.sql.frame import check_raw_bytes, check_session, session_conf

        check_session(spark)
        if not isinstance(consumerStrategy, ConsumerStrategy):
            raise ConfigurationError(
                "consumerStrategy must come from ConsumerStrategies.Subscribe/SubscribePattern/"
                f"Assign or subclass ConsumerStrategy, got {type(consumerStrategy).__name__}")
        if isinstance(batchDuration, bool) or not isinstance(batchDuration, (int, float)) \
                or not batchDuration >= 0.001:
            raise ConfigurationError(
                "batchDuration must be a positive number of seconds (at least 0.001), got "
                f"{batchDuration!r}")
        if maxOffsetsPerTrigger is not None and (
                isinstance(maxOffsetsPerTrigger, bool) or not isinstance(maxOffsetsPerTrigger, int)
                or maxOffsetsPerTrigger <= 0):
            raise ConfigurationError(
                f"maxOffsetsPerTrigger must be a positive int, got {maxOffsetsPerTrigger!r}")
        if not isinstance(includeHeaders, bool):
            raise ConfigurationError(f"includeHeaders must be True or False, got {includeHeaders!r}")
        check_offset_store(offsetStore)
        check_raw_bytes(consumerStrategy.client_configs)
        self.startOptions = StartOptions.parse(options, failOnDataLoss).checked(consumerStrategy)
        maxOffsetsPerTrigger = _trigger_options(self.startOptions, maxOffsetsPerTrigger)
        params = consumerStrategy.executorKafkaParams
        group = params.get("group.id") or params.get("group_id")
        self._group_id = str(group) if group else None
        if offsetStore is not None and self._group_id is None:
            raise ConfigurationError(
                "an offset store needs kafkaParams['group.id'] to know whose offsets to keep; "
                "set it to a name for this application")
        self._spark = spark
        self.consumerStrategy = consumerStrategy
        self.batchDuration = float(batchDuration)
        self.offsetStore = offsetStore
        self.maxOffsetsPerTrigger = maxOffsetsPerTrigger
        self.includeHeaders = includeHeaders
        self._conf = SparkConfReader(session_conf(spark))
        self._conf.check_stream_settings()
        #: Seconds :meth:`stop` waits for the batch under way: ``spark.streaming.gracefulStopTimeout``
        #: when the session sets it, else 10 batch intervals (as a StreamingContext's graceful stop).
        timeout_ms = self._conf.graceful_stop_timeout_ms
        self.stopTimeout: float = (10 * self.batchDuration if timeout_ms is None
                                   else timeout_ms / 1000.0)
        self.perPartitionConfig = perPartitionConfig or DefaultPerPartitionConfig(self._conf)
        self._store_group = self._group_id or "dataframe-stream"
        self._positions = PartitionPositions(
            consumerStrategy, group_id=self._group_id, store_group=self._store_group,
            fail_on_data_loss=self.startOptions.fail_on_data_loss, start_options=self.startOptions)
        self._stopping = threading.Event()
        self._member = DriverConsumer(consumerStrategy, self._group_id,
                                      self._conf.assignment_timeout_ms / 1000.0, self._stopping,
                                      lambda: self._positions.current, lambda: self.offsetStore,
                                      subscribes=not isinstance(consumerStrategy, Assign))
        self._progress = ProgressTracker()
        self._func: BatchFunction | None = None
        self._bounded: BoundedRun | None = None
        self._store_epoch: int | None = None
        self._running: tuple[int, list[OffsetRange]] | None = None  # (batch id, ranges) in func
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()

    # ------------------------------------------------------------------ the user's side
    def foreachBatch(self, func: BatchFunction) -> KafkaDataFrameStream:
        """Call ``func(df, batch_id)`` for every batch, in this process; return this stream.

        ``df`` reads the batch's ranges (``dstream_kafka.sql.offsetRanges(df)`` returns them);
        ``batch_id`` is the batch time in epoch milliseconds, the same when a batch is read
        again after a restart, and what :meth:`transaction` takes.
        """
        if not callable(func):
            raise ConfigurationError(f"foreachBatch takes a function (df, batch_id), got {func!r}")
        if self._thread is not None:
            raise ConfigurationError("foreachBatch must be called before start()")
        self._func = func
        return self

    def start(self) -> None:
        """Place the partitions (offset store, starting options) and start the batch loop.

        Raises
        ------
        ConfigurationError
            Without ``foreachBatch``, or when started twice.
        """
        if self._func is None:
            raise ConfigurationError("call stream.foreachBatch(func) before stream.start()")
        if self._thread is not None:
            raise ConfigurationError("this stream was started already; create a new one")
        store = self.offsetStore
        if store is not None:
            self._store_epoch = store.epoch
        self._progress.start(self._conf.conf, self.name, f"{self._store_group}/dataframes", 0,
                             store=store, group=self._store_group)
        try:
            self.startOptions.check_cluster(self.consumerStrategy.client_configs)
            with self._member.lock:
                stored = self._positions.load(store)
                consumer = self._member.get()
                self._member.paranoid_poll()
                self._positions.start(consumer, store, stored, self._member.assignment())
                if self.startOptions.bounded:
                    self._bounded = BoundedRun(self.startOptions.ends(consumer,
                                                                      self._positions.current))
        except BaseException:
            self._member.close()
            raise
        self._thread = threading.Thread(target=self._loop, name="dstream-dataframe-stream",
                                        daemon=True)
        self._thread.start()

    def awaitTermination(self, timeout: float | None = None) -> bool:
        """Wait for the stream to stop; return whether it did within ``timeout`` seconds.

        Raises
        ------
        Exception
            The error that stopped the stream (``func``'s, or the planning's).
        """
        stopped = self._done.wait(timeout)
        if self._error is not None:
            raise self._error
        return stopped

    def stop(self) -> None:
        """Stop after the batch under way (if any) has finished and close the driver consumer.

        The wait is bounded by :attr:`stopTimeout`: a batch still running then (``func``
        stuck, say on a Connect server that died) is abandoned, never committed (the offset
        store is closed first, so its commit and ``transaction()`` are refused) and read again
        at the next start; its thread, a daemon, is left to end by itself. Called from
        ``func``, the batch under way still commits, then the loop ends.
        """
        self._stopping.set()
        if self._thread is threading.current_thread():
            return  # the loop finishes this batch and closes everything on its way out
        if self._thread is not None:
            self._thread.join(self.stopTimeout)
            if self._thread.is_alive():
                log.warning(
                    "%s: the batch under way did not finish within %g s "
                    "(spark.streaming.gracefulStopTimeout, else 10 batch intervals); the stop "
                    "goes on without it: that batch is not committed and is read again at the "
                    "next start", self.name, self.stopTimeout)
        self._finish()

    @property
    def isActive(self) -> bool:
        """Whether the batch loop runs."""
        return self._thread is not None and not self._done.is_set()

    @property
    def name(self) -> str:
        return f"Kafka DataFrame stream [{self._store_group}]"

    def transaction(self, batch_id: int) -> Any:
        """Open the offset store's transaction for the batch ``func`` runs, to write results in it.

        On normal exit the batch's offsets are committed in the same database transaction as
        what was written through it; an exception rolls both back. Needs a transactional store
        (``OffsetStores.sqlite`` / ``postgres``); the Connect client must reach that database.
        """
        store = self.offsetStore
        if store is None or not store.transactional:
            raise ConfigurationError(
                "stream.transaction() needs a transactional offset store; create the stream with "
                "offsetStore=OffsetStores.sqlite(path) or OffsetStores.postgres(dsn)")
        running = self._running
        if running is None or running[0] != batch_id:
            raise ConfigurationError(
                f"no running batch {batch_id!r}: call stream.transaction(batch_id) with the "
                "batch_id passed to foreachBatch, while that batch's func runs")
        return cast("TransactionalOffsetStore", store).transaction(
            self._store_group, batch_id, running[1], epoch=self._store_epoch)

    @property
    def currentOffsets(self) -> dict[TopicPartition, int]:
        """The next offset to read per partition (moved when a batch is planned)."""
        return dict(self._positions.current)

    # ------------------------------------------------------------------ the loop
    def _loop(self) -> None:
        step = int(self.batchDuration * 1000)
        batch_time = (int(time.time() * 1000) // step + 1) * step
        try:
            while not self._stopping.is_set():
                if self._stopping.wait(max(batch_time / 1000.0 - time.time(), 0.0)):
                    break
                if self._run_batch(batch_time):
                    log.info("Bounded run of %s done: every offset up to %s is committed",
                             self.name, self._bounded.describe() if self._bounded else "")
                    break
                # A late batch does not queue its missed intervals: the next one is the next tick.
                batch_time = max(batch_time + step, (int(time.time() * 1000) // step) * step)
        except BaseException as e:  # noqa: BLE001 (handed to awaitTermination)
            log.error("%s stopped: %s", self.name, e)
            self._error = e
        finally:
            self._finish()

    def _finish(self) -> None:
        with self._member.lock:
            if self._done.is_set():
                return
            if self.offsetStore is not None:
                self.offsetStore.close()  # a batch abandoned by the stop can no longer commit
            self._member.close()
            self._progress.stop()  # its series go from /metrics
            self._done.set()

    def _run_batch(self, batch_time: int) -> bool:
        """Plan, run and commit one batch; return whether it ended a bounded run."""
        from dstream_kafka.sql.frame import build_dataframe

        started = time.perf_counter()
        with self._member.lock:
            latest = self._latest_offsets()
            replay = self._positions.take_replay(latest)
            store_time, until = replay if replay is not None else (batch_time, self._clamp(latest))
            ranges = self._positions.ranges_to(until)
            if self.offsetStore is not None:
                self.offsetStore.plan(self._store_group, store_time, ranges,
                                      epoch=self._store_epoch)
            behind = {tp: max(latest.get(tp, until[tp]) - until[tp], 0) for tp in until}
            self._positions.advance(until, latest, replaying=replay is not None)
            if self._bounded is not None:
                self._bounded.planned(store_time, self._positions.current,
                                      self._positions.replay is not None)
        plan_ms = (time.perf_counter() - started) * 1000.0
        df = build_dataframe(self._spark, self.consumerStrategy.client_configs, ranges,
                             include_headers=self.includeHeaders)
        self._running = (store_time, ranges)
        began = time.perf_counter()
        try:
            assert self._func is not None
            self._func(df, store_time)
        finally:
            self._running = None
        processing = int((time.perf_counter() - began) * 1000)
        committed = time.perf_counter()
        store = self.offsetStore
        if store is not None and not store.committed_in(self._store_group, store_time):
            store.commit(self._store_group, store_time, ranges, epoch=self._store_epoch)
        progress = self._progress.record(
            store_time, ranges, behind, self.batchDuration, processing,
            max(int(time.time() * 1000) - batch_time - processing, 0), plan_ms,
            (time.perf_counter() - committed) * 1000.0)
        self._progress.notify(progress)
        return self._bounded is not None and self._bounded.completed(store_time)

    def _latest_offsets(self) -> dict[TopicPartition, int]:
        self._member.paranoid_poll()
        return self._positions.latest_of(self._member.get(), self._member.assignment(),
                                         self.offsetStore, self._latest)

    def _latest(self, parts: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        servers = str(self.consumerStrategy.executorKafkaParams.get("bootstrap.servers", ""))

        def vanished(found: Sequence[TopicPartition]) -> set[TopicPartition]:
            if not any_reachable(servers):
                return set()  # an outage, which the retries ride out, is not a deletion
            return self._positions.find_vanished(self._member.get(), found)

        return latest_offsets(self._member.get(), parts, self._conf.max_retries,
                              self._conf.retry_backoff_ms, self._conf.lookup_timeout_ms,
                              servers, vanished, stopping=self._stopping)

    def _clamp(self, latest: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
        current = {tp: self._positions.current[tp] for tp in latest}
        return batch_ends(latest, current, self.batchDuration, self.perPartitionConfig, None,
                          self.maxOffsetsPerTrigger, self._bounded)
