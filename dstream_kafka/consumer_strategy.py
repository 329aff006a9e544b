"""How the driver consumer finds its partitions: Subscribe, SubscribePattern, Assign.

As in Spark, :class:`ConsumerStrategy` is open (users may subclass it), while the three built-in
strategies are frozen values reached through the :class:`ConsumerStrategies` factory. The driver
consumer only tracks partitions and offsets: every partition is paused as soon as it is assigned,
so the driver never fetches records; executors read the data.
"""

from __future__ import annotations

import logging
import re
import time
from abc import ABC, abstractmethod
from typing import Any, Iterable, Mapping, Pattern

from kafka import ConsumerRebalanceListener

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import TopicPartition, as_topic_partition

__all__ = ["ConsumerStrategy", "ConsumerStrategies", "Subscribe", "SubscribePattern", "Assign"]

logger = logging.getLogger(__name__)

#: How long onStart waits for the group coordinator to hand out partitions.
ASSIGNMENT_TIMEOUT_S = 60.0


def _check_params(kafkaParams: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(kafkaParams, Mapping):
        raise ConfigurationError(
            f"kafkaParams must be a dict of Kafka consumer settings such as "
            f"{{'bootstrap.servers': 'host:9092', 'group.id': 'g'}}, got {type(kafkaParams).__name__}"
        )
    params = dict(kafkaParams)
    if not params.get("bootstrap.servers") and not params.get("bootstrap_servers"):
        raise ConfigurationError(
            "kafkaParams needs 'bootstrap.servers' (e.g. {'bootstrap.servers': '127.0.0.1:9092'})"
        )
    return params


def _check_offsets(offsets: Mapping[Any, int] | None) -> dict[TopicPartition, int]:
    result: dict[TopicPartition, int] = {}
    for key, value in (offsets or {}).items():
        tp = as_topic_partition(key, "starting offset key")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigurationError(
                f"Starting offset for {tp.topic}-{tp.partition} must be an int >= 0, got {value!r}"
            )
        result[tp] = int(value)
    return result


class _PauseOnAssign(ConsumerRebalanceListener):
    """Rebalance listener: pause new partitions at once and remember revoked ones."""

    def __init__(self) -> None:
        self.consumer: Any = None
        self.revoked: set[TopicPartition] = set()

    def on_partitions_revoked(self, revoked: Iterable[Any]) -> None:
        self.revoked.update(TopicPartition(tp.topic, tp.partition) for tp in revoked)

    def on_partitions_assigned(self, assigned: Iterable[Any]) -> None:
        assigned = list(assigned)
        if self.consumer is not None and assigned:
            self.consumer.pause(*assigned)


class ConsumerStrategy(ABC):
    """Creates the driver consumer and names the Kafka params executors get.

    Subclass it to customise how the driver consumer is built (public, extensible, as Spark's).
    """

    @property
    @abstractmethod
    def executorKafkaParams(self) -> dict[str, Any]:
        """Kafka params for executors, before ``fix_kafka_params`` applies the fixed ones."""

    @abstractmethod
    def onStart(self, currentOffsets: Mapping[TopicPartition, int]) -> Any:
        """Return a started driver consumer positioned at ``currentOffsets`` where given.

        ``currentOffsets`` is non-empty on a restart (offsets from a store or checkpoint) and
        then wins over the strategy's own starting offsets.
        """

    def describe(self) -> str:
        """One line naming what the strategy reads, for logs and progress output."""
        return type(self).__name__


class _BaseStrategy(ConsumerStrategy):
    __slots__ = ("_params", "_offsets")

    def __init__(self, kafkaParams: Mapping[str, Any], offsets: Mapping[Any, int] | None) -> None:
        object.__setattr__(self, "_params", _check_params(kafkaParams))
        object.__setattr__(self, "_offsets", _check_offsets(offsets))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    @property
    def executorKafkaParams(self) -> dict[str, Any]:
        return dict(self._params)

    @property
    def kafkaParams(self) -> dict[str, Any]:
        """A copy of the driver's Kafka params (used unchanged, as in Spark)."""
        return dict(self._params)

    @property
    def offsets(self) -> dict[TopicPartition, int]:
        """The explicit starting offsets given to the strategy."""
        return dict(self._offsets)

    def _new_consumer(self) -> tuple[Any, _PauseOnAssign]:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(**stream_driver_config(self._params))
        listener = _PauseOnAssign()
        listener.consumer = consumer
        return consumer, listener

    def _subscribed(self, currentOffsets: Mapping[TopicPartition, int], **subscription: Any) -> Any:
        """Return a consumer subscribed with ``subscription``, joined, positioned and paused."""
        consumer, listener = self._new_consumer()
        consumer.subscribe(listener=listener, **subscription)
        self._await_assignment(consumer, expect_any=True)
        self._seek(consumer, currentOffsets)
        consumer._dstream_listener = listener
        return consumer

    def _await_assignment(self, consumer: Any, expect_any: bool) -> None:
        # Joining the group happens inside poll(); partitions are paused by the listener as
        # they arrive, so these polls return no records.
        deadline = time.monotonic() + ASSIGNMENT_TIMEOUT_S
        while not consumer.assignment():
            records = consumer.poll(timeout_ms=100)
            if records:  # pragma: no cover - the listener pauses first; be paranoid anyway
                seek_back(consumer, records)
            if not expect_any or time.monotonic() > deadline:
                if expect_any:
                    logger.warning("No partitions assigned after %.0fs", ASSIGNMENT_TIMEOUT_S)
                return

    def _seek(self, consumer: Any, currentOffsets: Mapping[TopicPartition, int]) -> None:
        to_seek = dict(currentOffsets) if currentOffsets else dict(self._offsets)
        from kafka import TopicPartition as KTP

        for tp in consumer.assignment():
            key = TopicPartition(tp.topic, tp.partition)
            if key in to_seek:
                consumer.seek(KTP(tp.topic, tp.partition), to_seek[key])
        consumer.pause(*consumer.assignment())


def stream_driver_config(kafkaParams: Mapping[str, Any]) -> dict[str, Any]:
    """kafka-python settings of a stream's driver consumer: the user's params, in its group.

    The driver never reads records (they are paused), so deserializers are dropped; offsets
    are committed only explicitly (``commitAsync`` or an offset store), so auto commit is off.
    """
    from dstream_kafka.kafka_params import consumer_config

    config = consumer_config(kafkaParams)
    if config.get("enable_auto_commit"):
        logger.warning("enable.auto.commit=true is ignored by the driver: offsets are committed "
                       "after each batch's output (commitAsync or an offset store)")
    for key in ("key_deserializer", "value_deserializer"):
        config.pop(key, None)
    config["enable_auto_commit"] = False
    return config


def seek_back(consumer: Any, records: Mapping[Any, list]) -> None:
    """Undo a poll that returned records: seek each partition to its smallest returned offset."""
    for tp, recs in records.items():
        if recs:
            consumer.seek(tp, min(r.offset for r in recs))


class Subscribe(_BaseStrategy):
    """Subscribe to a fixed list of topics; partitions added later are picked up."""

    __slots__ = ("topics",)

    def __init__(self, topics: Iterable[str], kafkaParams: Mapping[str, Any],
                 offsets: Mapping[Any, int] | None = None) -> None:
        if isinstance(topics, str):
            raise ConfigurationError(f"topics must be a list of topic names, got the string {topics!r}; "
                                     f"write [{topics!r}]")
        names = list(topics)
        if not names or not all(isinstance(t, str) and t for t in names):
            raise ConfigurationError(f"topics must be a non-empty list of topic names, got {names!r}")
        super().__init__(kafkaParams, offsets)
        object.__setattr__(self, "topics", tuple(names))
        if not self._params.get("group.id") and not self._params.get("group_id"):
            raise ConfigurationError("Subscribe needs kafkaParams['group.id'] (a consumer group); "
                                     "use ConsumerStrategies.Assign to read without a group")

    def onStart(self, currentOffsets: Mapping[TopicPartition, int]) -> Any:
        return self._subscribed(currentOffsets, topics=list(self.topics))

    def describe(self) -> str:
        return f"Subscribe({', '.join(self.topics)})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Subscribe) and (self.topics, self._params, self._offsets) == (
            other.topics, other._params, other._offsets)

    def __hash__(self) -> int:
        return hash(("Subscribe", self.topics))


