"""Offset vocabulary: topic partitions, offset ranges and the offsets JSON codec.

``fromOffset`` is always inclusive and ``untilOffset`` always exclusive, as in Spark's
``org.apache.spark.streaming.kafka010.OffsetRange``. The JSON shapes are those of Spark
Structured Streaming's ``JsonUtils`` (``{"topicA":{"0":23,"1":-1}}`` for offsets and
``{"topicA":[0,1]}`` for partitions), so options and checkpoints read the same as there.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Collection, Iterable, Mapping
from numbers import Integral
from typing import Any, NamedTuple, Protocol, runtime_checkable

from dstream_kafka.errors import ConfigurationError, InvalidOffsetRangeError, OffsetsJsonError

__all__ = [
    "EARLIEST",
    "LATEST",
    "CanCommitOffsets",
    "HasOffsetRanges",
    "OffsetRange",
    "TopicPartition",
    "as_topic_partition",
    "java_string_hash",
    "offset_ranges_from_json",
    "offset_ranges_to_json",
    "partition_offsets_from_json",
    "partition_offsets_to_json",
    "partitions_from_json",
    "partitions_to_json",
]

#: Sentinel offset meaning "the earliest offset still in the log" (Spark's ``EARLIEST``).
EARLIEST = -2
#: Sentinel offset meaning "the log end offset at resolution time" (Spark's ``LATEST``).
LATEST = -1

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


def _to_int32(value: int) -> int:
    """Wrap an integer to Java ``int`` (signed 32-bit, two's complement overflow)."""
    value &= 0xFFFFFFFF
    return value - 0x1_0000_0000 if value > _INT32_MAX else value


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
        If the topic is not a non-empty string or the partition not an int ``>= 0``.
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
    if isinstance(partition, bool) or not isinstance(partition, Integral) or partition < 0:
        raise ConfigurationError(
            f"Invalid {what} {value!r}: the partition must be an int >= 0, got {partition!r}"
        )
    if type(value) is TopicPartition:
        return value
    return TopicPartition(topic, int(partition))


def _check_offset_field(name: str, value: Any, topic: Any, partition: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral):
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
        If a field has the wrong type or is negative, or ``fromOffset > untilOffset``.

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


# ------------------------------------------------------------------------------------------
# JSON codec

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
_PARTITIONS_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'
_RANGES_EXAMPLE = '[{"topic":"topicA","partition":0,"fromOffset":23,"untilOffset":42}]'
_RANGE_KEYS = ("topic", "partition", "fromOffset", "untilOffset")
_DECIMAL = re.compile(r"[0-9]+")


class _JsonProblem(Exception):
    """Internal: one reason a JSON document is malformed, wrapped into OffsetsJsonError."""


def _reject_constant(name: str) -> Any:
    raise _JsonProblem(f"{name} is not a valid offset")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _JsonProblem(f"duplicate key {json.dumps(key)}")
        result[key] = value
    return result


def _load(text: Any) -> Any:
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if not isinstance(text, str):
        raise _JsonProblem(f"expected a JSON string, got {type(text).__name__}")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise _JsonProblem(f"not valid JSON ({exc})") from None


def _fail(field: str, problem: str, example: str, text: Any) -> OffsetsJsonError:
    return OffsetsJsonError(f"Invalid {field}: {problem}. Expected e.g. {example}, got {text}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_topic(topic: str) -> None:
    if not topic:
        raise _JsonProblem('topic name "" is empty; use the Kafka topic name as the key')


def _check_partition_value(topic: str, value: Any) -> int:
    if not _is_int(value) or not 0 <= value <= _INT32_MAX:
        raise _JsonProblem(
            f"partition {json.dumps(value)} of topic {json.dumps(topic)} is not an int in "
            f"[0, {_INT32_MAX}]"
        )
    return int(value)


def partition_offsets_to_json(mapping: Mapping[Any, int]) -> str:
    """Encode ``{TopicPartition: offset}`` as ``{"topic":{"partition":offset}}``.

    Topics and partitions are sorted (topic, then partition number), so equal mappings
    encode to equal strings.

    Examples
    --------
    >>> partition_offsets_to_json({TopicPartition("topicA", 1): -1, ("topicA", 0): 23})
    '{"topicA":{"0":23,"1":-1}}'
    """
    by_topic: dict[str, dict[str, int]] = {}
    for key in sorted(mapping, key=lambda k: tuple(as_topic_partition(k))):
        tp = as_topic_partition(key)
        offset = mapping[key]
        if not _is_int(offset):
            raise ConfigurationError(f"Offset for {tp} must be an int, got {offset!r}")
        by_topic.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return json.dumps(by_topic, separators=(",", ":"), ensure_ascii=False)


def partition_offsets_from_json(
    text: str,
    field: str = "startingOffsets",
    *,
    allowed_sentinels: Collection[int] = (EARLIEST, LATEST),
) -> dict[TopicPartition, int]:
    """Decode ``{"topic":{"partition":offset}}`` into ``{TopicPartition: offset}``.

    Parameters
    ----------
    text : str
        The JSON document.
    field : str
        The option or file name the text came from; error messages start with it.
    allowed_sentinels : collection of int
        Negative offsets that are accepted (``-2`` earliest and ``-1`` latest by default).
        Pass ``()`` where only concrete offsets make sense.

    Raises
    ------
    OffsetsJsonError
        If the text is not that shape. The message names the field and the offending key or
        value and ends with ``Expected e.g. {...}, got <text>``.
    """
    try:
        doc = _load(text)
        if not isinstance(doc, dict):
            raise _JsonProblem("the top level must be an object of topics")
        result: dict[TopicPartition, int] = {}
        for topic, parts in doc.items():
            _check_topic(topic)
            if not isinstance(parts, dict):
                raise _JsonProblem(
                    f"topic {json.dumps(topic)} maps to {json.dumps(parts)}, "
                    'not an object of {"partition": offset}'
                )
            for key, offset in parts.items():
                if not _DECIMAL.fullmatch(key) or int(key) > _INT32_MAX:
                    raise _JsonProblem(
                        f"partition key {json.dumps(key)} of topic {json.dumps(topic)} is not a "
                        "non-negative decimal int"
                    )
                tp = TopicPartition(topic, int(key))
                if tp in result:
                    raise _JsonProblem(
                        f"partition {tp.partition} of topic {json.dumps(topic)} is given twice"
                    )
                if not _is_int(offset) or offset > _INT64_MAX:
                    raise _JsonProblem(
                        f"offset {json.dumps(offset)} for {topic}-{key} is not an int"
                    )
                if offset < 0 and offset not in allowed_sentinels:
                    allowed = ", ".join(str(s) for s in sorted(allowed_sentinels)) or "none"
                    raise _JsonProblem(
                        f"offset {offset} for {topic}-{key} is negative "
                        f"(allowed sentinels: {allowed})"
                    )
                result[tp] = offset
        return result
    except _JsonProblem as problem:
        raise _fail(field, str(problem), _OFFSETS_EXAMPLE, text) from None


def partitions_to_json(partitions: Iterable[Any]) -> str:
    """Encode topic partitions as ``{"topic":[partition, ...]}``, sorted.

    Examples
    --------
    >>> partitions_to_json([("topicA", 1), TopicPartition("topicA", 0)])
    '{"topicA":[0,1]}'
    """
    by_topic: dict[str, list[int]] = {}
    for tp in sorted({as_topic_partition(p) for p in partitions}):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return json.dumps(by_topic, separators=(",", ":"), ensure_ascii=False)


def partitions_from_json(text: str, field: str = "assign") -> list[TopicPartition]:
    """Decode ``{"topic":[partition, ...]}`` into topic partitions, in document order.

    Raises
    ------
    OffsetsJsonError
        If the text is not that shape or lists a partition twice.
    """
    try:
        doc = _load(text)
        if not isinstance(doc, dict):
            raise _JsonProblem("the top level must be an object of topics")
        result: list[TopicPartition] = []
        seen: set[TopicPartition] = set()
        for topic, parts in doc.items():
            _check_topic(topic)
            if not isinstance(parts, list):
                raise _JsonProblem(
                    f"topic {json.dumps(topic)} maps to {json.dumps(parts)}, "
                    "not a list of partitions"
                )
            for value in parts:
                tp = TopicPartition(topic, _check_partition_value(topic, value))
                if tp in seen:
                    raise _JsonProblem(
                        f"partition {value} of topic {json.dumps(topic)} is given twice"
                    )
                seen.add(tp)
                result.append(tp)
        return result
    except _JsonProblem as problem:
        raise _fail(field, str(problem), _PARTITIONS_EXAMPLE, text) from None


def offset_ranges_to_json(ranges: Iterable[OffsetRange]) -> str:
    """Encode offset ranges as a JSON list of ``{"topic","partition","fromOffset","untilOffset"}``.

    The order of ``ranges`` is kept, because range ``i`` is RDD partition ``i``.
    """
    items = []
    for r in ranges:
        if not isinstance(r, OffsetRange):
            raise ConfigurationError(
                f"Expected OffsetRange, got {r!r}; build one with OffsetRange.create(...)"
            )
        items.append(dict(zip(_RANGE_KEYS, r.toTuple())))
    return json.dumps(items, separators=(",", ":"), ensure_ascii=False)


def offset_ranges_from_json(text: str, field: str = "offsetRanges") -> list[OffsetRange]:
    """Decode the output of :func:`offset_ranges_to_json`.

    Raises
    ------
    OffsetsJsonError
        If an item is not an object with exactly the four keys, or is not a valid range.
    """
    try:
        doc = _load(text)
        if not isinstance(doc, list):
            raise _JsonProblem("the top level must be a list of offset ranges")
        result = []
        for i, item in enumerate(doc):
            if not isinstance(item, dict) or set(item) != set(_RANGE_KEYS):
                raise _JsonProblem(
                    f"item {i} {json.dumps(item)} must be an object with exactly the keys "
                    + ", ".join(_RANGE_KEYS)
                )
            try:
                result.append(OffsetRange(*(item[k] for k in _RANGE_KEYS)))
            except InvalidOffsetRangeError as exc:
                raise _JsonProblem(f"item {i}: {exc}") from None
        return result
    except _JsonProblem as problem:
        raise _fail(field, str(problem), _RANGES_EXAMPLE, text) from None
