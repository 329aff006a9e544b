"""``KafkaUtils``: the public entry points, named as in Spark's kafka010 ``KafkaUtils``.

Everything that can be checked on the driver is checked before an RDD exists, so bad input
fails with one clear error and no Spark job runs.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dstream_kafka.errors import ConfigurationError, DataLossError, InvalidOffsetRangeError
from dstream_kafka.client.configs import ClientConfigs, bootstrap_errors
from dstream_kafka._spark_internals import (
    is_active_context,
    worker_python,
    worker_python_imports,
)
from dstream_kafka.read.kafka_rdd import KafkaRDD
from dstream_kafka.read.settings import read_settings
from dstream_kafka.client.offset_reader import offset_reader
from dstream_kafka.plan.batch_options import check_end, plan_batch_read
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.read.placement import (
    LocationStrategy,
    PreferBrokers,
    PreferConsistent,
    executor_locations,
    preferred_hosts_for,
    preferred_locations_for,
)

if TYPE_CHECKING:
    from pyspark import SparkContext

    from dstream_kafka.plan.consumer_strategy import ConsumerStrategy
    from dstream_kafka.plan.direct_stream import DirectKafkaInputDStream
    from dstream_kafka.plan.rate import PerPartitionConfig
    from dstream_kafka.stores.base import OffsetStore
    from dstream_kafka.streaming.context import StreamingContext

__all__ = ["KafkaUtils"]

#: What a Spark Connect user runs instead of a direct stream (docs/guide/connect.rst).
_CONNECT_LOOP = ("dstream_kafka.sql.createDataFrameStream(spark, consumerStrategy, batchDuration)"
                 ".foreachBatch(func), whose batch loop runs in the client (see the Spark "
                 "Connect guide)")

log = logging.getLogger(__name__)


def _check_context(sc: Any, call: str = "KafkaUtils.createRDD",
                   instead: str = "KafkaUtils.createDataFrame(spark, kafkaParams, offsetRanges)",
                   ) -> None:
    from dstream_kafka.spark_connect import refuse_connect

    refuse_connect(sc, call, instead)
    if not is_active_context(sc):
        raise ConfigurationError(
            f"sc must be an active SparkContext, got {type(sc).__name__}; "
            "use SparkContext.getOrCreate()"
        )
    _check_worker_python(sc)


def _check_worker_python(sc: Any) -> None:
    """Refuse a local master whose Python workers cannot import dstream_kafka.

    Workers run the context's ``pythonExec``: ``PYSPARK_PYTHON`` when the context was created
    (``python3`` when unset), not necessarily this driver's interpreter; without dstream_kafka
    every task would fail with an import error on the executor. ``spark.pyspark.python`` reaches
    it only through ``spark-submit``, which sets ``PYSPARK_PYTHON`` from it; set on a builder
    under ``python app.py`` it changes nothing, so it is not consulted. Only local masters are checked: their workers run
    on this machine. The answer is cached per interpreter (one ``python -c`` the first time).
    """
    if not str(sc.master).startswith("local"):
        return
    python = worker_python(sc)
    resolved = shutil.which(python) or python
    if os.path.realpath(resolved) == os.path.realpath(sys.executable):
        return
    if worker_python_imports(resolved, "dstream_kafka"):
        return
    raise ConfigurationError(
        f"Spark starts its Python workers with {python!r}, which cannot import dstream_kafka "
        f"(this driver runs {sys.executable}). Set PYSPARK_PYTHON={sys.executable} before the "
        f"SparkContext is created (spark.pyspark.python works through spark-submit only), or "
        f"install dstream_kafka for {python!r}"
    )


def _check_dataframe_session(spark: Any) -> None:
    """pyarrow, and a SparkSession whose local workers (classic sessions only) can import
    dstream_kafka: checked before anything else."""
    from dstream_kafka.sql.arrow import require_pyarrow
    from dstream_kafka.spark_connect import is_connect_session
    from dstream_kafka.sql.frame import check_session

    require_pyarrow()
    check_session(spark)
    if not is_connect_session(spark):
        _check_worker_python(spark.sparkContext)


def _check_strategy(
    strategy: Any, ranges: Sequence[OffsetRange]
) -> dict[TopicPartition, str | None]:
    if not isinstance(strategy, LocationStrategy):
        raise ConfigurationError(
            "locationStrategy must be one of LocationStrategies.PreferConsistent, PreferBrokers or "
            f"PreferFixed(hostMap), got {strategy!r}"
        )
    # PreferBrokers raises here with Spark's explanation: no driver consumer to ask.
    return preferred_hosts_for(strategy, [r.topicPartition() for r in ranges])


def _validate_against_cluster(configs: ClientConfigs, ranges: Sequence[OffsetRange]) -> None:
    """Unknown topics/partitions, and starts already deleted from the log, fail here."""
    tps = sorted({r.topicPartition() for r in ranges})
    if not tps:
        return
    with bootstrap_errors(configs), offset_reader(configs) as reader:
        reader.refresh_metadata()
        reader.check_partitions(tps)
        reading = sorted({r.topicPartition() for r in ranges if r.count() > 0})
        earliest = reader.earliest(reading)
        latest = reader.latest(reading)
    for r in ranges:
        check_end(r, latest.get(r.topicPartition()))
        start = earliest.get(r.topicPartition())
        if r.count() > 0 and start is not None and r.fromOffset < start:
            raise DataLossError(
                f"{r} starts below the earliest offset still in Kafka ({start}) for topic "
                f"{r.topic} partition {r.partition}: records "
                f"[{r.fromOffset}, {min(start, r.untilOffset)}) "
                "were removed (retention or delete-records); start the range at "
                f"{start} or later"
            )


def _check_no_overlap(ranges: Sequence[OffsetRange]) -> None:
    """Refuse two non-empty ranges of one partition that share an offset (read twice)."""
    by_partition: dict[TopicPartition, list[OffsetRange]] = {}
    for r in ranges:
        if r.count() > 0:
            by_partition.setdefault(r.topicPartition(), []).append(r)
    for tp, parts in by_partition.items():
        parts.sort(key=lambda r: (r.fromOffset, r.untilOffset))
        for before, after in zip(parts, parts[1:]):
            if after.fromOffset < before.untilOffset:
                raise InvalidOffsetRangeError(
                    f"offsetRanges [{before.fromOffset}, {before.untilOffset}) and "
                    f"[{after.fromOffset}, {after.untilOffset}) of topic {tp.topic} partition "
                    f"{tp.partition} overlap, so offsets {after.fromOffset} to "
                    f"{min(before.untilOffset, after.untilOffset) - 1} would be read twice; "
                    "give each offset to one range (adjacent ranges such as [0, 5) and [5, 10) "
                    "are fine)"
                )


class KafkaUtils:
    """Factory functions for Kafka RDDs (and, later, direct streams).

    Examples
    --------
    >>> rdd = KafkaUtils.createRDD(sc, {"bootstrap.servers": "localhost:9092",  # doctest: +SKIP
    ...                                 "group.id": "app"},
    ...                            [OffsetRange("events", 0, 0, 100)])
    >>> rdd.count()                                                  # doctest: +SKIP
    100
    """

    def __init__(self) -> None:
        raise TypeError("KafkaUtils is a namespace of static methods")

    @staticmethod
    def createRDD(
        sc: SparkContext,
        kafkaParams: Mapping[str, Any],
        offsetRanges: Sequence[OffsetRange],
        locationStrategy: LocationStrategy = PreferConsistent,
    ) -> KafkaRDD:
        """Create an RDD of :class:`~dstream_kafka.record.ConsumerRecord` for exact offset ranges.

        Partition ``i`` reads ``offsetRanges[i]`` (``fromOffset`` inclusive, ``untilOffset``
        exclusive); ``rdd.offsetRanges()`` returns a copy of the list. As Spark's
        ``createRDD``, the executor parameters go through ``fix_kafka_params`` and reads
        always use the executor consumer cache (``spark.streaming.kafka.consumer.cache.enabled``
        applies to direct streams only).

        Before any job runs this checks the ranges' types, that no two non-empty ranges of
        one partition share an offset (it would be read twice), the location strategy, the Kafka
        parameters and deserializers, that every topic partition exists, and that no
        non-empty range starts below the earliest offset still in the log or ends past the log
        end (the last stable offset under ``isolation.level=read_committed``).

        Parameters
        ----------
        sc : SparkContext
        kafkaParams : mapping
            Kafka consumer parameters, Java (``bootstrap.servers``) or kafka-python
            (``bootstrap_servers``) spelling; ``bootstrap.servers`` is required.
        offsetRanges : sequence of OffsetRange
        locationStrategy : LocationStrategy
            ``PreferConsistent`` (default) or ``PreferFixed(hostMap)``. ``PreferBrokers`` is
            rejected: a single RDD has no driver consumer to look leaders up with.

        Raises
        ------
        ConfigurationError
            Bad ranges, strategy or parameters (subclasses name the problem);
            ``InvalidOffsetRangeError`` for overlapping ranges of one partition.
        BrokerTimeoutError
            No bootstrap server answered within ``bootstrap.timeout.ms`` (kafkaParams,
            default 30000): the message names the servers and the likely cause.
        UnknownTopicPartitionError
            A topic or partition that does not exist.
        DataLossError
            A range starting below the log start offset.
        InvalidOffsetRangeError
            A range ending past the log end, naming the range and the log end.
        """
        _check_context(sc)
        if isinstance(offsetRanges, (str, bytes)) or not isinstance(offsetRanges, Sequence):
            raise ConfigurationError(
                f"offsetRanges must be a list of OffsetRange, got {type(offsetRanges).__name__}"
            )
        ranges = list(offsetRanges)  # OffsetRange is immutable, so copying the list clones them
        for r in ranges:
            if not isinstance(r, OffsetRange):
                raise ConfigurationError(
                    f"offsetRanges must hold OffsetRange objects, got {r!r}; build them with "
                    "OffsetRange.create(topic, partition, fromOffset, untilOffset)"
                )
        _check_no_overlap(ranges)
        hosts = _check_strategy(locationStrategy, ranges)
        configs = ClientConfigs.of(kafkaParams)  # translated once, for every client below
        _validate_against_cluster(configs, ranges)
        settings = read_settings(sc, configs, use_cache=True)
        locations = preferred_locations_for(sc, ranges, hosts)
        return KafkaRDD(sc, configs.executor, ranges, locations, settings)

    @staticmethod
    def createRDDFromOptions(
        sc: SparkContext,
        kafkaParams: Mapping[str, Any],
        options: Mapping[str, Any] | None = None,
        locationStrategy: LocationStrategy = PreferConsistent,
        **moreOptions: Any,
    ) -> KafkaRDD:
        """Create an RDD from Structured Streaming's batch options (offsets resolved now).

        Options (case-insensitive, from ``options`` and keyword arguments): exactly one of
        ``assign`` (JSON ``{"t":[0,1]}`` or a list of topic partitions), ``subscribe``
        (comma-separated or a list) or ``subscribePattern`` (regex, partial match);
        ``startingOffsets`` (``earliest`` by default, or JSON ``{"t":{"0":23}}`` with -2 =
        earliest), ``endingOffsets`` (``latest`` by default, or JSON with -1 = latest),
        ``startingOffsetsByTimestamp`` / ``endingOffsetsByTimestamp`` (JSON of ms),
        ``startingTimestamp`` / ``endingTimestamp`` (one ms value for all partitions),
        ``startingOffsetsByTimestampStrategy`` (``error`` or ``latest``), ``failOnDataLoss``
        (true), ``minPartitions`` / ``maxRecordsPerPartition`` (Spark's range splitting) and
        ``kafkaConsumer.pollTimeoutMs``.

        Empty ranges are left out, as in Structured Streaming. Split pieces get no preferred
        location, so they spread over all executors; unsplit ranges are placed by
        ``locationStrategy`` (``PreferBrokers`` works here: the leaders come from the driver
        consumer that resolved the offsets). With ``failOnDataLoss=False`` ranges no longer in Kafka are
        reported by ``rdd.lostOffsetRanges()`` and a warning.

        Raises
        ------
        ConfigurationError, UnknownTopicPartitionError, DataLossError
            See :func:`~dstream_kafka.plan.batch_options.plan_batch_read`;
            ``ConfigurationError`` too when ``kafkaParams`` or ``options`` is not a dict.
        BrokerTimeoutError
            As :meth:`createRDD`.
        """
        _check_context(sc, "KafkaUtils.createRDDFromOptions",
                       "KafkaUtils.createDataFrameFromOptions(spark, kafkaParams, options)")
        if locationStrategy is not PreferBrokers:  # before any broker round trip
            _check_strategy(locationStrategy, [])
        read = plan_batch_read(kafkaParams, options, moreOptions, sc)
        if locationStrategy is PreferBrokers:
            # Unlike createRDD, there is a driver consumer here to look leaders up with.
            hosts = dict(read.resolution.leaders)
        else:
            hosts = _check_strategy(locationStrategy, read.resolution.ranges)
        locations: list[str | None] = (
            [None] * len(read.ranges) if read.split
            else preferred_locations_for(sc, read.ranges, hosts, executor_locations(sc)))
        rdd = KafkaRDD(sc, read.configs.executor, read.ranges, locations, read.settings)
        rdd.add_lost_ranges(read.resolution.lost)
        return rdd

    @staticmethod
    def createDataFrame(spark: Any, kafkaParams: Mapping[str, Any],
                        offsetRanges: Sequence[OffsetRange], includeHeaders: bool = False) -> Any:
        """Create a DataFrame in Structured Streaming's Kafka schema for exact offset ranges.

        Columns ``key``, ``value`` (binary), ``topic`` (string), ``partition`` (int), ``offset``
        (long), ``timestamp`` (timestamp), ``timestampType`` (int), and with ``includeHeaders``
        ``headers`` (array of struct key string, value binary; null for a record without
        headers). Spark partition ``i`` reads ``offsetRanges[i]`` through the same cached
        executor consumers as :meth:`createRDD`, decoded into Arrow record batches
        (``mapInArrow``); works on classic and Spark Connect sessions. Offsets without a
        record (compaction, transaction markers, aborted records under ``read_committed``) are
        skipped, as Structured Streaming does. ``dstream_kafka.sql.offsetRanges(df)`` returns
        the ranges. Checks as :meth:`createRDD`, before any job; key and value deserializers
        other than ``ByteArrayDeserializer`` are refused (the columns are binary).

        Raises
        ------
        ConfigurationError, BrokerTimeoutError, UnknownTopicPartitionError, DataLossError
            As :meth:`createRDD`.
        MissingDependencyError
            Without pyarrow (``pip install dstream_kafka[dataframe]``).
        """
        from dstream_kafka.sql.frame import (
            build_dataframe, check_raw_bytes, offset_ranges_argument)

        _check_dataframe_session(spark)
        ranges = offset_ranges_argument(offsetRanges)
        _check_no_overlap(ranges)
        configs = ClientConfigs.of(kafkaParams)
        check_raw_bytes(configs)
        _validate_against_cluster(configs, ranges)
        return build_dataframe(spark, configs, ranges, bool(includeHeaders))

    @staticmethod
    def createDataFrameFromOptions(spark: Any, kafkaParams: Mapping[str, Any],
                                   options: Mapping[str, Any] | None = None,
                                   **moreOptions: Any) -> Any:
        """Create a DataFrame from Structured Streaming's batch options (offsets resolved now).

        The options of :meth:`createRDDFromOptions` (``startingOffsets``, ``endingOffsets``,
        the timestamp options, ``minPartitions``, ``maxRecordsPerPartition``,
        ``failOnDataLoss``, ``kafkaConsumer.pollTimeoutMs``) plus ``includeHeaders``
        (default false); the DataFrame is :meth:`createDataFrame`'s. Empty ranges are left
        out. With ``failOnDataLoss=false`` ranges already gone when planning are returned by
        ``dstream_kafka.sql.lostOffsetRanges(df)``; records executors find deleted while
        reading are skipped with a warning in the executor's log.

        Raises
        ------
        ConfigurationError, UnknownTopicPartitionError, DataLossError, BrokerTimeoutError
            As :meth:`createRDDFromOptions`.
        MissingDependencyError
            Without pyarrow (``pip install dstream_kafka[dataframe]``).
        """
        from dstream_kafka.sql.frame import build_dataframe, check_raw_bytes, session_conf

        _check_dataframe_session(spark)
        read = plan_batch_read(kafkaParams, options, moreOptions, session_conf(spark),
                               dataframe=True, check=check_raw_bytes)
        return build_dataframe(spark, read.configs, read.ranges, read.options.include_headers,
                               read.settings, read.resolution.lost)

    @staticmethod
    def createDirectStream(ssc: StreamingContext, locationStrategy: LocationStrategy,
                           consumerStrategy: ConsumerStrategy,
                           perPartitionConfig: PerPartitionConfig | None = None, *,
                           offsetStore: OffsetStore | None = None,
                           maxOffsetsPerTrigger: int | None = None,
                           failOnDataLoss: bool | None = None,
                           options: Mapping[str, Any] | None = None) -> DirectKafkaInputDStream:
        """Create a direct stream: one :class:`KafkaRDD` per batch, one partition per Kafka partition.

        Each batch reads ``[committed offset, latest offset)`` of every partition the consumer
        strategy yields, limited by ``spark.streaming.kafka.maxRatePerPartition``, backpressure
        and ``maxOffsetsPerTrigger``. Offsets are committed only after the batch's output
        operations finished: to ``offsetStore`` when one is given, and to Kafka through
        ``stream.commitAsync(ranges)``.

        Parameters
        ----------
        ssc : dstream_kafka.streaming.StreamingContext
        locationStrategy : LocationStrategy
            ``LocationStrategies.PreferConsistent`` in most cases.
        consumerStrategy : ConsumerStrategy
            ``ConsumerStrategies.Subscribe``, ``SubscribePattern`` or ``Assign``.
        perPartitionConfig : PerPartitionConfig, optional
            Per-partition max/min rates; defaults to the ``spark.streaming.kafka.*`` keys.
        offsetStore : OffsetStore, optional
            Where committed offsets live (``OffsetStores.checkpoint/kafka/sqlite/postgres/
            zookeeper``). Without one, a context with ``ssc.checkpoint(dir)`` keeps offsets in
            that folder's offsets log; otherwise the stream starts from the consumer group's
            committed offsets or ``auto.offset.reset``. A store other than the Kafka group store
            never starts a partition it holds no offset for at the group's committed offset.
        maxOffsetsPerTrigger : int, optional
            Structured Streaming's cap on records per batch, shared by lag.
        failOnDataLoss : bool, optional
            True (the default): stored offsets that fell out of retention stop the stream with
            an error. False: continue at the earliest offset and record the lost range in the
            store. The ``failOnDataLoss`` option says the same; both must agree.
        options : mapping of str to str, optional
            Structured Streaming's Kafka source options (names case-insensitive):
            ``startingOffsets`` (``earliest``, ``latest`` or JSON ``{"t":{"0":23,"1":-2}}``),
            ``startingOffsetsByTimestamp``, ``startingTimestamp``,
            ``startingOffsetsByTimestampStrategy``, ``failOnDataLoss``, and the ending options
            ``endingOffsets`` (``latest`` or JSON), ``endingOffsetsByTimestamp``,
            ``endingTimestamp``, which make the stream a bounded run: it reads up to the end
            offsets resolved at its start in rate-limited batches, commits them and stops the
            context gracefully (Trigger.AvailableNow). Starting options apply only to partitions
            the offset store holds no offset for. See :mod:`dstream_kafka.plan.stream_options`.

        Returns
        -------
        DirectKafkaInputDStream
            Its batch RDDs have ``offsetRanges()``; the stream has ``commitAsync``,
            ``transaction(batch_time)``, ``lastProgress`` and ``recentProgress``.
        """
        from dstream_kafka.plan.direct_stream import DirectKafkaInputDStream
        from dstream_kafka.spark_connect import refuse_connect
        from dstream_kafka.streaming.context import StreamingContext

        refuse_connect(ssc, "KafkaUtils.createDirectStream", _CONNECT_LOOP)
        if isinstance(ssc, StreamingContext) and is_active_context(ssc.sparkContext):
            _check_worker_python(ssc.sparkContext)
        return DirectKafkaInputDStream(ssc, locationStrategy, consumerStrategy, perPartitionConfig,
                                       offsetStore=offsetStore, maxOffsetsPerTrigger=maxOffsetsPerTrigger,
                                       failOnDataLoss=failOnDataLoss, options=options)
