"""The Kafka 0-8 vocabulary of PySpark 2.4 and its translation to this package.

``pyspark.streaming.kafka`` (removed in Spark 3.0) had its own value classes and Kafka
parameter names. This module holds them with their old behaviour, plus the driver-side
steps the JVM helper used to do: translating 0-8 ``kafkaParams``, choosing where a direct
stream starts, and checking ``createRDD`` ranges against the brokers before any job.
The public spelling lives in :mod:`dstream_kafka.streaming.kafka`; this module imports no
PySpark, so executors unpickle :class:`KafkaMessageAndMetadata` cheaply.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dstream_kafka.errors import ConfigurationError, ReceiverStreamNotSupportedError
from dstream_kafka.client.kafka_params import consumer_config, utf8_decoder
from dstream_kafka.offsets import OffsetRange as OffsetRange010
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.record import ConsumerRecord

__all__ = [
    "Broker",
    "KafkaMessageAndMetadata",
    "OffsetRange",
    "ReceiverStreamNotSupportedError",
    "TopicAndPartition",
    "check_offsets_available",
    "record_converter",
    "start_offsets",
    "translate_kafka_params",
    "utf8_decoder",
]

log = logging.getLogger(__name__)

#: 0-8 consumer settings whose new name differs.
_RENAMED_08 = {
    "fetch.message.max.bytes": "max.partition.fetch.bytes",
    "socket.receive.buffer.bytes": "receive.buffer.bytes",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
}
#: 0-8 settings without meaning here: ZooKeeper, the high-level consumer, offset commits
#: (the 0-8 direct stream never committed) and JVM decoders (Python always got bytes).
_IGNORED_08 = frozenset({
    "zookeeper.connect", "zookeeper.connection.timeout.ms", "zookeeper.session.timeout.ms",
    "zookeeper.sync.time.ms", "auto.commit.enable", "auto.commit.interval.ms", "consumer.id",
    "socket.timeout.ms", "refresh.leader.backoff.ms", "rebalance.max.retries",
    "rebalance.backoff.ms", "num.consumer.fetchers", "queued.max.message.chunks",
    "consumer.timeout.ms", "offsets.storage", "dual.commit.enabled",
    "offsets.channel.backoff.ms", "offsets.channel.socket.timeout.ms",
    "offsets.commit.max.retries", "key.deserializer", "value.deserializer",
})


class OffsetRange:
    """A range of offsets of one Kafka topic and partition (PySpark 2.4's class).

    ``fromOffset`` is inclusive and ``untilOffset`` exclusive. As in 2.4 the attributes are
    plain and mutable, equality compares the four fields of two ``OffsetRange`` objects and
    instances are not hashable. Ranges are checked when they are used (``createRDD``).

    Parameters
    ----------
    topic : str
    partition : int
    fromOffset : int
    untilOffset : int
    """

    __hash__ = None  # type: ignore[assignment]  # 2.4 defined __eq__ only

    def __init__(self, topic: str, partition: int, fromOffset: int, untilOffset: int) -> None:
        self.topic = topic
        self.partition = partition
        self.fromOffset = fromOffset
        self.untilOffset = untilOffset

    def __eq__(self, other: object) -> bool:
        if isinstance(other, self.__class__):
            return (self.topic, self.partition, self.fromOffset, self.untilOffset) == (
                other.topic, other.partition, other.fromOffset, other.untilOffset)
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __str__(self) -> str:
        # 2.4's text, including its missing closing parenthesis.
        return "OffsetRange(topic: %s, partition: %d, range: [%d -> %d]" % (
            self.topic, self.partition, self.fromOffset, self.untilOffset)

    __repr__ = __str__

    def to_kafka010(self) -> OffsetRange010:
        """Return this range as the package's :class:`dstream_kafka.offsets.OffsetRange`
        (validated there; not in 2.4)."""
        return OffsetRange010(self.topic, self.partition, self.fromOffset, self.untilOffset)

    @classmethod
    def from_kafka010(cls, r: OffsetRange010) -> OffsetRange:
        """Return the package's :class:`dstream_kafka.offsets.OffsetRange` ``r`` as a 0-8
        range (not in 2.4)."""
        return cls(r.topic, r.partition, r.fromOffset, r.untilOffset)


class TopicAndPartition:
    """A Kafka topic and partition, the key type of ``fromOffsets`` and ``leaders``.

    Equal and hashed by ``(topic, partition)``, as in 2.4.
    """

    def __init__(self, topic: str, partition: int) -> None:
        self._topic = topic
        self._partition = partition

    def __eq__(self, other: object) -> bool:
        if isinstance(other, self.__class__):
            return self._topic == other._topic and self._partition == other._partition
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self._topic, self._partition))

    def __repr__(self) -> str:
        return f"TopicAndPartition({self._topic!r}, {self._partition!r})"

    def to_topic_partition(self) -> TopicPartition:
        """Return the validated :class:`dstream_kafka.offsets.TopicPartition` (not in 2.4).

        Raises
        ------
        ConfigurationError
            If the topic is not a non-empty string or the partition not an int >= 0.
        """
        if not isinstance(self._topic, str) or not self._topic:
            raise ConfigurationError(f"{self!r}: the topic must be a non-empty string")
        if isinstance(self._partition, bool) or not isinstance(self._partition, int) \
                or self._partition < 0:
            raise ConfigurationError(f"{self!r}: the partition must be an int >= 0")
        return TopicPartition(self._topic, self._partition)


class Broker:
    """The host and port of a Kafka broker (values of ``createRDD``'s ``leaders``)."""

    def __init__(self, host: str, port: int) -> None:
        self._host = host
        self._port = port

    def __repr__(self) -> str:
        return f"Broker({self._host!r}, {self._port!r})"

    @property
    def host(self) -> str:
        """The broker's host (2.4 kept it as ``_host`` only)."""
        return self._host


class KafkaMessageAndMetadata:
    """One Kafka message as ``messageHandler`` receives it (PySpark 2.4's class).

    ``topic``, ``partition`` and ``offset`` are attributes; ``key`` and ``message`` are the
    raw bytes passed through the stream's ``keyDecoder`` / ``valueDecoder``
    (``utf8_decoder`` by default; the keyword-only arguments of the same names, not in 2.4,
    set them). Pickles as the five raw fields, dropping the decoders.
    """

    def __init__(self, topic: str, partition: int, offset: int, key: bytes | None,
                 message: bytes | None, *, keyDecoder: Callable[[bytes | None], Any] = utf8_decoder,
                 valueDecoder: Callable[[bytes | None], Any] = utf8_decoder) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self._rawKey, self._rawMessage = key, message
        self._keyDecoder, self._valueDecoder = keyDecoder, valueDecoder

    def __str__(self) -> str:
        return "KafkaMessageAndMetadata(topic: %s, partition: %d, offset: %d, key and message...)" \
            % (self.topic, self.partition, self.offset)

    __repr__ = __str__

    def __reduce__(self) -> tuple[Any, ...]:
        return (KafkaMessageAndMetadata,
                (self.topic, self.partition, self.offset, self._rawKey, self._rawMessage))

    def _set_key_decoder(self, decoder: Callable[[bytes | None], Any]) -> None:
        """Decode :attr:`key` with ``decoder`` (2.4's setter, kept for ported code)."""
        self._keyDecoder = decoder

    def _set_value_decoder(self, decoder: Callable[[bytes | None], Any]) -> None:
        """Decode :attr:`message` with ``decoder`` (2.4's setter, kept for ported code)."""
        self._valueDecoder = decoder

    @property
    def key(self) -> Any:
        """The decoded key (``None`` for a message without key, with ``utf8_decoder``)."""
        return self._keyDecoder(self._rawKey)

    @property
    def message(self) -> Any:
        """The decoded value."""
        return self._valueDecoder(self._rawMessage)


def record_converter(keyDecoder: Callable[[Any], Any], valueDecoder: Callable[[Any], Any],
                     messageHandler: Callable[[KafkaMessageAndMetadata], Any] | None
                     ) -> Callable[[ConsumerRecord], Any]:
    """Return the executor function turning a record into what a 0-8 stream yields.

    ``(keyDecoder(key), valueDecoder(value))``, or ``messageHandler(message)`` with the
    decoders set on the :class:`KafkaMessageAndMetadata`.
    """
    if messageHandler is None:
        def decode(r: ConsumerRecord) -> Any:
            return (keyDecoder(r.key), valueDecoder(r.value))
        return decode

    def handle(r: ConsumerRecord) -> Any:
        return messageHandler(KafkaMessageAndMetadata(r.topic, r.partition, r.offset, r.key, r.value,
                                                      keyDecoder=keyDecoder, valueDecoder=valueDecoder))
    return handle


def translate_kafka_params(kafkaParams: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Turn 0-8 ``kafkaParams`` into this package's params and the 0-8 reset value.

    ``metadata.broker.list`` (it wins, as in 0-8) or ``bootstrap.servers`` becomes
    ``bootstrap.servers``; 0-8 names with a new spelling are renamed; 0-8 settings without
    meaning here are dropped (logged at INFO); ``auto.offset.reset`` is taken out and
    returned, because only the 0-8 layer interprets it. The result is checked with
    :func:`~dstream_kafka.client.kafka_params.consumer_config`, so unknown names fail now.

    Raises
    ------
    ConfigurationError
        Without a broker list, or for settings the Kafka consumer does not know.
    """
    params: dict[str, Any] = {}
    brokers = kafkaParams.get("metadata.broker.list") or kafkaParams.get("bootstrap.servers")
    if not brokers:
        raise ConfigurationError(
            "Must specify metadata.broker.list or bootstrap.servers in kafkaParams, "
            'e.g. {"metadata.broker.list": "localhost:9092"}')
    reset = kafkaParams.get("auto.offset.reset")
    for key, value in kafkaParams.items():
        if key in ("metadata.broker.list", "bootstrap.servers", "auto.offset.reset"):
            continue
        if key in _IGNORED_08:
            log.info("Ignoring Kafka 0-8 parameter %s: it has no meaning for the direct "
                     "stream on this engine", key)
            continue
        params[_RENAMED_08.get(key, key)] = value
    params["bootstrap.servers"] = brokers
    consumer_config(params)  # fail now on unknown names or bad values
    return params, None if reset is None else str(reset)


def _topic_partitions(tps: Iterable[Any], what: str) -> list[TopicPartition]:
    result = []
    for tp in tps:
        if not isinstance(tp, TopicAndPartition):
            raise TypeError(f"{what} keys should be TopicAndPartition, got {type(tp).__name__}")
        result.append(tp.to_topic_partition())
    return result


def start_offsets(params: Mapping[str, Any], topics: list[str], reset: str | None,
                  fromOffsets: Mapping[Any, Any]) -> dict[TopicPartition, int]:
    """Return the partitions a 0-8 direct stream reads and where each starts.

    With ``fromOffsets``, exactly its partitions and offsets; its topics must equal
    ``topics``. Otherwise every partition the topics have now (0-8 never discovered new
    ones), at the earliest offset for ``auto.offset.reset=smallest`` and at the latest
    offset for ``largest``, for no value and, as in 2.4, for any other value.

    Raises
    ------
    ConfigurationError
        When the topics of ``fromOffsets`` differ from ``topics``, or an offset is invalid.
    UnknownTopicPartitionError
        For a topic or partition the cluster does not have.
    """
    from dstream_kafka.client.offset_reader import offset_reader

    if fromOffsets:
        tps = _topic_partitions(fromOffsets, "fromOffsets")
        from_topics = {tp.topic for tp in tps}
        if from_topics != set(topics):
            raise ConfigurationError(
                f"The specified topics: {' '.join(sorted(set(topics)))} do not equal to the "
                f"topic from offsets: {' '.join(sorted(from_topics))}")
        offsets = {}
        for tp, value in zip(tps, fromOffsets.values()):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigurationError(
                    f"fromOffsets[TopicAndPartition({tp.topic!r}, {tp.partition})] must be an "
                    f"int >= 0, got {value!r}")
            offsets[tp] = value
        with offset_reader(params) as reader:
            reader.check_partitions(sorted(offsets))
        return offsets
    if reset is not None and reset.lower() not in ("smallest", "largest"):
        log.warning("auto.offset.reset=%r is not a Kafka 0-8 value (smallest or largest); as "
                    "in Spark 2.4 the stream starts at the latest offsets", reset)
    with offset_reader(params) as reader:
        tps = sorted(TopicPartition(t, p) for t in set(topics)
                     for p in reader.partitions_of(t, refresh=True))
        if reset is not None and reset.lower() == "smallest":
            return reader.earliest(tps)
        return reader.latest(tps)


def check_offsets_available(params: Mapping[str, Any], ranges: list[OffsetRange010]) -> None:
    """Check on the driver that every range lies in its partition's log (0-8's checkOffsets).

    Raises
    ------
    ConfigurationError
        "Offsets not available on leader: ..." naming every range that starts before the
        earliest or ends after the latest offset.
    UnknownTopicPartitionError
        For a topic or partition the cluster does not have.
    """
    from dstream_kafka.client.offset_reader import offset_reader

    tps = sorted({r.topicPartition() for r in ranges})
    if not tps:
        return
    with offset_reader(params) as reader:
        reader.check_partitions(tps)
        earliest, latest = reader.earliest(tps), reader.latest(tps)
    bad = [r for r in ranges if not (earliest[r.topicPartition()] <= r.fromOffset
                                     and r.untilOffset <= latest[r.topicPartition()])]
    if bad:
        # The kafka010 range prints as Spark's Scala OffsetRange did.
        raise ConfigurationError("Offsets not available on leader: " + ",".join(map(str, bad)))
