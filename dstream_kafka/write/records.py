"""The records a Kafka output accepts, as Structured Streaming's Kafka sink accepts rows.

A record is a ``(key, value)`` pair or a dict with ``value`` (required; ``None`` writes a
tombstone) and optionally ``key``, ``headers``, ``topic`` and ``partition``. ``topic`` is
required unless the output was given one (a record's own ``topic`` wins, as with the sink's
``topic`` column). ``topic`` is a legal Kafka topic name (:func:`check_topic`), never
another type turned into one. ``headers`` is a list of ``(key, value)`` pairs (tuples or
lists of two) or a dict ``{key: value}``: keys ``str``, values ``bytes``, ``str`` (encoded as
UTF-8) or ``None`` (written as an empty value: kafka-python refuses null header values, and
both backends write the same bytes). Anything else fails the task with an error naming the
field and the fix, before the record is sent.

The checks that need the cluster, that the topic exists and has the record's partition,
run where the producer is (:class:`TopicPartitions`): once per topic and producer, then
from a cache.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from dstream_kafka.errors import ConfigurationError, UnknownTopicPartitionError

__all__ = ["MAX_TOPIC_LENGTH", "Message", "TopicPartitions", "check_topic", "message_builder"]

_FIELDS = frozenset({"key", "value", "headers", "topic", "partition"})
#: Kafka's limit on a topic name's length (``Topic.MAX_NAME_LENGTH``).
MAX_TOPIC_LENGTH = 249
_TOPIC_CHARS = re.compile(r"[A-Za-z0-9._-]+")
_HEADERS_SHAPE = ("a list of (key, value) pairs or a dict {key: value}, with str keys and "
                  "bytes, str or None values; e.g. [('source', b'orders'), ('n', '1')]")


def check_topic(topic: Any, what: str) -> str:
    """Return ``topic`` when it is a legal Kafka topic name, else raise naming ``what``.

    Kafka's rule (``org.apache.kafka.common.internals.Topic.validate``): a ``str`` of 1 to
    :data:`MAX_TOPIC_LENGTH` characters from ASCII letters, digits, ``.``, ``_`` and ``-``,
    other than ``.`` and ``..``. Other types are refused, never converted with ``str()``.

    Raises
    ------
    ConfigurationError
        Naming ``what`` (e.g. "a record's topic"), the name and the rule.
    """
    if not isinstance(topic, str):
        raise ConfigurationError(
            f"{what} must be a topic name (str), got {type(topic).__name__} {_short(topic)}; "
            "Kafka topic names are strings: convert it before the write, e.g. str(n)")
    if (len(topic) > MAX_TOPIC_LENGTH or topic in (".", "..")
            or not _TOPIC_CHARS.fullmatch(topic)):
        raise ConfigurationError(
            f"{what} {_short(topic)} is not a legal Kafka topic name: use 1 to "
            f"{MAX_TOPIC_LENGTH} characters from ASCII letters, digits, '.', '_' and '-' "
            "(not '.' or '..' alone)")
    return topic


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Message(NamedTuple):
    """One record ready for a producer: serialized key and value, checked fields."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]


def _headers(headers: Any) -> list[tuple[str, bytes]]:
    if headers is None:
        return []
    if isinstance(headers, Mapping):
        items: Any = headers.items()
    elif isinstance(headers, (list, tuple)):
        items = headers
    else:
        raise ConfigurationError(
            f"a record's headers must be {_HEADERS_SHAPE}; got {type(headers).__name__}")
    out = []
    for index, item in enumerate(items):
        # A str of two characters unpacks as a pair too: only tuples and lists are pairs.
        if not isinstance(item, (tuple, list)) or len(item) != 2:
            raise ConfigurationError(
                f"a record's headers must be {_HEADERS_SHAPE}; item {index} is "
                f"{type(item).__name__} {_short(item)}, not a (key, value) pair")
        name, data = item
        if not isinstance(name, str):
            raise ConfigurationError(
                f"a record's headers must be {_HEADERS_SHAPE}; the key of item {index} is "
                f"{type(name).__name__} {_short(name)}")
        if isinstance(data, bytes):
            pass
        elif isinstance(data, str):
            data = data.encode("utf-8")
        elif data is None:
            data = b""
        elif isinstance(data, bytearray):
            data = bytes(data)
        else:
            raise ConfigurationError(
                f"a record's headers must be {_HEADERS_SHAPE}; the value of header {name!r} "
                f"is {type(data).__name__}")
        out.append((name, data))
    return out