class SubscribePattern(_BaseStrategy):
    """Subscribe to every topic matching a regular expression, re-matched as topics appear.

    Kafka re-evaluates the pattern on each metadata refresh, so new matching topics are found
    within ``metadata.max.age.ms`` (Kafka's default is 5 minutes; lower it for faster discovery).
    """

    __slots__ = ("pattern",)

    def __init__(self, pattern: str | Pattern[str], kafkaParams: Mapping[str, Any],
                 offsets: Mapping[Any, int] | None = None) -> None:
        try:
            compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        except re.error as exc:
            raise ConfigurationError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        if not compiled.pattern:
            raise ConfigurationError("pattern must not be empty; e.g. 'events-.*'")
        super().__init__(kafkaParams, offsets)
        object.__setattr__(self, "pattern", compiled)
        if not self._params.get("group.id") and not self._params.get("group_id"):
            raise ConfigurationError("SubscribePattern needs kafkaParams['group.id'] (a consumer group)")

    def onStart(self, currentOffsets: Mapping[TopicPartition, int]) -> Any:
        return self._subscribed(currentOffsets, pattern=self.pattern.pattern)

    def describe(self) -> str:
        return f"SubscribePattern({self.pattern.pattern})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SubscribePattern) and (
            self.pattern.pattern, self._params, self._offsets) == (
            other.pattern.pattern, other._params, other._offsets)

    def __hash__(self) -> int:
        return hash(("SubscribePattern", self.pattern.pattern))


