"""The kafka-python backend (the default): ``kafka.KafkaConsumer`` assign, seek and poll."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from dstream_kafka._kafka_internals import record_offset, to_record
from dstream_kafka.read.backends.base import OffsetOutOfRange, record_decoder
from dstream_kafka.client.kafka_params import bootstrap_failure
from dstream_kafka.record import ConsumerRecord

__all__ = ["KafkaPythonBackend"]

log = logging.getLogger(__name__)

#: Records taken from the client per poll unless ``max.poll.records`` is set. kafka-python
#: sends the next fetch only once a poll has drained the previous one, so a poll that takes
#: a whole fetch (about 9,000 records of 100 B with the 1 MiB default) lets that fetch run
#: while the records are processed; its default of 500 leaves the fetch for the next poll.
DEFAULT_BATCH = 10000
#: Poll slice of a consumer's first fetch. Until the partition's leader is known, kafka-python
#: sleeps ``retry_backoff_ms`` (100 ms) per idle poll; short polls see the metadata arrive.
FIRST_FETCH_SLICE_MS = 5

# The broker version (kafka-python's api_version) each bootstrap list answered with in this
# process: a worker's later consumers skip the version bootstrap (about 100 ms each).
_broker_versions: dict[str, Any] = {}
_versions_lock = threading.Lock()


class KafkaPythonBackend:
    """A ``kafka.KafkaConsumer`` assigned to one partition.

    The client gets no ``group_id``: it only reads assigned partitions and never commits, and
    with a group id kafka-python would look up the group coordinator on every poll.
    Fetched items are kafka-python's own records, undecoded: deserializers run in
    :meth:`to_record`, where the record's offset is known, so a failure names it.
    """

    offset_of = staticmethod(record_offset)

    def __init__(self, topic: str, partition: int, config: Mapping[str, Any]) -> None:
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KafkaTopicPartition

        self.topic_partition = KafkaTopicPartition(topic, partition)
        config = dict(config)
        config["group_id"] = None
        # Decoded in to_record, not by kafka-python: its fetcher knows no offset to report.
        self._key = record_decoder(config.pop("key_deserializer", None), "key", topic, partition)
        self._value = record_decoder(
            config.pop("value_deserializer", None), "value", topic, partition)
        self._batch = int(config.get("max_poll_records") or DEFAULT_BATCH)
        self._fetched = False
        servers = str(config.get("bootstrap_servers"))
        if config.get("api_version") is None:
            with _versions_lock:
                known = _broker_versions.get(servers)
            if known is not None:
                config["api_version"] = known
        try:
            consumer = KafkaConsumer(**config)
        except Exception as exc:
            # An executor may not reach a broker the driver reached: same explained error.
            error = bootstrap_failure(config, exc)
            if error is None:
                raise
            raise error from None
        version = consumer.config.get("api_version")
        if isinstance(version, tuple):
            with _versions_lock:
                _broker_versions.setdefault(servers, version)
        consumer.assign([self.topic_partition])
        self._consumer = consumer

    def to_record(self, item: Any) -> ConsumerRecord:
        """Return fetched record ``item`` as a :class:`ConsumerRecord`, deserialized."""
        record = to_record(item)
        if self._key is None and self._value is None:
            return record
        key, value = record.key, record.value
        if self._key is not None:
            key = self._key(key, item.headers, record.offset)
        if self._value is not None:
            value = self._value(value, item.headers, record.offset)
        # tuple.__new__ runs per record: cheaper than NamedTuple._replace.
        return tuple.__new__(ConsumerRecord, (*record[:5], key, value, record[7]))

    def seek(self, offset: int) -> None:
        self._consumer.seek(self.topic_partition, offset)

    def fetch(self, timeout_ms: int, max_records: int | None = None) -> list[Any]:
        from kafka.errors import OffsetOutOfRangeError

        limit = self._batch if max_records is None else min(max_records, self._batch)
        deadline = time.monotonic() + timeout_ms / 1000
        try:
            while True:
                wait = timeout_ms if self._fetched else min(timeout_ms, FIRST_FETCH_SLICE_MS)
                batch = self._consumer.poll(timeout_ms=wait, max_records=limit).get(
                    self.topic_partition
                )
                if batch or self._fetched:
                    break
                timeout_ms = max(0, int((deadline - time.monotonic()) * 1000))
                if timeout_ms <= 0:
                    break
        except OffsetOutOfRangeError:
            raise OffsetOutOfRange() from None
        if batch:
            self._fetched = True
        return batch or []

    def position(self) -> int:
        # kafka-python moves the position past control batches and aborted batches.
        position = self._consumer.position(self.topic_partition, timeout_ms=5000)
        return -1 if position is None else position

    def watermarks(self, timeout_ms: int) -> tuple[int | None, int | None]:
        tp = self.topic_partition
        earliest = self._consumer.beginning_offsets([tp], timeout_ms=timeout_ms)[tp]
        latest = self._consumer.end_offsets([tp], timeout_ms=timeout_ms)[tp]
        return earliest, latest

    def close(self) -> None:
        self._consumer.close(autocommit=False, timeout_ms=5000)