class TopicPartitions:
    """The partition counts of the topics a producer writes, looked up once per topic.

    ``lookup(topic, timeout_s, refresh)`` asks the cluster (through the producer's own
    metadata, fetched anew when ``refresh``) and returns the topic's partition count, or
    None when the topic is not there yet; it is
    asked again, every ``retry_s``, until ``wait_s`` has passed, which leaves a topic that
    the brokers create on first use (``auto.create.topics.enable``) the time to appear.
    Found counts are kept; a partition at or past the kept count triggers one fresh look-up
    (partitions may have been added) before the record is refused.
    """

    def __init__(self, lookup: Callable[[str, float, bool], int | None], wait_s: float,
                 retry_s: float = 0.1) -> None:
        self._lookup = lookup
        self._wait_s = wait_s
        self._retry_s = retry_s
        self._counts: dict[str, int] = {}

    def check(self, message: Message) -> None:
        """Raise unless ``message``'s topic exists and has ``message``'s partition.

        Raises
        ------
        UnknownTopicPartitionError
            For a topic not found within the wait (naming it, the wait and the fixes), or a
            partition at or past the topic's partition count (naming both).
        """
        count = self._counts.get(message.topic)
        if count is None:
            count = self._counts[message.topic] = self._find(message.topic)
        partition = message.partition
        if partition is not None and partition >= count:
            count = self._lookup(message.topic, self._wait_s, True) or count
            self._counts[message.topic] = count
            if partition >= count:
                raise UnknownTopicPartitionError(
                    f"a record's partition {partition} does not exist: topic "
                    f"{message.topic!r} has {count} partition(s), 0 to {count - 1}; give "
                    f"records a partition below {count}, leave 'partition' out (the key "
                    "then decides it), or add partitions to the topic")

    def _find(self, topic: str) -> int:
        deadline = time.monotonic() + self._wait_s
        while True:
            left = deadline - time.monotonic()
            count = self._lookup(topic, max(left, 0.0), False)
            if count:
                return count
            if time.monotonic() + self._retry_s >= deadline:
                raise UnknownTopicPartitionError(
                    f"a record's topic {topic!r} does not exist: it was not in the cluster's "
                    f"metadata within {self._wait_s * 1000:.0f} ms "
                    "(spark.streaming.kafka.producer.topicWait.ms). Create the topic, or "
                    "let the brokers create it on first use (broker setting "
                    "auto.create.topics.enable=true, and the output's allow.auto.create.topics "
                    "left true)")
            time.sleep(self._retry_s)


def message_builder(topic: str | None, key_serializer: Callable[[Any], bytes | None],
                    value_serializer: Callable[[Any], bytes | None]
                    ) -> Callable[[Any], Message]:
    """Return ``build(record) -> Message`` for an output whose topic is ``topic``.

    Raises (from ``build``)
    -----------------------
    ConfigurationError
        For a record that is neither a pair nor a dict, a dict without ``value`` or with
        unknown fields, no topic, a bad partition or headers, or a key or value the
        serializers do not take.
    """
    def build(record: Any) -> Message:
        if isinstance(record, Mapping):
            unknown = set(record) - _FIELDS
            if unknown:
                raise ConfigurationError(
                    f"a record dict has unknown field(s) {', '.join(sorted(map(str, unknown)))};"
                    f" it may hold {', '.join(sorted(_FIELDS))}")
            if "value" not in record:
                raise ConfigurationError(
                    "a record dict needs 'value' (None writes a tombstone); e.g. "
                    "{'key': b'k', 'value': b'v'}")
            key, value = record.get("key"), record["value"]
            own = record.get("topic")
            target = topic if own is None else own
            partition = record.get("partition")
            headers = _headers(record.get("headers"))
        elif isinstance(record, tuple) and len(record) == 2:
            key, value = record
            target, partition, headers = topic, None, []
        else:
            raise ConfigurationError(
                f"the Kafka output writes (key, value) pairs or dicts with key/value/headers/"
                f"topic/partition, got {type(record).__name__}; map the records to one of them "
                "first, e.g. stream.map(lambda r: (r.key, r.value))")
        if target is None:
            raise ConfigurationError(
                "a record names no topic and the Kafka output has none: pass topic=... to the "
                "output or give each record dict a 'topic'")
        if type(target) is not str or target not in legal:  # checked once per task and name
            legal.add(check_topic(target, "a record's topic"))
        if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)
                                      or partition < 0):
            raise ConfigurationError(
                f"a record's partition must be a whole number >= 0 (or absent), got {partition!r}")
        return Message(target, partition, key_serializer(key), value_serializer(value),
                       headers)

    legal: set[str] = set()
    return build
