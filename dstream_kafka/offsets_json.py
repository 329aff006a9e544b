"""The offsets JSON codec: partition offsets, partition lists and offset ranges as JSON.

The shapes are those of Spark Structured Streaming's ``JsonUtils`` (``{"topicA":{"0":23,"1":-1}}``
for offsets and ``{"topicA":[0,1]}`` for partitions), so options and checkpoints read the same
as there; ranges are a list of objects with Spark's ``OffsetRange`` field names. Every
decoding error is an :class:`~dstream_kafka.errors.OffsetsJsonError` naming the field, the
problem and a valid example.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any

from dstream_kafka.errors import ConfigurationError, InvalidOffsetRangeError, OffsetsJsonError
from dstream_kafka.offsets import (
    EARLIEST,
    INT32_MAX,
    INT64_MAX,
    LATEST,
    OffsetRange,
    TopicPartition,
    as_topic_partition,
)

__all__ = [
    "offset_ranges_from_json",
    "offset_ranges_to_json",
    "partition_offsets_from_json",
    "partition_offsets_to_json",
    "partitions_from_json",
    "partitions_to_json",
]

_OFFSETS_EXAMPLE = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
# Examples for fields that take fewer sentinels: an example must itself be valid there.
_OFFSETS_EXAMPLES = {(EARLIEST, LATEST): _OFFSETS_EXAMPLE, (LATEST,): '{"topicA":{"0":23,"1":-1}}',
                     (): '{"topicA":{"0":23,"1":42}}'}
_PARTITIONS_EXAMPLE = '{"topicA":[0,1],"topicB":[0,1]}'
_RANGES_EXAMPLE = '[{"topic":"topicA","partition":0,"fromOffset":23,"untilOffset":42}]'
_RANGE_KEYS = ("topic", "partition", "fromOffset", "untilOffset")
_DECIMAL = re.compile(r"[0-9]+")
#: Deepest nesting of arrays and objects read. Offsets JSON nests two levels; far deeper input
#: is refused before the parser, which would otherwise hit Python's recursion limit.
MAX_NESTING = 100
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_NOT_BRACKET = re.compile(r"[^\[\]{}]")
#: Characters of the input an error message shows.
_SHOWN = 200


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


def _nesting(text: str) -> int:
    """Return how deep arrays and objects nest in ``text`` (brackets inside strings ignored)."""
    if text.count("[") + text.count("{") <= MAX_NESTING:
        return 0  # cannot be too deep: the usual case costs two counts
    depth = deepest = 0
    for bracket in _NOT_BRACKET.sub("", _STRING.sub('""', text)):
        depth += 1 if bracket in "[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _load(text: Any) -> Any:
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8")
    if not isinstance(text, str):
        raise _JsonProblem(f"expected a JSON string, got {type(text).__name__}")
    deepest = _nesting(text)
    if deepest > MAX_NESTING:
        raise _JsonProblem(f"arrays and objects nest {deepest} levels deep, over the limit of {MAX_NESTING} "
                           "(offsets JSON nests 2)")
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise _JsonProblem(f"not valid JSON ({exc})") from None


def _fail(field: str, problem: str, example: str, text: Any) -> OffsetsJsonError:
    shown = text
    if isinstance(text, str) and len(text) > _SHOWN:
        shown = f"{text[:_SHOWN]}... ({len(text)} characters)"
    return OffsetsJsonError(f"Invalid {field}: {problem}. Expected e.g. {example}, got {shown}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_topic(topic: str) -> None:
    if not topic:
        raise _JsonProblem('topic name "" is empty; use the Kafka topic name as the key')


def _check_partition_value(topic: str, value: Any) -> int:
    if not _is_int(value) or not 0 <= value <= INT32_MAX:
        raise _JsonProblem(
            f"partition {json.dumps(value)} of topic {json.dumps(topic)} is not an int in "
            f"[0, {INT32_MAX}]"
        )
    return int(value)


def _topics(text: Any, kind: type, shape: str) -> Iterator[tuple[str, Any]]:
    """Yield the ``(topic, value)`` pairs of a ``{"topic": value}`` document, each checked as
    it is reached (so the first problem in document order is the one reported)."""
    doc = _load(text)
    if not isinstance(doc, dict):
        raise _JsonProblem("the top level must be an object of topics")
    for topic, parts in doc.items():
        _check_topic(topic)
        if not isinstance(parts, kind):
            raise _JsonProblem(f"topic {json.dumps(topic)} maps to {json.dumps(parts)}, not {shape}")
        yield topic, parts


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
        result: dict[TopicPartition, int] = {}
        for topic, parts in _topics(text, dict, 'an object of {"partition": offset}'):
            for key, offset in parts.items():
                if not _DECIMAL.fullmatch(key):
                    raise _JsonProblem(
                        f"partition key {json.dumps(key)} of topic {json.dumps(topic)} is not a "
                        "non-negative decimal int"
                    )
                if int(key) > INT32_MAX:
                    raise _JsonProblem(
                        f"partition key {json.dumps(key)} of topic {json.dumps(topic)} is out of "
                        f"range: partitions are 0 to {INT32_MAX} (2**31 - 1)"
                    )
                tp = TopicPartition(topic, int(key))
                if tp in result:
                    raise _JsonProblem(
                        f"partition {tp.partition} of topic {json.dumps(topic)} is given twice"
                    )
                if not _is_int(offset):
                    raise _JsonProblem(
                        f"offset {json.dumps(offset)} for {topic}-{key} is not an int"
                    )
                if offset > INT64_MAX:
                    raise _JsonProblem(
                        f"offset {offset} for {topic}-{key} is out of range: offsets are 0 to "
                        f"{INT64_MAX} (2**63 - 1)"
                        + (f", or {' or '.join(map(str, sorted(allowed_sentinels)))}"
                           if allowed_sentinels else "")
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
        example = _OFFSETS_EXAMPLES.get(tuple(sorted(allowed_sentinels)), _OFFSETS_EXAMPLE)
        raise _fail(field, str(problem), example, text) from None


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
        result: list[TopicPartition] = []
        seen: set[TopicPartition] = set()
        for topic, parts in _topics(text, list, "a list of partitions"):
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
