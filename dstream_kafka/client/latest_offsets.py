"""The latest offsets of a batch: the driver's look-up with bounded, configurable retries.

Each batch's planning asks Kafka for the log end offset of every assigned partition. As Spark's
0-8 ``latestLeaderOffsets`` did, a failed look-up is tried again
(``spark.streaming.kafka.maxRetries`` more times, ``spark.streaming.kafka.retryBackoff`` apart),
each try bounded by ``spark.streaming.kafka.lookupTimeout``; a deleted topic is told apart from
a broker outage, because no retry brings it back.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

from dstream_kafka.errors import BrokerTimeoutError, StreamingStateError
from dstream_kafka.offsets import TopicPartition

__all__ = ["LOOKUP_TIMEOUT_MS", "REFRESH_LEADER_BACKOFF_MS", "STOP_CHECK_MS", "MAX_SLICE_MS",
           "PartitionsGone", "describe_parts", "latest_offsets"]

log = logging.getLogger(__name__)

#: Pause between tries of the latest-offset look-up (Kafka 0-8's ``refresh.leader.backoff.ms``
#: default, which Spark's 0-8 stream sleeps between its ``spark.streaming.kafka.maxRetries``);
#: ``spark.streaming.kafka.retryBackoff`` sets it per stream.
REFRESH_LEADER_BACKOFF_MS = 200

#: Longest wait of one try of the latest-offset look-up, unless
#: ``spark.streaming.kafka.lookupTimeout`` says otherwise (kafka-python's request.timeout.ms).
LOOKUP_TIMEOUT_MS = 30_000


class PartitionsGone(Exception):
    """Raised by :func:`latest_offsets` when partitions it looks up no longer exist in Kafka."""

    def __init__(self, partitions: set[TopicPartition]) -> None:
        super().__init__(sorted(partitions))
        self.partitions = partitions


def latest_offsets(consumer: Any, parts: Sequence[TopicPartition], retries: int,
                   backoff_ms: int = REFRESH_LEADER_BACKOFF_MS,
                   timeout_ms: int = LOOKUP_TIMEOUT_MS,
                   servers: str = "bootstrap.servers",
                   find_vanished: Callable[[Sequence[TopicPartition]], set[TopicPartition]]
                   | None = None,
                   stopping: threading.Event | None = None) -> dict[TopicPartition, int]:
    """Return the log end offset of each of ``parts``, trying ``retries`` more times on error.

    As Spark's 0-8 ``latestLeaderOffsets``: a failed look-up is logged and tried again after
    ``backoff_ms``. Each try waits at most ``timeout_ms``, so the look-up gives up after
    ``(retries + 1) * timeout_ms + retries * backoff_ms`` at the latest; a broker restarted
    within that time is ridden out. After a failed try, ``find_vanished(parts)`` (when given)
    tells whether partitions were deleted, which no retry would fix.

    Once ``stopping`` is set (the stream's stop began), a look-up that is not answered is
    abandoned within :data:`MAX_SLICE_MS`: a try waits in slices (:data:`STOP_CHECK_MS`,
    doubling up to that) and checks ``stopping`` between them and before a retry.

    Raises
    ------
    BrokerTimeoutError
        Naming ``servers`` and the keys that set the bounds, when every try failed; the last
        try's error is its cause.
    PartitionsGone
        When a failed try is explained by partitions that no longer exist (deleted topic).
    StreamingStateError
        When ``stopping`` was set while the broker did not answer.
    """
    from kafka import TopicPartition as KafkaTopicPartition
    from kafka.errors import KafkaError

    ktps = [KafkaTopicPartition(tp.topic, tp.partition) for tp in parts]
    tries_left = retries
    while True:
        try:
            ends = _one_try(consumer, ktps, timeout_ms, stopping, parts)
            return {TopicPartition(tp.topic, tp.partition): int(off) for tp, off in ends.items()}
        except (KafkaError, KeyError) as exc:
            # kafka-python's end_offsets raises KeyError(partition) when a partition's topic
            # left the metadata (deleted) during the look-up: the same question as an error.
            try:
                gone = find_vanished(parts) if find_vanished is not None else set()
            except KafkaError:
                gone = set()  # the broker is not answering either: not proof of deletion
            if gone:
                raise PartitionsGone(gone) from exc
            if tries_left <= 0:
                raise BrokerTimeoutError(
                    f"Kafka at {servers} did not return the latest offsets of "
                    f"{describe_parts(parts)} in {retries + 1} tries of up to {timeout_ms} ms "
                    f"each ({type(exc).__name__}: {exc}); check that the brokers are up and "
                    "reachable, or allow a longer outage with spark.streaming.kafka.maxRetries, "
                    "spark.streaming.kafka.retryBackoff and spark.streaming.kafka.lookupTimeout"
                ) from exc
            tries_left -= 1
            log.error("Latest offsets look-up failed (%s); trying again in %d ms", exc,
                         backoff_ms)
            if stopping is None:
                time.sleep(backoff_ms / 1000.0)
            elif stopping.wait(backoff_ms / 1000.0):
                raise _abandoned(parts) from exc


#: The first slice of a try: how long a look-up goes on unanswered once the stream's stop began.
STOP_CHECK_MS = 1_000

#: The longest slice (slices double after each unanswered one): a stop waits at most this long.
MAX_SLICE_MS = 4_000


def _one_try(consumer: Any, ktps: list[Any], timeout_ms: int, stopping: threading.Event | None,
             parts: Sequence[TopicPartition]) -> Mapping[Any, int]:
    """One try of up to ``timeout_ms``; in slices of :data:`STOP_CHECK_MS` when ``stopping``
    is given, so a stop abandons it (the slices ask again; an answer ends the try at once)."""
    from kafka.errors import KafkaTimeoutError

    if stopping is None:
        return cast("Mapping[Any, int]", consumer.end_offsets(ktps, timeout_ms=timeout_ms))
    deadline = time.monotonic() + timeout_ms / 1000.0
    slice_ms = STOP_CHECK_MS
    while True:
        left_ms = int((deadline - time.monotonic()) * 1000)
        try:
            return cast("Mapping[Any, int]",
                        consumer.end_offsets(ktps, timeout_ms=max(1, min(left_ms, slice_ms))))
        except KafkaTimeoutError as exc:
            if stopping.is_set():
                raise _abandoned(parts) from exc
            if left_ms <= slice_ms:
                raise
            # A slice asks again (the late answer of the previous one is dropped): slices grow,
            # so a broker that answers slowly is still heard.
            slice_ms = min(2 * slice_ms, MAX_SLICE_MS)


def _abandoned(parts: Sequence[TopicPartition]) -> StreamingStateError:
    return StreamingStateError(
        f"The stream stopped while Kafka did not answer the latest-offset look-up of "
        f"{describe_parts(parts)}: the look-up was abandoned, so the batch was not planned and "
        "nothing of it is committed")


def describe_parts(parts: Sequence[TopicPartition]) -> str:
    shown = ", ".join(f"{tp.topic}-{tp.partition}" for tp in list(parts)[:5])
    return shown + (f" and {len(parts) - 5} more" if len(parts) > 5 else "")
