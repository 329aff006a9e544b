"""Offset vocabulary: topic partitions and offset ranges.

``fromOffset`` is always inclusive and ``untilOffset`` always exclusive, as in Spark's
``org.apache.spark.streaming.kafka010.OffsetRange``. Their JSON forms are
:mod:`dstream_kafka.offsets_json`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from numbers import Integral
from typing import Any, NamedTuple, Protocol, runtime_checkable

from dstream_kafka.errors import ConfigurationError, InvalidOffsetRangeError

__all__ = [
    "EARLIEST",
    "INT32_MAX",
    "INT64_MAX",
    "LATEST",
    "CanCommitOffsets",
    "HasOffsetRanges",
    "OffsetRange",
    "TopicPartition",
    "as_topic_partition",
    "java_string_hash",
]

#: Sentinel offset meaning "the earliest offset still in the log" (Spark's ``EARLIEST``).
EARLIEST = -2
#: Sentinel offset meaning "the log end offset at resolution time" (Spark's ``LATEST``).
LATEST = -1

#: The largest Kafka partition number (a Java ``int``).
INT32_MAX = 2**31 - 1
#: The largest Kafka offset or timestamp (a Java ``long``).
INT64_MAX = 2**63 - 1


def _to_int32(value: int) -> int:
    """Wrap an integer to Java ``int`` (signed 32-bit, two's complement overflow)."""
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value > INT32_MAX else value


@functools.lru_cache(maxsize=4096)
def java_string_hash(s: str) -> int:
    """Return Java's ``String.hashCode()`` of ``s``.

    The hash runs over UTF-16 code units (a character outside the BMP counts as its two
    surrogates) and overflows as a signed 32-bit ``int``. Results are cached, because topic
    names repeat on every batch.

    Examples
    --------
    >>> java_string_hash("hello")
    99162322
    >>> java_string_hash("polygenelubricants")
    -2147483648
    """
    h = 0
    if s.isascii():
        units: Iterable[int] = s.encode("ascii")
    else:
        data = s.encode("utf-16-be", "surrogatepass")
        units = (data[i] << 8 | data[i + 1] for i in range(0, len(data), 2))
    for unit in units:
        h = (31 * h + unit) & 0xFFFFFFFF
    return _to_int32(h)


class TopicPartition(NamedTuple):
    """A Kafka topic and partition number.

    A plain named tuple, so it compares and hashes equal to kafka-python's
    ``kafka.TopicPartition`` and to a ``(topic, partition)`` tuple; either can be used as a
    dictionary key interchangeably.
    """

    topic: str
    partition: int

    def javaHash(self) -> int:
        """Return Kafka's Java ``TopicPartition.hashCode()``.

        It is ``31 * (31 + partition) + topic.hashCode()`` in signed 32-bit arithmetic. Spark
        uses it to place a partition on the same executor in every batch.

        Examples
        --------
        >>> TopicPartition("t1", 1).javaHash()
        4637
        """
        return _to_int32(31 * (31 + self.partition) + java_string_hash(self.topic))


def as_topic_partition(value: Any, what: str = "topic partition") -> TopicPartition:
    """Coerce ``value`` to a validated :class:`TopicPartition`.

    Accepts a :class:`TopicPartition`, kafka-python's ``TopicPartition``, a ``(topic,
    partition)`` tuple or any object with ``topic`` and ``partition`` attributes (such as
    confluent-kafka's ``TopicPartition``).

    Raises
    ------
    ConfigurationError
        If the topic is not a non-empty string or the partition not an int from 0 to
        ``2**31 - 1``.
    """
    if isinstance(value, tuple):
        if len(value) != 2:
            raise ConfigurationError(
                f"Invalid {what} {value!r}: expected a (topic, partition) pair "
                "such as ('events', 0)"
            )
        topic, partition = value
    elif hasattr(value, "topic") and hasattr(value, "partition"):
        topic, partition = value.topic, value.partition
    else:
        raise ConfigurationError(
            f"Invalid {what} {value!r}: expected TopicPartition(topic, partition) "
            "or a (topic, partition) tuple such as ('events', 0)"
        )
    if not isinstance(topic, str) or not topic:
        raise ConfigurationError(
            f"Invalid {what} {value!r}: the topic must be a non-empty string, got {topic!r}"
        )
    plain = type(partition) is int  # the common case skips the abstract-base-class check
    if ((not plain and (isinstance(partition, bool) or not isinstance(partition, Integral)))
            or partition < 0 or int(partition) > INT32_MAX):
        raise ConfigurationError(
            f"Invalid {what} {value!r}: the partition must be an int >= 0 and at most {INT32_MAX}, "
            f"got {partition!r}"
        )
    if type(value) is TopicPartition:
        return value
    return TopicPartition(topic, int(partition))


def _check_offset_field(name: str, value: Any, topic: Any, partition: Any) -> int:
    # Plain ints skip the abstract-base-class check (planning builds one range per partition
    # per batch: at 1,000 partitions that check was a third of the cost).
    if type(value) is not int and (isinstance(value, bool) or not isinstance(value, Integral)):
        raise InvalidOffsetRangeError(
            f"{name} must be an int, got {value!r} ({type(value).__name__}) for topic {topic} "
            f"partition {partition}; pass a whole number such as 0"
        )
    if value < 0:
        hint = (
            "; resolve the EARLIEST (-2) / LATEST (-1) sentinels to real offsets first"
            if name != "partition" and value in (EARLIEST, LATEST)
            else ""
        )
        raise InvalidOffsetRangeError(
            f"{name} must be >= 0, got {value} for topic {topic} partition {partition}{hint}"
        )
    # Kafka offsets are Java longs and partitions Java ints: a larger value cannot be sent.
    limit, spelled = (INT32_MAX, "2**31 - 1") if name == "partition" else (INT64_MAX, "2**63 - 1")
    if int(value) > limit:
        raise InvalidOffsetRangeError(
            f"{name} must be at most {limit} ({spelled}, Kafka's limit), got {value} for topic "
            f"{topic} partition {partition}"
        )
    return int(value)


class OffsetRange:
    """A range of offsets from a single Kafka topic partition.

    ``fromOffset`` is inclusive and ``untilOffset`` exclusive, so the range holds
    ``untilOffset - fromOffset`` offsets (fewer records on compacted or transactional
    topics). Instances are immutable, hashable with value equality over the four fields,
    and picklable.

    Parameters
    ----------
    topic : str
        Kafka topic name.
    partition : int
        Kafka partition id, ``>= 0``.
    fromOffset : int
        Inclusive starting offset, ``>= 0``.
    untilOffset : int
        Exclusive ending offset, ``>= fromOffset``.

    Raises
    ------
    InvalidOffsetRangeError
        If a field has the wrong type, is negative or beyond Kafka's range (partition at most
        ``2**31 - 1``, offsets at most ``2**63 - 1``), or ``fromOffset > untilOffset``.

    Examples
    --------
    >>> r = OffsetRange.create("x", 0, 0, 100)
    >>> r
    OffsetRange(topic: 'x', partition: 0, range: [0 -> 100])
    >>> r.count()
    100
    """

    __slots__ = ("topic", "partition", "fromOffset", "untilOffset")

    topic: str
    partition: int
    fromOffset: int
    untilOffset: int

    def __init__(self, topic: str, partition: int, fromOffset: int, untilOffset: int) -> None:
        if not isinstance(topic, str) or not topic:
            raise InvalidOffsetRangeError(
                f"topic must be a non-empty string, got {topic!r}; pass the Kafka topic name"
            )
        partition = _check_offset_field("partition", partition, topic, partition)
        fromOffset = _check_offset_field("fromOffset", fromOffset, topic, partition)
        untilOffset = _check_offset_field("untilOffset", untilOffset, topic, partition)
        if fromOffset > untilOffset:
            # Spark's KafkaRDD errBeginAfterEnd text, raised here at construction instead.
            raise InvalidOffsetRangeError(
                f"Beginning offset {fromOffset} is after the ending offset {untilOffset} "
                f"for topic {topic} partition {partition}. "
                "You either provided an invalid fromOffset, or the Kafka topic has been damaged"
            )
        setattr_ = object.__setattr__
        setattr_(self, "topic", topic)
        setattr_(self, "partition", partition)
        setattr_(self, "fromOffset", fromOffset)
        setattr_(self, "untilOffset", untilOffset)

    @classmethod
    def create(cls, *args: Any, **kwargs: Any) -> OffsetRange:
        """Build a range from ``(topic, partition, fromOffset, untilOffset)`` or
        ``(topicPartition, fromOffset, untilOffset)``.

        ``topicPartition`` may be any value :func:`as_topic_partition` accepts.
        """
        if args and not isinstance(args[0], str) and len(args) + len(kwargs) == 3:
            tp = as_topic_partition(args[0])
            return cls(tp.topic, tp.partition, *args[1:], **kwargs)
        return cls(*args, **kwargs)

    @classmethod
    def fromTuple(cls, t: tuple[str, int, int, int]) -> OffsetRange:
        """Inverse of :meth:`toTuple` (Spark's ``OffsetRange(tuple)``)."""
        if not isinstance(t, (tuple, list)) or len(t) != 4:
            raise InvalidOffsetRangeError(
                f"Expected a (topic, partition, fromOffset, untilOffset) tuple, got {t!r}"
            )
        return cls(*t)

    def toTuple(self) -> tuple[str, int, int, int]:
        """Return ``(topic, partition, fromOffset, untilOffset)``, the checkpoint form."""
        return (self.topic, self.partition, self.fromOffset, self.untilOffset)

    def topicPartition(self) -> TopicPartition:
        """Return the :class:`TopicPartition` this range reads."""
        return TopicPartition(self.topic, self.partition)

    def count(self) -> int:
        """Return ``untilOffset - fromOffset``, the number of offsets in the range."""
        return self.untilOffset - self.fromOffset

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"OffsetRange is immutable; use OffsetRange.create(...) instead of setting {name}"
        )

    def __delattr__(self, name: str) -> None:
        raise AttributeError("OffsetRange is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OffsetRange):
            return NotImplemented
        return self.toTuple() == other.toTuple()

    def __hash__(self) -> int:
        return hash(self.toTuple())

    def __reduce__(self) -> tuple[type[OffsetRange], tuple[str, int, int, int]]:
        return (OffsetRange, self.toTuple())

    def __repr__(self) -> str:
        return (
            f"OffsetRange(topic: '{self.topic}', partition: {self.partition}, "
            f"range: [{self.fromOffset} -> {self.untilOffset}])"
        )

    __str__ = __repr__


@runtime_checkable
class HasOffsetRanges(Protocol):
    """**Protocol**: an RDD that knows the Kafka offset ranges it reads.

    ``offsetRanges()[i]`` is the range read by RDD partition ``i``.
    """

    def offsetRanges(self) -> list[OffsetRange]:
        """Return the offset ranges, one per RDD partition, in partition order."""
        ...


@runtime_checkable
class CanCommitOffsets(Protocol):
    """**Protocol**: a stream that can commit offset ranges to Kafka (Spark's trait).

    ``commitAsync`` only queues (thread-safe, never blocks); the queue is committed after the
    current batch's output operations finished.
    """

    def commitAsync(self, offsetRanges: Any, callback: Any = None) -> None:
        """Queue ``offsetRanges`` for commit; ``callback(offsets, error)`` reports the result."""
        ...
