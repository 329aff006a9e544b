"""The record type that Kafka RDDs and direct streams yield."""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["ConsumerRecord", "TIMESTAMP_TYPES"]

#: Kafka's timestamp types, by the integer code the protocol uses.
TIMESTAMP_TYPES = {-1: "NO_TIMESTAMP_TYPE", 0: "CreateTime", 1: "LogAppendTime"}


class ConsumerRecord(NamedTuple):
    """One Kafka record, as read by an executor.

    A plain tuple subclass, so it pickles cheaply between Python workers and the driver
    (unlike Spark's JVM ``ConsumerRecord``, which is not serializable).

    Attributes
    ----------
    topic : str
    partition : int
    offset : int
    timestamp : int
        Milliseconds since the epoch, or -1 when the record has none.
    timestampType : int
        0 for CreateTime, 1 for LogAppendTime, -1 for none (see :data:`TIMESTAMP_TYPES`).
    key : bytes or None
        Raw key bytes, or the output of the configured ``key.deserializer``.
    value : bytes or None
        Raw value bytes, or the output of the configured ``value.deserializer``.
    headers : tuple of (str, bytes)
        Record headers in log order.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestampType: int
    key: Any
    value: Any
    headers: tuple[tuple[str, bytes], ...] = ()
