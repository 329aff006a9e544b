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
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Mapping, Pattern, Sequence

from dstream_kafka.errors import BrokerTimeoutError, ConfigurationError, UnknownTopicPartitionError
from dstream_kafka.client.configs import ClientConfigs, bootstrap_errors, stream_driver_config
from dstream_kafka.offsets import TopicPartition, as_topic_partition
from dstream_kafka.plan.driver_consumer import (
    PauseOnAssign,
    assignment_wait_s,
    forget_stranded_member,
    seek_back,
    static_instance_wanted,
    stranded_session_ms,
)

__all__ = ["ConsumerStrategy", "ConsumerStrategies", "Subscribe", "SubscribePattern", "Assign"]

log = logging.getLogger(__name__)

#: Longest wait of closing a driver consumer whose start failed (its LeaveGroup request).
CLOSE_TIMEOUT_MS = 5_000


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


class ConsumerStrategy(ABC):
    """Creates the driver consumer and names the Kafka params executors get.

    Subclass it to customise how the driver consumer is built (public, extensible, as Spark's).
    The stream uses :attr:`executorKafkaParams`, :meth:`onStart`, :meth:`topic_names`,
    :meth:`starting_offsets` and :attr:`client_configs`; the last three have defaults.
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

    @property
    def client_configs(self) -> ClientConfigs:
        """:attr:`executorKafkaParams` translated for every client (executors, look-ups), once.

        Translated on first use, not when the strategy is built: a strategy that is never
        started logs no executor fixes.
        """
        configs = self.__dict__.get("_client_configs") if hasattr(self, "__dict__") else None
        if configs is None:
            configs = ClientConfigs.of(self.executorKafkaParams)
            if hasattr(self, "__dict__"):  # not a field: the built-ins' equality and pickles skip it
                self.__dict__["_client_configs"] = configs
        return configs

    def describe(self) -> str:
        """One line naming what the strategy reads, for logs and progress output."""
        return type(self).__name__

    def topic_names(self) -> list[str] | None:
        """The topics read, when known before the consumer starts; None otherwise.

        An offset store loads only these topics' offsets. The default is None (load every
        topic the store holds for the group).
        """
        return None

    def starting_offsets(self) -> dict[TopicPartition, int]:
        """Explicit starting offsets of a first start, per partition (default: none).

        A partition without one starts at ``auto.offset.reset`` (at its committed offset first
        only when the Kafka group keeps the stream's offsets: see :mod:`dstream_kafka.plan.positions`).
        """
        return {}


class _BaseStrategy(ConsumerStrategy):
    """What the built-in strategies share: the user's params and starting offsets.

    Subclasses are frozen dataclasses; ``__post_init__`` checks and normalises the given
    values once, through :meth:`_normalise`, and after that they never change.
    """

    kafkaParams: Mapping[str, Any]
    offsets: Mapping[Any, int] | None

    def _normalise(self, **values: Any) -> None:
        for name, value in values.items():
            # A frozen dataclass's own fields can only be set through object.__setattr__.
            object.__setattr__(self, name, value)

    def _check_common(self) -> None:
        self._normalise(kafkaParams=MappingProxyType(_check_params(self.kafkaParams)),
                        offsets=MappingProxyType(_check_offsets(self.offsets)))

    @property
    def executorKafkaParams(self) -> dict[str, Any]:
        return dict(self.kafkaParams)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Read-only mappings do not pickle: rebuild from plain copies of the fields.
        values = (getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]
        return type(self), tuple(dict(v) if isinstance(v, MappingProxyType) else v for v in values)

    def starting_offsets(self) -> dict[TopicPartition, int]:
        return dict(self.offsets or {})

    def _new_consumer(self, static: bool = False) -> tuple[Any, PauseOnAssign]:
        """A driver consumer of the params; ``static``: a group member that joins with the
        ``group.instance.id`` of :func:`~dstream_kafka.plan.driver_consumer.static_membership`
        unless the params give one."""
        from kafka import KafkaConsumer

        # The executors' translation, made once, when executors get the driver's params (the
        # built-ins); a subclass that gives its executors other params keeps the driver on its own.
        same = self.executorKafkaParams == dict(self.kafkaParams)
        config = stream_driver_config(self.client_configs if same else self.kafkaParams)
        wanted = static_instance_wanted() if static else None
        if wanted is not None and config.get("group_id") and not config.get("group_instance_id"):
            config["group_instance_id"] = wanted
            log.info("The driver joins group %s as static member %s (group.instance.id derived "
                     "from the group, the application and the stream), so a restarted driver "
                     "takes its own place at once", config["group_id"], wanted)
        # A refused SASL login fails at once, no broker within bootstrap.timeout.ms with
        # BrokerTimeoutError naming the servers (not kafka-python's "Unable to bootstrap").
        with bootstrap_errors(self.client_configs):
            consumer = KafkaConsumer(**config)
        return consumer, PauseOnAssign(consumer)

    def _subscribed(self, currentOffsets: Mapping[TopicPartition, int], **subscription: Any) -> Any:
        """Return a consumer subscribed with ``subscription``, joined, positioned and paused.

        A consumer that gets no partitions within the assignment timeout is closed (so it
        leaves the group) and the start fails.
        """
        consumer, listener = self._new_consumer(static=True)
        try:
            # Metadata first: a group leader whose first assignment had no topic metadata
            # sometimes never completes its second join (kafka-python 3.0.12) and would wait
            # out the whole assignment timeout.
            consumer.topics()
            consumer.subscribe(listener=listener, **subscription)
            self._await_assignment(consumer)
            self._seek(consumer, currentOffsets)
        except BaseException:
            # Bounded: a LeaveGroup stuck behind a pending rebalance must not hold the error.
            consumer.close(autocommit=False, timeout_ms=CLOSE_TIMEOUT_MS)
            raise
        return consumer

    def _await_assignment(self, consumer: Any) -> None:
        """Poll until the group assigns ``consumer`` partitions, within the assignment timeout.

        Raises
        ------
        UnknownTopicPartitionError
            When none of the subscribed topics exists when the wait ends.
        BrokerTimeoutError
            When the topics exist but the group assigned nothing (other members hold every
            partition, or the coordinator did not answer).
        """
        timeout_s = assignment_wait_s()
        group = self.kafkaParams.get("group.id") or self.kafkaParams.get("group_id")
        log.info("Waiting up to %.0f s (spark.streaming.kafka.assignmentTimeout) for group %s "
                    "to assign partitions of %s", timeout_s, group, self.describe())
        # Joining the group happens inside poll(); partitions are paused by the listener as
        # they arrive, so these polls return no records.
        started = time.monotonic()
        deadline = started + timeout_s
        checked = False
        from dstream_kafka import _kafka_internals

        while not consumer.assignment():
            # A topic created during the wait asks for a rejoin that kafka-python 3.0.12 may
            # drop before the assignment is in.
            _kafka_internals.keep_rejoin_wanted(consumer)
            records = consumer.poll(timeout_ms=100)
            if records:  # pragma: no cover - the listener pauses first; be paranoid anyway
                seek_back(consumer, records)
            if not checked and time.monotonic() - started > 1.0:
                # Not assigned within a second: say so once if the reason is a missing topic,
                # or a member of an earlier stream that could not leave the group.
                checked = True
                stranded_ms = stranded_session_ms(str(self._servers()), str(group))
                if stranded_ms is not None:
                    log.warning(
                        "Group %s may still list the member of an earlier stream of this process that "
                        "stopped while no broker at %s was reachable, so it could not leave the group; "
                        "Kafka assigns partitions to this stream once that member's session expires "
                        "(session.timeout.ms=%d, counted from the broker's return). Waiting up to %.0f s "
                        "(spark.streaming.kafka.assignmentTimeout)", group, self._servers(), stranded_ms,
                        timeout_s)
                elif self._existing_topics() == []:
                    log.warning("%s: no topic it reads exists yet in the cluster at %s; waiting "
                                   "up to %.0f s (spark.streaming.kafka.assignmentTimeout) for one",
                                   self.describe(), self._servers(), timeout_s)
            if time.monotonic() > deadline:
                self._no_assignment(timeout_s, group)
        forget_stranded_member(str(self._servers()), str(group))  # the group took us

    def _servers(self) -> Any:
        return self.kafkaParams.get("bootstrap.servers") or self.kafkaParams.get("bootstrap_servers")

    def _topics_among(self, names: set[str]) -> list[str]:
        """Of the cluster's topics ``names``, those this strategy reads (all of them here)."""
        return sorted(names)

    def _existing_topics(self) -> list[str] | None:
        """The topics this strategy reads that exist now; None when the brokers do not answer.

        Asked through a group-less pooled reader: the driver consumer's own metadata requests
        fail while a subscribed topic is missing.
        """
        from kafka.errors import KafkaError

        from dstream_kafka.client.offset_reader import offset_reader

        try:
            with offset_reader(self.client_configs) as reader:
                return self._topics_among(reader.all_topics())
        except KafkaError:
            return None

    def _no_assignment(self, timeout_s: float, group: Any) -> None:
        if self._existing_topics() == []:
            raise UnknownTopicPartitionError(
                f"{self.describe()}: no topic it reads exists in the Kafka cluster at "
                f"{self._servers()} after waiting {timeout_s:.0f} s "
                "(spark.streaming.kafka.assignmentTimeout); create the topic, fix its name, or "
                "raise spark.streaming.kafka.assignmentTimeout to wait longer for it")
        raise BrokerTimeoutError(
            f"No partitions assigned after {timeout_s:.0f} s "
            f"(spark.streaming.kafka.assignmentTimeout) to {self.describe()}: another member of "
            f"group {group} holds them (another stream or consumer uses the same group.id) or "
            f"the group coordinator at {self._servers()} did not answer. Stop the other member, "
            "give this stream its own group.id, or raise spark.streaming.kafka.assignmentTimeout")

    def _seek(self, consumer: Any, currentOffsets: Mapping[TopicPartition, int]) -> None:
        to_seek = dict(currentOffsets) if currentOffsets else self.starting_offsets()
        from kafka import TopicPartition as KTP

        for tp in consumer.assignment():
            key = TopicPartition(tp.topic, tp.partition)
            if key in to_seek:
                consumer.seek(KTP(tp.topic, tp.partition), to_seek[key])
        consumer.pause(*consumer.assignment())

    def _needs_group(self, what: str, hint: str) -> None:
        if not self.kafkaParams.get("group.id") and not self.kafkaParams.get("group_id"):
            raise ConfigurationError(f"{what} needs kafkaParams['group.id'] (a consumer group){hint}")


@dataclass(frozen=True)
class Subscribe(_BaseStrategy):
    """Subscribe to a fixed list of topics; partitions added later are picked up.

    Equal when topics, params and offsets are equal; hashed by its topics.
    """

    topics: Sequence[str]
    kafkaParams: Mapping[str, Any] = field(repr=False, hash=False)
    offsets: Mapping[Any, int] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        topics: Any = self.topics
        if isinstance(topics, str):
            raise ConfigurationError(f"topics must be a list of topic names, got the string {topics!r}; "
                                     f"write [{topics!r}]")
        names = list(topics)
        if not names or not all(isinstance(t, str) and t for t in names):
            raise ConfigurationError(f"topics must be a non-empty list of topic names, got {names!r}")
        self._check_common()
        self._normalise(topics=tuple(names))
        self._needs_group("Subscribe", "; use ConsumerStrategies.Assign to read without a group")

    def onStart(self, currentOffsets: Mapping[TopicPartition, int]) -> Any:
        return self._subscribed(currentOffsets, topics=list(self.topics))

    def _topics_among(self, names: set[str]) -> list[str]:
        return sorted(names & set(self.topics))

    def describe(self) -> str:
        return f"Subscribe({', '.join(self.topics)})"

    def topic_names(self) -> list[str]:
        return list(self.topics)


@dataclass(frozen=True)
class SubscribePattern(_BaseStrategy):
    """Subscribe to every topic matching a regular expression, re-matched as topics appear.

    Kafka re-evaluates the pattern on each metadata refresh; a direct stream refreshes the
    metadata at every batch, so new matching topics are read from the next batch on.
    Equal when the pattern text, params and offsets are equal.
    """

    pattern: str | Pattern[str]
    kafkaParams: Mapping[str, Any] = field(repr=False, hash=False)
    offsets: Mapping[Any, int] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        pattern: Any = self.pattern
        try:
            compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        except re.error as exc:
            raise ConfigurationError(f"pattern {pattern!r} is not a valid regular expression: {exc}") from exc
        if not compiled.pattern:
            raise ConfigurationError("pattern must not be empty; e.g. 'events-.*'")
        self._check_common()
        self._normalise(pattern=compiled)
        self._needs_group("SubscribePattern", "")

    def _regex(self) -> Pattern[str]:
        return re.compile(self.pattern)  # compiled already: returned as it is

    def onStart(self, currentOffsets: Mapping[TopicPartition, int]) -> Any:
        return self._subscribed(currentOffsets, pattern=self._regex().pattern)

    def _topics_among(self, names: set[str]) -> list[str]:
        # kafka-python matches a subscription pattern at the start of the name (re.match).
        return sorted(n for n in names if self._regex().match(n))

    def describe(self) -> str:
        return f"SubscribePattern({self._regex().pattern})"

    def __eq__(self, other: object) -> bool:
        # Compiled patterns compare by identity; the text is what the user chose.
        return isinstance(other, SubscribePattern) and (
            self._regex().pattern, self.kafkaParams, self.offsets) == (
            other._regex().pattern, other.kafkaParams, other.offsets)

    def __hash__(self) -> int:
        return hash(("SubscribePattern", self._regex().pattern))


@dataclass(frozen=True)
class Assign(_BaseStrategy):
    """Read a fixed set of topic partitions, without group membership.

    Equal when partitions, params and offsets are equal; hashed by its partitions.
    """

    topicPartitions: Sequence[TopicPartition | tuple[str, int]]
    kafkaParams: Mapping[str, Any] = field(repr=False, hash=False)
    offsets: Mapping[Any, int] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        tps = tuple(as_topic_partition(tp) for tp in self.topicPartitions)
        if not tps:
            raise ConfigurationError("Assign needs at least one topic partition, e.g. [TopicPartition('t', 0)]")
        self._check_common()
        self._normalise(topicPartitions=tps)

    def _partitions(self) -> tuple[TopicPartition, ...]:
        return tuple(TopicPartition(*tp) for tp in self.topicPartitions)

    def onStart(self, currentOffsets: Mapping[TopicPartition, int]) -> Any:
        from kafka import TopicPartition as KTP

        consumer, _listener = self._new_consumer()
        consumer.assign([KTP(tp.topic, tp.partition) for tp in self._partitions()])
        self._seek(consumer, currentOffsets)
        return consumer

    def describe(self) -> str:
        return "Assign(" + ", ".join(f"{tp.topic}-{tp.partition}" for tp in self._partitions()) + ")"

    def topic_names(self) -> list[str]:
        return sorted({tp.topic for tp in self._partitions()})


class ConsumerStrategies:
    """Factory namespace for the built-in strategies (Spark's ``ConsumerStrategies``)."""

    Subscribe = Subscribe
    SubscribePattern = SubscribePattern
    Assign = Assign

    def __init__(self) -> None:  # pragma: no cover - a namespace, not a value
        raise TypeError("ConsumerStrategies is a namespace; call ConsumerStrategies.Subscribe(...)")
