"""PySpark 2.4's ``pyspark.streaming.kafka`` (Kafka 0-8) on this engine.

Programs written for ``pyspark.streaming.kafka`` run unchanged but for their imports::

    from pyspark.streaming import StreamingContext            # old
    from pyspark.streaming.kafka import KafkaUtils, OffsetRange
    from dstream_kafka.streaming import StreamingContext      # new
    from dstream_kafka.streaming.kafka import KafkaUtils, OffsetRange

The names, signatures, element shapes, ``TypeError`` messages and printed forms are those
of 2.4. Underneath, a direct stream is this package's Kafka direct stream with a fixed
partition assignment, and ``createRDD`` is :meth:`dstream_kafka.KafkaUtils.createRDD`;
see ``docs/porting.rst`` for what differs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from pyspark import RDD, StorageLevel

from dstream_kafka._spark_internals import PipelinedRDD
from dstream_kafka.compat.kafka08 import (
    Broker,
    KafkaMessageAndMetadata,
    OffsetRange,
    ReceiverStreamNotSupportedError,
    TopicAndPartition,
    check_offsets_available,
    record_converter,
    start_offsets,
    translate_kafka_params,
    utf8_decoder,
)
from dstream_kafka.offsets import HasOffsetRanges
from dstream_kafka.offsets import OffsetRange as OffsetRange010
from dstream_kafka.streaming.clock import ms_to_datetime
from dstream_kafka.streaming.context import StreamingContext
from dstream_kafka.streaming.dstream import DStream, TransformedDStream, takes_time

__all__ = ["Broker", "KafkaMessageAndMetadata", "KafkaUtils", "OffsetRange",
           "TopicAndPartition", "utf8_decoder"]

Decoder = Callable[[Any], Any]
MessageHandler = Callable[[KafkaMessageAndMetadata], Any]


class KafkaUtils:
    """Entry points of the Kafka 0-8 API: ``createDirectStream`` and ``createRDD``."""

    @staticmethod
    def createStream(ssc: Any, zkQuorum: str, groupId: str, topics: Any,
                     kafkaParams: Mapping[str, Any] | None = None,
                     storageLevel: StorageLevel = StorageLevel.MEMORY_AND_DISK_2,
                     keyDecoder: Decoder = utf8_decoder,
                     valueDecoder: Decoder = utf8_decoder) -> DStream[Any]:
        """Not supported: the receiver-based stream read through ZooKeeper.

        Raises
        ------
        ReceiverStreamNotSupportedError
            Always; the message shows the ``createDirectStream`` call that replaces it.
        """
        names = sorted(topics) if isinstance(topics, dict) else ["<topic>"]
        params = {"metadata.broker.list": "<broker host:port>", "group.id": groupId}
        reset = (kafkaParams or {}).get("auto.offset.reset")
        if reset is not None:
            params["auto.offset.reset"] = reset
        raise ReceiverStreamNotSupportedError(
            "KafkaUtils.createStream (the receiver-based Kafka 0-8 stream that reads through "
            f"ZooKeeper at {zkQuorum}) is not supported. Use KafkaUtils.createDirectStream("
            f"ssc, {names!r}, {params!r}) instead: it reads the same topics from the brokers "
            "and yields the same (key, value) pairs. See docs/porting.rst.")

    @staticmethod
    def createDirectStream(ssc: StreamingContext, topics: list[str],
                           kafkaParams: dict[str, Any],
                           fromOffsets: Mapping[TopicAndPartition, int] | None = None,
                           keyDecoder: Decoder = utf8_decoder,
                           valueDecoder: Decoder = utf8_decoder,
                           messageHandler: MessageHandler | None = None) -> KafkaDStream:
        """Create a stream that reads each batch's new messages directly from Kafka.

        The partitions are fixed now: those of ``fromOffsets``, else every partition the
        topics have (no partitions are added later, as in 0-8). Without ``fromOffsets`` the
        stream starts at the earliest offsets for ``auto.offset.reset=smallest`` and at the
        latest offsets otherwise. Positions are tracked by the stream (and the checkpoint),
        never committed to Kafka.

        Parameters
        ----------
        ssc : dstream_kafka.streaming.StreamingContext
        topics : list of str
        kafkaParams : dict
            0-8 parameters: ``metadata.broker.list`` (or ``bootstrap.servers``),
            ``auto.offset.reset`` (``smallest``/``largest``), ``group.id``, other consumer
            settings.
        fromOffsets : dict of TopicAndPartition to int, optional
            Inclusive starting offset per partition; its topics must equal ``topics``.
        keyDecoder, valueDecoder : callable
            Applied to the raw key and value bytes (default :func:`utf8_decoder`).
        messageHandler : callable, optional
            ``messageHandler(KafkaMessageAndMetadata)`` gives each element instead of
            ``(key, value)``.

        Returns
        -------
        KafkaDStream
            Its RDDs (in ``foreachRDD`` and ``transform``) have ``offsetRanges()``.

        Raises
        ------
        TypeError
            "topics should be list", "kafkaParams should be dict", or an ``ssc`` from
            ``pyspark.streaming``.
        ConfigurationError
            Missing brokers, unknown parameters, or ``fromOffsets`` topics that differ from
            ``topics``.
        UnknownTopicPartitionError
            A topic or partition the cluster does not have.
        """
        from dstream_kafka.plan.consumer_strategy import ConsumerStrategies
        from dstream_kafka.kafka_utils import KafkaUtils as KafkaUtils010
        from dstream_kafka.read.placement import LocationStrategies

        _expect(topics, list, "topics should be list")
        _expect(kafkaParams, dict, "kafkaParams should be dict")
        _check_streaming_context(ssc)
        params, reset = translate_kafka_params(kafkaParams)
        offsets = start_offsets(params, topics, reset, fromOffsets or {})
        strategy = ConsumerStrategies.Assign(sorted(offsets), params, offsets)
        source = KafkaUtils010.createDirectStream(ssc, LocationStrategies.PreferConsistent,
                                                  strategy)
        return KafkaDStream(source, record_converter(keyDecoder, valueDecoder, messageHandler))

    @staticmethod
    def createRDD(sc: Any, kafkaParams: dict[str, Any], offsetRanges: list[OffsetRange],
                  leaders: Mapping[TopicAndPartition, Broker] | None = None,
                  keyDecoder: Decoder = utf8_decoder, valueDecoder: Decoder = utf8_decoder,
                  messageHandler: MessageHandler | None = None) -> KafkaRDD:
        """Create an RDD of the messages in exact offset ranges.

        Every range is checked against the brokers first, as 0-8 did: a range that starts
        before the earliest or ends after the latest offset fails before any job runs.

        Parameters
        ----------
        sc : SparkContext
        kafkaParams : dict
            As for :meth:`createDirectStream`; ``auto.offset.reset`` is not used.
        offsetRanges : list of OffsetRange
            Partition ``i`` of the RDD reads ``offsetRanges[i]``.
        leaders : dict of TopicAndPartition to Broker, optional
            Tasks of a partition prefer an executor on its broker's host; Kafka clients
            find the actual leader themselves.
        keyDecoder, valueDecoder, messageHandler
            As for :meth:`createDirectStream`.

        Raises
        ------
        TypeError
            "kafkaParams should be dict", "offsetRanges should be list", or elements of
            the wrong type.
        ConfigurationError
            "Offsets not available on leader: ..." and other invalid input.
        UnknownTopicPartitionError
            A topic or partition the cluster does not have.
        """
        from dstream_kafka.kafka_utils import KafkaUtils as KafkaUtils010
        from dstream_kafka.read.placement import LocationStrategies

        if leaders is None:
            leaders = {}
        _expect(kafkaParams, dict, "kafkaParams should be dict")
        _expect(offsetRanges, list, "offsetRanges should be list")
        ranges = [_to_kafka010(r) for r in offsetRanges]
        strategy = LocationStrategies.PreferConsistent
        if leaders:
            strategy = LocationStrategies.PreferFixed(_leader_hosts(leaders))
        params, _reset = translate_kafka_params(kafkaParams)
        check_offsets_available(params, ranges)
        rdd = KafkaUtils010.createRDD(sc, params, ranges, strategy)
        return KafkaRDD(rdd, record_converter(keyDecoder, valueDecoder, messageHandler),
                        [OffsetRange.from_kafka010(r) for r in ranges])


class KafkaRDD(PipelinedRDD[Any, Any]):
    """An RDD of a 0-8 stream or ``createRDD``: decoded elements and ``offsetRanges()``.

    Transformations of it return plain RDDs, as in 2.4.
    """

    def __init__(self, source: RDD[Any], convert: Callable[[Any], Any],
                 offsetRanges: Sequence[OffsetRange]) -> None:
        super().__init__(source, lambda _, records: map(convert, records), True)
        self._offset_ranges = [OffsetRange(r.topic, r.partition, r.fromOffset, r.untilOffset)
                               for r in offsetRanges]

    def offsetRanges(self) -> list[OffsetRange]:
        """Return the offset ranges this RDD reads, one per partition, in partition order."""
        return [OffsetRange(r.topic, r.partition, r.fromOffset, r.untilOffset)
                for r in self._offset_ranges]


class KafkaDStream(DStream[Any]):
    """The stream ``createDirectStream`` returns; each RDD is a :class:`KafkaRDD`.

    ``foreachRDD`` and ``transform`` functions, with ``(rdd)`` or ``(time, rdd)``, get that
    RDD and can call ``rdd.offsetRanges()``. Streams derived with other operations carry
    plain RDDs.
    """

    def __init__(self, source: DStream[Any], convert: Callable[[Any], Any]) -> None:
        super().__init__(source._ssc, [source])
        self._convert = convert

    def compute(self, time_ms: int) -> KafkaRDD | None:
        rdd = self._parents[0]._get_or_compute(time_ms)
        if rdd is None:
            return None
        ranges = [OffsetRange.from_kafka010(r) for r in cast(HasOffsetRanges, rdd).offsetRanges()]
        return KafkaRDD(rdd, self._convert, ranges)

    def transform(self, func: Callable[..., RDD[Any] | None]) -> KafkaTransformedDStream:
        """Return a stream of ``func(rdd)`` or ``func(time, rdd)`` per batch."""
        return KafkaTransformedDStream(self, func)


class KafkaTransformedDStream(TransformedDStream[Any]):
    """``KafkaDStream.transform``: the function receives the batch's :class:`KafkaRDD`."""

    def __init__(self, prev: KafkaDStream, func: Callable[..., RDD[Any] | None]) -> None:
        if takes_time(func, 1, "transform function"):
            super().__init__(prev._ssc, [prev],
                             lambda t, rdds: func(ms_to_datetime(t), rdds[0]))
        else:
            super().__init__(prev._ssc, [prev], lambda t, rdds: func(rdds[0]))


