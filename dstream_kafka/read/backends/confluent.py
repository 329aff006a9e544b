"""The confluent-kafka backend (``pip install dstream_kafka[fast]``): librdkafka underneath.

Selected with ``spark.streaming.kafka.consumer.backend=confluent-kafka``. The executor
parameters (kafka-python keyword names, from
:func:`~dstream_kafka.client.kafka_params.fix_kafka_params`) are translated to librdkafka settings
by :func:`~dstream_kafka.client.librdkafka.librdkafka_config`, the one translation, whose module
says how reads keep the kafka-python backend's semantics; the driver translates them once
before any job (:attr:`~dstream_kafka.client.configs.ClientConfigs.librdkafka`), so a setting
the backend cannot honour fails there. Key and value deserializers are the same Python
callables, applied to the raw bytes.

This module imports ``confluent_kafka`` only when a client is created.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, cast

# librdkafka_config and require_confluent lived here until the translation moved to client/;
# imported by name, so their old import path still works.
from dstream_kafka.client.librdkafka import librdkafka_config as librdkafka_config
from dstream_kafka.client.librdkafka import require_confluent as require_confluent
from dstream_kafka.errors import KafkaAuthenticationError, KafkaReadError
from dstream_kafka.read.backends.base import LIBRDKAFKA_KEY, OffsetOutOfRange, record_decoder
from dstream_kafka.record import ConsumerRecord

__all__ = ["ConfluentBackend"]

log = logging.getLogger(__name__)

#: Records taken from librdkafka's queue per call (``max.poll.records`` overrides it).
DEFAULT_BATCH = 10000
# librdkafka timestamp type -> Kafka's code (-1 none, 0 CreateTime, 1 LogAppendTime).
_TIMESTAMP_TYPES = {0: -1, 1: 0, 2: 1}


class ConfluentBackend:
    """A ``confluent_kafka.Consumer`` reading one partition through ``assign``/``consume``.

    The fetch position is tracked here: the offset after the last record delivered, raised
    by end-of-partition events (they report where the fetcher stopped, past control and
    aborted records) and set by each seek.
    """

    def __init__(self, topic: str, partition: int, config: Mapping[str, Any]) -> None:
        ck = require_confluent()
        self._ck = ck
        self.topic = topic
        self.partition = partition
        # The driver's translation when it shipped one (a dict of its own: callbacks go in).
        given = config.get(LIBRDKAFKA_KEY)
        conf = librdkafka_config(config) if given is None else dict(given)
        conf["logger"] = logging.getLogger("dstream_kafka.read.backends.librdkafka")
        # librdkafka retries a refused login for ever; the first refusal fails the read.
        self._auth_error: str | None = None
        conf["error_cb"] = self._on_client_error
        self._batch = int(config.get("max_poll_records") or DEFAULT_BATCH)
        self._key = record_decoder(config.get("key_deserializer"), "key", topic, partition)
        self._value = record_decoder(config.get("value_deserializer"), "value", topic, partition)
        self._consumer = ck.Consumer(conf)
        self.offset_of = ck.Message.offset
        self._error_of = ck.Message.error
        self._assigned = False
        self._position = -1
        self._floor = 0
        self._eof = ck.KafkaError._PARTITION_EOF
        self._out_of_range = (ck.KafkaError._AUTO_OFFSET_RESET, ck.KafkaError.OFFSET_OUT_OF_RANGE)

    def seek(self, offset: int) -> None:
        tp = self._ck.TopicPartition(self.topic, self.partition, offset)
        if self._assigned:
            try:
                self._consumer.seek(tp)
            except self._ck.KafkaException:
                # Not fetching yet ("Erroneous state"): the start offset goes in assign.
                self._consumer.assign([tp])
        else:
            # The start offset is given in assign: a seek right after assign can fail.
            self._consumer.assign([tp])
            self._assigned = True
        self._position = offset
        self._floor = offset

    def _on_client_error(self, error: Any) -> None:
        if error.code() == self._ck.KafkaError._AUTHENTICATION and self._auth_error is None:
            self._auth_error = str(error.str())

    def _raise_auth_error(self) -> None:
        if self._auth_error is not None:
            raise KafkaAuthenticationError(
                f"confluent-kafka consumer for {self.topic}-{self.partition}: the brokers refused "
                f"the SASL login ({self._auth_error}); check the user name and password in "
                "sasl.jaas.config")

    def fetch(self, timeout_ms: int, max_records: int | None = None) -> list[Any]:
        self._raise_auth_error()
        consumer = self._consumer
        batch = self._batch if max_records is None else min(max_records, self._batch)
        # consume(n, timeout) waits until n messages or the timeout: take what is queued, and
        # only when nothing is, wait for one message and then take what followed it.
        messages = consumer.consume(batch, 0)
        if not messages and timeout_ms > 0:
            messages = consumer.consume(1, timeout_ms / 1000)
            if messages and messages[0].error() is None and batch > 1:
                messages.extend(consumer.consume(batch - 1, 0))
        if not messages:
            self._raise_auth_error()
            return []
        # Usually every message is a record at or past the last seek: checked in C, kept as is.
        if any(map(self._error_of, messages)) or messages[0].offset() < self._floor:
            messages = self._records_only(messages)
        if messages:
            self._position = max(self._position, messages[-1].offset() + 1)
        return cast("list[Any]", messages)

    def _records_only(self, messages: list[Any]) -> list[Any]:
        floor = self._floor
        records = []
        for message in messages:
            if message.error() is not None:
                self._on_error(message)
            elif message.offset() >= floor:  # older ones were prefetched before a seek
                records.append(message)  # (librdkafka#2256): never returned
        return records

    def to_record(self, message: Any) -> ConsumerRecord:
        ts_type, timestamp = message.timestamp()
        headers = message.headers()
        key = message.key()
        value = message.value()
        if self._key is not None:
            key = self._key(key, headers, message.offset())
        if self._value is not None:
            value = self._value(value, headers, message.offset())
        return tuple.__new__(
            ConsumerRecord,
            (
                self.topic,
                self.partition,
                message.offset(),
                timestamp if ts_type else -1,
                _TIMESTAMP_TYPES[ts_type],
                key,
                value,
                tuple(headers) if headers else (),
            ),
        )

    def _on_error(self, message: Any) -> None:
        error = message.error()
        code = error.code()
        if code == self._eof:
            # The offset the fetcher reached: everything before it was delivered or skipped.
            if message.offset() is not None and message.offset() >= 0:
                self._position = max(self._position, message.offset())
            return
        if code in self._out_of_range:
            raise OffsetOutOfRange()
        if error.fatal():
            raise KafkaReadError(
                f"confluent-kafka consumer for {self.topic}-{self.partition} failed: {error.str()}"
            )
        log.warning(
            "confluent-kafka consumer for %s-%d: %s", self.topic, self.partition, error.str()
        )

    def position(self) -> int:
        return self._position

    def watermarks(self, timeout_ms: int) -> tuple[int | None, int | None]:
        tp = self._ck.TopicPartition(self.topic, self.partition)
        low, high = self._consumer.get_watermark_offsets(
            tp, timeout=timeout_ms / 1000, cached=False
        )
        return (low if low >= 0 else None), (high if high >= 0 else None)

    def close(self) -> None:
        self._consumer.close()
