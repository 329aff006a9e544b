"""One consumer assigned to one topic partition, read by offset (executor side).

This is Spark's ``InternalKafkaConsumer`` plus the two ``KafkaRDD`` iterators, written once
over a small client interface (:mod:`dstream_kafka.read.backends`: kafka-python by default,
confluent-kafka with ``spark.streaming.kafka.consumer.backend``). Records come back in offset
order from a buffer filled by the client's fetch; a read that continues where the last one
stopped uses the buffer and the client's prefetched data without seeking, and any jump
seeks. Two iteration modes:

* strict (the default): every offset in ``[from, until)`` must come back, in order, else
  :class:`~dstream_kafka.errors.WrongOffsetError` or
  :class:`~dstream_kafka.errors.FetchTimeoutError` with Spark's texts;
* non-consecutive (``spark.streaming.kafka.allowNonConsecutiveOffsets``): gaps from
  compaction, aborted transactions and transaction markers are skipped. The end of the
  range is found from the consumer position, which both backends move past control batches
  and aborted batches (kafka-python's position; librdkafka's end-of-partition offset), so a
  range that ends inside a gap finishes at once instead of waiting for a record that never
  comes (Spark's limitation, apache/hudi#8258).

Instances are not thread-safe; :mod:`dstream_kafka.read.consumer_cache` hands each to one user
at a time. Process-wide counters (creations, seeks, polls, records) are
:mod:`dstream_kafka.read.counters`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

from dstream_kafka.read.backends import (
    DEFAULT_BACKEND,
    ConsumerBackend,
    OffsetOutOfRange,
    create_backend,
)
from dstream_kafka.errors import DataLossError, FetchTimeoutError, KafkaReadError, WrongOffsetError
from dstream_kafka.read.counters import bump
from dstream_kafka.record import ConsumerRecord

__all__ = [
    "CacheKey",
    "InternalKafkaConsumer",
    "RecordsDeletedError",
]

log = logging.getLogger(__name__)

# While records may never come (a gap), poll in slices this long and check the position.
_POLL_SLICE_MS = 200
_ALLOW_HINT = (
    "If this is a compacted topic, consider enabling "
    "spark.streaming.kafka.allowNonConsecutiveOffsets"
)


class RecordsDeletedError(DataLossError):
    """Records of a planned range were deleted from Kafka before an executor read them.

    Attributes
    ----------
    topic, partition : str, int
    offset : int
        The first offset that was asked for and is gone.
    earliest : int
        The log start offset when the read failed: ``[offset, earliest)`` is lost.
    """

    def __init__(self, message: str, topic: str, partition: int, offset: int,
                 earliest: int) -> None:
        super().__init__(message)
        self.topic, self.partition, self.offset, self.earliest = topic, partition, offset, earliest

    def __reduce__(self) -> Any:
        return type(self), (str(self), self.topic, self.partition, self.offset, self.earliest)


def _matching_prefix(offsets: list[int], wanted: range) -> int:
    """Return how many leading ``offsets`` equal ``wanted`` (they differ somewhere)."""
    return next(i for i, (got, want) in enumerate(zip(offsets, wanted)) if got != want)


class CacheKey(NamedTuple):
    """Identity of a cached consumer: executor group id and topic partition (Spark's)."""

    groupId: str
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.groupId} {self.topic}-{self.partition}"


