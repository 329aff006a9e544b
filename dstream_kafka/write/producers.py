"""The producer calls that differ between Kafka client libraries (executor side).

A write task sees one interface, :class:`OutputProducer`: ``send``, ``flush``, the
transaction calls, ``send_offsets`` and ``committed``. Two implementations:
:class:`KafkaPythonProducer` (``kafka.KafkaProducer``, kafka-python 3.0) and
:class:`ConfluentProducer` (``confluent_kafka.Producer``, librdkafka). Both write records
serialized by the output, so keys, values, headers and partitions are the same bytes either
way; both hash keys with murmur2, as Java does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from typing import Any, Protocol

from dstream_kafka._kafka_internals import producer_partitions, transaction_step
from dstream_kafka.client.param_checks import bootstrap_failure
from dstream_kafka.errors import KafkaWriteError
from dstream_kafka.write.records import Message, TopicPartitions
from dstream_kafka.write.settings import OutputSettings

__all__ = ["ConfluentProducer", "KafkaPythonProducer", "OutputProducer", "open_producer"]

log = logging.getLogger(__name__)

#: kafka-python's retry backoff (ms) for a transactional producer and its committed-offset
#: look-up, unless the user set ``retry.backoff.ms``: its default of 100 ms is paid once per
#: batch, as the broker is still finishing the previous batch's transaction (the Java client
#: retries that case after 20 ms).
TRANSACTION_RETRY_BACKOFF_MS = 20

#: librdkafka's names (``KafkaError.name()``) of the errors of a fenced transactional producer.
_FENCED_ERRORS = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})

# librdkafka producer properties a consumer (the offsets look-up) does not take.
_RDK_PRODUCER_ONLY = ("acks", "enable.idempotence", "partitioner", "linger.ms", "batch.size",
                      "compression.type", "delivery.timeout.ms", "transaction.timeout.ms",
                      "max.in.flight.requests.per.connection", "transactional.id")


class OutputProducer(Protocol):
    """One producer of one write task; not thread-safe. Errors raise
    :class:`~dstream_kafka.errors.KafkaWriteError` (or the client's own fencing error)."""

    def send(self, message: Message) -> None:
        """Queue ``message``; delivery errors surface at :meth:`flush` or :meth:`commit`.

        A topic missing from the cluster, or a partition it lacks, raises
        :class:`~dstream_kafka.errors.UnknownTopicPartitionError` here
        (:class:`~dstream_kafka.write.records.TopicPartitions`)."""

    def flush(self) -> None:
        """Wait until every queued message is acknowledged; raise on any delivery error."""

    def init(self) -> None:
        """``init_transactions``: fence earlier producers of the id, end their transaction."""

    def begin(self) -> None:
        """Begin a transaction."""

    def send_offsets(self, topic: str, partition: int, offset: int, metadata: str,
                     group: str) -> None:
        """Commit ``offset`` of ``topic``-``partition`` for ``group`` in the transaction."""

    def commit(self) -> None:
        """Flush and commit the transaction."""

    def abort(self) -> None:
        """Abort the transaction (its records stay in the log, invisible to read_committed)."""

    def committed(self, group: str, topic: str, partition: int) -> int | None:
        """Return ``group``'s committed offset of ``topic``-``partition`` (stable), or None."""

    def fenced(self, error: BaseException) -> bool:
        """Whether ``error`` says another producer with this ``transactional.id`` was
        initialised since this one (the broker's fenced or invalid-epoch error)."""

    def close(self) -> None:
        """Close the client (best effort)."""


def open_producer(settings: OutputSettings, transactional_id: str | None) -> OutputProducer:
    """Open the producer of ``settings.backend`` (transactional when an id is given)."""
    if settings.backend == "confluent-kafka":
        return ConfluentProducer(settings, transactional_id)
    return KafkaPythonProducer(settings, transactional_id)


class KafkaPythonProducer:
    """:class:`OutputProducer` on ``kafka.KafkaProducer``."""

    def __init__(self, settings: OutputSettings, transactional_id: str | None) -> None:
        from kafka import KafkaProducer

        self._settings = settings
        config = dict(settings.producer)
        if transactional_id is not None:
            config["transactional_id"] = transactional_id
            # The first request of a batch's transaction meets the previous one's markers
            # still being written (CONCURRENT_TRANSACTIONS): 100 ms of backoff per batch.
            config.setdefault("retry_backoff_ms", TRANSACTION_RETRY_BACKOFF_MS)
        self._errors: list[BaseException] = []
        # The committed-offset look-up's consumer, kept with the producer: (group, consumer).
        self._group_consumer: tuple[str, Any] | None = None
        try:
            self._producer = KafkaProducer(**config)
        except Exception as exc:
            error = bootstrap_failure(config, exc)
            if error is None:
                raise
            raise error from None
        self._topics = TopicPartitions(self._partition_count, settings.topic_wait_s)

    def _partition_count(self, topic: str, timeout_s: float, refresh: bool) -> int | None:
        return producer_partitions(self._producer, topic, int(timeout_s * 1000), refresh)

    def send(self, message: Message) -> None:
        self._topics.check(message)  # the topic exists and has the partition (cached)
        future = self._producer.send(message.topic, value=message.value, key=message.key,
                                     headers=message.headers or None,
                                     partition=message.partition)
        future.add_errback(self._errors.append)

    def _check(self) -> None:
        if self._errors:
            error = self._errors[0]
            raise KafkaWriteError(
                f"Kafka refused {len(self._errors)} record(s) of this task: "
                f"{type(error).__name__}: {error}") from error

    def flush(self) -> None:
        self._producer.flush(timeout=self._settings.timeout_s)
        self._check()

    def init(self) -> None:
        self._producer.init_transactions()

    def begin(self) -> None:
        self._producer.begin_transaction()

    def send_offsets(self, topic: str, partition: int, offset: int, metadata: str,
                     group: str) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        self._step("send_offsets_to_transaction",
                   {TopicPartition(topic, partition): OffsetAndMetadata(offset, metadata, -1)},
                   group)

    def commit(self) -> None:
        self._producer.flush(timeout=self._settings.timeout_s)
        self._check()
        self._step("begin_commit")

    def abort(self) -> None:
        self._step("begin_abort")

    def _step(self, step: str, *args: Any) -> None:
        # Bounded by transaction.timeout.ms: past it the broker aborts the transaction anyway.
        timeout_s = self._settings.timeout_s
        if not transaction_step(self._producer, step, *args, timeout_ms=int(timeout_s * 1000)):
            raise KafkaWriteError(
                f"the transaction's {step} did not complete within {timeout_s:.0f} s "
                "(transaction.timeout.ms): a broker it needs is unreachable or was lost")

    def committed(self, group: str, topic: str, partition: int) -> int | None:
        from kafka import KafkaConsumer, TopicPartition

        if self._group_consumer is None or self._group_consumer[0] != group:
            self._close_consumer()
            config = dict(consumer_settings(self._settings))
            # read_committed: kafka-python then asks for stable offsets (a pending
            # transactional commit is waited for, never taken as the old offset).
            config.update(group_id=group, enable_auto_commit=False,
                          isolation_level="read_committed",
                          client_id=f"dstream-kafka-output-{group}")
            # the same for stable offsets while the last commit completes (UNSTABLE_OFFSET_COMMIT)
            config.setdefault("retry_backoff_ms", TRANSACTION_RETRY_BACKOFF_MS)
            self._group_consumer = (group, KafkaConsumer(**config))
        found = self._group_consumer[1].committed(TopicPartition(topic, partition))
        return None if found is None else int(found)

    def fenced(self, error: BaseException) -> bool:
        from kafka.errors import InvalidProducerEpochError, ProducerFencedError

        return any(isinstance(e, (ProducerFencedError, InvalidProducerEpochError))
                   for e in _chain(error))

    def _close_consumer(self) -> None:
        if self._group_consumer is not None:
            with contextlib.suppress(Exception):
                self._group_consumer[1].close(autocommit=False)
            self._group_consumer = None

    def close(self) -> None:
        self._close_consumer()
        with contextlib.suppress(Exception):
            self._producer.close(timeout=self._settings.timeout_s)


class ConfluentProducer:
    """:class:`OutputProducer` on ``confluent_kafka.Producer``."""

    def __init__(self, settings: OutputSettings, transactional_id: str | None) -> None:
        from dstream_kafka.client.librdkafka import require_confluent

        self._ck = require_confluent()
        self._settings = settings
        self._timeout = settings.timeout_s
        conf: dict[str, Any] = dict(settings.librdkafka or {})
        if transactional_id is not None:
            conf["transactional.id"] = transactional_id
        self._client_conf = {k: v for k, v in conf.items() if k not in _RDK_PRODUCER_ONLY}
        conf["logger"] = logging.getLogger("dstream_kafka.write.librdkafka")
        conf["error_cb"] = self._on_client_error
        self._errors: list[Any] = []
        self._fatal: Any = None
        self._producer = self._ck.Producer(conf)
        self._consumer: Any = None
        self._consumer_group: str | None = None
        self._topics = TopicPartitions(self._partition_count, settings.topic_wait_s)

    def _partition_count(self, topic: str, timeout_s: float, refresh: bool) -> int | None:
        # list_topics always asks a broker: every look-up is fresh.
        try:
            found = self._producer.list_topics(topic, max(timeout_s, 0.001)).topics.get(topic)
        except self._ck.KafkaException:  # no answer within timeout_s
            return None
        if found is None or found.error is not None or not found.partitions:
            return None
        return len(found.partitions)

    def _on_client_error(self, error: Any) -> None:
        if error.fatal():
            self._fatal = error

    def _on_delivery(self, error: Any, _message: Any) -> None:
        if error is not None:
            self._errors.append(error)

    def send(self, message: Message) -> None:
        self._topics.check(message)  # the topic exists and has the partition (cached)
        kwargs: dict[str, Any] = {"value": message.value, "key": message.key,
                                  "on_delivery": self._on_delivery}
        if message.headers:
            kwargs["headers"] = message.headers
        if message.partition is not None:
            kwargs["partition"] = message.partition
        while True:
            try:
                self._producer.produce(message.topic, **kwargs)
                break
            except BufferError:  # the local queue is full: serve deliveries, then retry
                self._producer.poll(0.1)
        self._producer.poll(0)

    def _check(self) -> None:
        if self._fatal is not None:
            raise KafkaWriteError(f"the producer failed: {self._fatal}")
        if self._errors:
            raise KafkaWriteError(
                f"Kafka refused {len(self._errors)} record(s) of this task: {self._errors[0]}")

    def flush(self) -> None:
        left = self._producer.flush(self._timeout)
        self._check()
        if left:
            raise KafkaWriteError(
                f"{left} record(s) were not acknowledged within {self._timeout:.0f} s "
                "(transaction.timeout.ms); the brokers are unreachable or overloaded")

    def init(self) -> None:
        self._producer.init_transactions(self._timeout)

    def begin(self) -> None:
        self._producer.begin_transaction()

    def _group_consumer(self, group: str) -> Any:
        if self._consumer is not None and self._consumer_group != group:
            with contextlib.suppress(Exception):
                self._consumer.close()
            self._consumer = None
        if self._consumer is None:
            self._consumer_group = group
            conf = {**self._client_conf, "group.id": group, "enable.auto.commit": False,
                    "isolation.level": "read_committed",
                    "logger": logging.getLogger("dstream_kafka.write.librdkafka")}
            self._consumer = self._ck.Consumer(conf)
        return self._consumer

    def send_offsets(self, topic: str, partition: int, offset: int, metadata: str,
                     group: str) -> None:
        # A consumer that joins nothing: its metadata is the group id with no generation.
        metadata_of_group = self._group_consumer(group).consumer_group_metadata()
        self._producer.send_offsets_to_transaction(
            [self._ck.TopicPartition(topic, partition, offset, metadata)], metadata_of_group,
            self._timeout)

    def commit(self) -> None:
        self.flush()
        self._producer.commit_transaction(self._timeout)

    def abort(self) -> None:
        self._producer.abort_transaction(self._timeout)

    def committed(self, group: str, topic: str, partition: int) -> int | None:
        found = self._group_consumer(group).committed(
            [self._ck.TopicPartition(topic, partition)], self._timeout)[0]
        if found.error is not None:
            raise KafkaWriteError(f"reading the committed offset of {topic}-{partition} for "
                                  f"group {group} failed: {found.error}")
        return None if found.offset < 0 else int(found.offset)

    def fenced(self, error: BaseException) -> bool:
        if self._fatal is not None and self._fatal.name() in _FENCED_ERRORS:
            return True
        for e in _chain(error):
            found = e.args[0] if isinstance(e, self._ck.KafkaException) and e.args else None
            if found is not None and hasattr(found, "name") and found.name() in _FENCED_ERRORS:
                return True
        return False

    def close(self) -> None:
        if self._consumer is not None:
            with contextlib.suppress(Exception):
                self._consumer.close()
        with contextlib.suppress(Exception):
            self._producer.flush(0)


def _chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions it was raised from."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def consumer_settings(settings: OutputSettings) -> Mapping[str, Any]:
    """The client part of ``settings.producer`` (servers, security): for look-ups."""
    from kafka import KafkaConsumer

    known = KafkaConsumer.DEFAULT_CONFIG
    return {k: v for k, v in settings.producer.items()
            if k in known and not k.endswith("_serializer")}