def _expect(value: Any, kind: type, message: str) -> None:
    # PySpark 2.4 raised these TypeErrors with exactly these messages; ported code may match them.
    if not isinstance(value, kind):
        raise TypeError(message)


def _check_streaming_context(ssc: Any) -> None:
    if not isinstance(ssc, StreamingContext):
        hint = ""
        if type(ssc).__module__.startswith("pyspark.streaming"):
            hint = ("; change 'from pyspark.streaming import StreamingContext' to "
                    "'from dstream_kafka.streaming import StreamingContext'")
        raise TypeError("ssc should be a dstream_kafka.streaming.StreamingContext, got "
                        f"{type(ssc).__module__}.{type(ssc).__name__}{hint}")


def _to_kafka010(r: Any) -> OffsetRange010:
    if isinstance(r, OffsetRange):
        return r.to_kafka010()
    if isinstance(r, OffsetRange010):
        return r
    raise TypeError(f"offsetRanges should hold OffsetRange objects, got {type(r).__name__}")


def _leader_hosts(leaders: Mapping[Any, Any]) -> dict[Any, str]:
    if not isinstance(leaders, Mapping):
        raise TypeError("leaders should be dict")
    hosts = {}
    for tp, broker in leaders.items():
        if not isinstance(tp, TopicAndPartition):
            raise TypeError(f"leaders keys should be TopicAndPartition, got {type(tp).__name__}")
        if not isinstance(broker, Broker):
            raise TypeError(f"leaders values should be Broker, got {type(broker).__name__}")
        hosts[tp.to_topic_partition()] = broker.host
    return hosts