class InternalKafkaConsumer:
    """A client of ``backend`` assigned to ``key``'s partition, created on first use.

    Parameters
    ----------
    key : CacheKey
    config : mapping
        ``kafka.KafkaConsumer`` keyword arguments from
        :func:`~dstream_kafka.client.kafka_params.fix_kafka_params` (the confluent-kafka backend
        translates them to librdkafka settings). The executor group id stays the cache key and
        appears in every error message.
    fingerprint : str
        Identity of ``config`` (see :func:`~dstream_kafka.client.configs.params_fingerprint`).
    backend : str
        ``kafka-python`` (default) or ``confluent-kafka`` (see :mod:`dstream_kafka.read.backends`).
    """

    def __init__(
        self,
        key: CacheKey,
        config: Mapping[str, Any],
        fingerprint: str = "",
        backend: str = DEFAULT_BACKEND,
    ) -> None:
        self.key = key
        self.fingerprint = fingerprint
        self.backend = backend
        self._config = dict(config)
        self._consumer: ConsumerBackend | None = None
        # The backend's items (its own record objects), turned into records as handed out.
        self._buffer: list[Any] = []
        self._index = 0
        # Offset a read may start at without seeking: the client and buffer continue there.
        self._next_offset = -1
        self.in_use = False
        self.marked_for_close = False
        self.closed = False

    def __repr__(self) -> str:
        return (
            f"InternalKafkaConsumer({self.key}, next_offset={self._next_offset}, "
            f"backend={self.backend})"
        )

    @property
    def next_offset(self) -> int:
        """Offset the next sequential read starts at without a seek (-1 before any read)."""
        return self._next_offset

    def _tp_text(self) -> str:
        return f"{self.key.topic}-{self.key.partition}"

    def _client(self) -> ConsumerBackend:
        if self.closed:
            raise KafkaReadError(f"Consumer for {self.key} is closed")
        if self._consumer is None:
            self._consumer = create_backend(
                self.backend, self.key.topic, self.key.partition, self._config
            )
            bump("creations")
        return self._consumer

    def close(self) -> None:
        """Close the client (idempotent); pending buffered records are dropped."""
        if self.closed:
            return
        self.closed = True
        self._buffer = []
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            bump("closes")
            try:
                consumer.close()
            except Exception:  # closing is best effort; the task result does not depend on it
                log.debug("Error closing consumer for %s", self.key, exc_info=True)

    # -- buffer ------------------------------------------------------------------------------

    def _seek(self, offset: int, counter: str = "seeks") -> None:
        self._client().seek(offset)
        self._buffer = []
        self._index = 0
        self._next_offset = offset
        bump(counter)

    def pre_position(self, offset: int) -> bool:
        """Seek to ``offset`` between tasks, so a client that fetches in the background
        (librdkafka) has records from there queued when the next read comes.

        Counted as ``prepositions``, not ``seeks``. Returns False, doing nothing, before the
        client exists or when the consumer already stands at ``offset``.
        """
        if self._consumer is None or offset == self._next_offset:
            return False
        try:
            self._seek(offset, "prepositions")
            return True
        except Exception:
            # A read will meet the same problem and report it with its own context.
            self.marked_for_close = True
            raise

    def _poll(
        self,
        timeout_ms: int,
        offset: int,
        stop_at: int | None = None,
        max_records: int | None = None,
    ) -> bool:
        """Refill the buffer; return False when nothing arrived.

        Without ``stop_at`` this waits up to ``timeout_ms`` for records. With it, the wait is
        cut into short polls and ends early once the consumer position reaches ``stop_at``:
        a client's fetch keeps waiting when it held only control or aborted batches, even
        though the position has already moved past them. ``max_records`` caps the records
        taken from the client (a range's remaining count: what lies beyond stays undecoded in
        the client for the next sequential read).
        """
        consumer = self._client()
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            remaining = max(0, int((deadline - time.monotonic()) * 1000))
            wait = remaining if stop_at is None else min(remaining, _POLL_SLICE_MS)
            try:
                batch = consumer.fetch(wait, max_records)
            except OffsetOutOfRange:
                raise self._out_of_range(offset) from None
            bump("polls")
            self._buffer = batch
            self._index = 0
            if batch:
                return True
            if remaining <= 0 or (stop_at is not None and self._position() >= stop_at):
                return False

    def _position(self) -> int:
        return self._client().position()

    def _out_of_range(self, offset: int) -> KafkaReadError | DataLossError:
        try:
            earliest, latest = self._client().watermarks(10000)
        except Exception:  # the error below says the log bounds are unknown; keep why
            log.debug("Watermarks of %s for %s unknown after offset %d was out of range",
                      self._tp_text(), self.key.groupId, offset, exc_info=True)
            earliest = latest = None
        if earliest is not None and offset < earliest:
            return RecordsDeletedError(
                f"Offset {offset} of {self._tp_text()} is no longer in Kafka for "
                f"{self.key.groupId}: "
                f"the earliest available offset is {earliest}, so records [{offset}, {earliest}) "
                "were removed (retention, delete-records or topic re-creation) after the range "
                "was planned; set failOnDataLoss=false to skip them and record the loss",
                self.key.topic, self.key.partition, offset, int(earliest)
            )
        return KafkaReadError(
            f"Offset {offset} of {self._tp_text()} is out of range for {self.key.groupId}: "
            f"the log holds [{earliest}, {latest}); the range was planned past the end of the log"
        )

    # -- Spark's get(offset) -----------------------------------------------------------------

    def get(self, offset: int, timeout_ms: int) -> ConsumerRecord:
        """Return the record at exactly ``offset`` (Spark's ``InternalKafkaConsumer.get``).

        After a failure the consumer is marked for close, so the cache does not keep it.

        Raises
        ------
        WrongOffsetError
            If the record at that position has another offset even after seeking.
        FetchTimeoutError
            If nothing arrives within ``timeout_ms``.
        """
        try:
            if offset != self._next_offset:
                self._seek(offset)
            record = self._next_strict(offset, timeout_ms)
        except Exception:
            self.marked_for_close = True
            raise
        self._next_offset = offset + 1
        return record

    def _next_strict(self, offset: int, timeout_ms: int) -> ConsumerRecord:
        if self._index >= len(self._buffer):
            self._fill_strict(offset, timeout_ms)
        offset_of = self._client().offset_of
        item = self._buffer[self._index]
        if offset_of(item) != offset:
            log.info("Buffer miss for %s %s", self.key, offset)
            self._seek(offset)
            self._fill_strict(offset, timeout_ms)
            item = self._buffer[0]
            if offset_of(item) != offset:
                raise WrongOffsetError(
                    f"Got wrong record for {self.key.groupId} {self._tp_text()} even after seeking "
                    f"to offset {offset} got offset {offset_of(item)} instead. {_ALLOW_HINT}"
                )
        self._index += 1
        return self._client().to_record(item)

    def _fill_strict(self, offset: int, timeout_ms: int, max_records: int | None = None) -> None:
        if self._poll(timeout_ms, offset, stop_at=offset + 1, max_records=max_records):
            return
        position = self._position()
        if position > offset:
            # The client stepped over ``offset`` without a record: a transaction marker, an
            # aborted batch or a compacted record.
            raise WrongOffsetError(
                f"Got wrong record for {self.key.groupId} {self._tp_text()} even after seeking to "
                f"offset {offset}: there is no record at that offset (the consumer moved on to "
                f"{position}; a transaction marker, aborted or compacted records). {_ALLOW_HINT}"
            )
        raise FetchTimeoutError(
            f"Failed to get records for {self.key.groupId} {self._tp_text()} {offset} "
            f"after polling for {timeout_ms}"
        )

    # -- ranges ------------------------------------------------------------------------------

    def iter_range(
        self, from_offset: int, until_offset: int, timeout_ms: int, strict: bool = True
    ) -> Iterator[ConsumerRecord]:
        """Yield the records of ``[from_offset, until_offset)`` in offset order.

        ``strict`` demands every offset (Spark's default ``KafkaRDDIterator``); otherwise
        gaps are skipped (``CompactedKafkaRDDIterator``) and the range ends when the next
        record or the consumer position reaches ``until_offset``. Nothing happens before the
        first record is requested. The state stays consistent if the caller stops early, so
        a later read can continue from where this one stopped; after a failure the consumer
        is marked for close.
        """
        if from_offset >= until_offset:
            return iter(())
        reader = self._strict_range if strict else self._gapped_range
        return reader(from_offset, until_offset, timeout_ms)

    def _start(self, from_offset: int) -> None:
        if from_offset != self._next_offset:
            self._seek(from_offset)

    def _strict_range(self, start: int, until: int, timeout_ms: int) -> Iterator[ConsumerRecord]:
        # Records are handed out in blocks: the largest run of the buffer the range still
        # needs, checked in one C-level comparison against the offsets it must hold. The
        # state (buffer index, next offset) is saved before a block is handed out and set
        # back to the last record handed out if the caller stops inside the block.
        expected = start
        record: Any = None
        block_index = block_first = -1  # the block being handed out, -1 when none
        try:
            self._start(start)
            client = self._client()
            offset_of, to_record = client.offset_of, client.to_record
            while expected < until:
                if self._index >= len(self._buffer):
                    self._fill_strict(expected, timeout_ms, until - expected)
                buffer, index = self._buffer, self._index
                count = min(len(buffer) - index, until - expected)
                if count == len(buffer):
                    block = buffer
                else:
                    block = buffer[index : index + count]
                offsets = list(map(offset_of, block))
                wanted = range(expected, expected + count)
                if offsets != list(wanted):
                    # A gap or a stale record: hand out the run before it, then take Spark's
                    # per-offset path (seek, exact match) at the first wrong offset.
                    count = _matching_prefix(offsets, wanted)
                    if count == 0:
                        record = self._next_strict(expected, timeout_ms)
                        expected += 1
                        self._next_offset = expected
                        yield record
                        continue
                    block = buffer[index : index + count]
                self._index = index + count
                self._next_offset = expected + count
                block_index, block_first = index, expected
                expected += count
                record = None
                for item in block:
                    record = to_record(item)
                    yield record
                block_index = -1
        except Exception:
            # Its client state is unknown now: the cache closes it on release.
            self.marked_for_close = True
            raise
        finally:
            if block_index >= 0:
                # Stopped inside a block: only the records up to ``record`` were handed out.
                expected = block_first if record is None else record.offset + 1
                self._index = block_index + (expected - block_first)
                self._next_offset = expected
            bump("records", expected - start)

    def _gapped_range(self, start: int, until: int, timeout_ms: int) -> Iterator[ConsumerRecord]:
        done = 0
        try:
            self._start(start)
            client = self._client()
            offset_of, to_record = client.offset_of, client.to_record
            while True:
                if self._index >= len(self._buffer):
                    # The position is past control batches and aborted batches already
                    # consumed, so a range ending in such a gap is complete here.
                    if self._position() >= until:
                        break
                    # At most ``until - next`` records can lie below ``until``.
                    if (
                        not self._poll(
                            timeout_ms,
                            self._next_offset,
                            stop_at=until,
                            max_records=max(1, until - self._next_offset),
                        )
                        and self._position() < until
                    ):
                        raise FetchTimeoutError(
                            f"Failed to get records for compacted {self.key.groupId} "
                            f"{self._tp_text()} after polling for {timeout_ms}"
                        )
                    continue
                item = self._buffer[self._index]
                offset = offset_of(item)
                if offset >= until:
                    break
                self._index += 1
                self._next_offset = offset + 1
                done += 1
                yield to_record(item)
            self._next_offset = until
        except Exception:
            # Its client state is unknown now: the cache closes it on release.
            self.marked_for_close = True
            raise
        finally:
            bump("records", done)