class Assign(_BaseStrategy):
    """Read a fixed set of topic partitions, without group membership."""

    __slots__ = ("topicPartitions",)

    def __init__(self, topicPartitions: Iterable[Any], kafkaParams: Mapping[str, Any],
                 offsets: Mapping[Any, int] | None = None) -> None:
        tps = tuple(as_topic_partition(tp) for tp in topicPartitions)
        if not tps:
            raise ConfigurationError("Assign needs at least one topic partition, e.g. [TopicPartition('t', 0)]")
        super().__init__(kafkaParams, offsets)
        object.__setattr__(self, "topicPartitions", tps)

    def onStart(self, currentOffsets: Mapping[TopicPartition, int]) -> Any:
        from kafka import TopicPartition as KTP

        consumer, _listener = self._new_consumer()
        consumer.assign([KTP(tp.topic, tp.partition) for tp in self.topicPartitions])
        self._seek(consumer, currentOffsets)
        return consumer

    def describe(self) -> str:
        return "Assign(" + ", ".join(f"{tp.topic}-{tp.partition}" for tp in self.topicPartitions) + ")"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Assign) and (self.topicPartitions, self._params, self._offsets) == (
            other.topicPartitions, other._params, other._offsets)

    def __hash__(self) -> int:
        return hash(("Assign", self.topicPartitions))


class ConsumerStrategies:
    """Factory namespace for the built-in strategies (Spark's ``ConsumerStrategies``)."""

    Subscribe = Subscribe
    SubscribePattern = SubscribePattern
    Assign = Assign

    def __init__(self) -> None:  # pragma: no cover - a namespace, not a value
        raise TypeError("ConsumerStrategies is a namespace; call ConsumerStrategies.Subscribe(...)")
