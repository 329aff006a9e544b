"""The exception hierarchy of dstream_kafka.

Every error the package raises on purpose derives from :class:`DStreamKafkaError`, so
``except DStreamKafkaError`` catches all of them. Most classes also derive from the builtin
that fits (``ValueError``, ``TypeError``, ``RuntimeError``, ``ImportError``) so that code
written against Spark's or kafka-python's conventions keeps working.

Hierarchy::

    DStreamKafkaError
    ├── ConfigurationError (ValueError)         bad user input, found before any data moves
    │   ├── InvalidOffsetRangeError              fromOffset > untilOffset, negative offsets
    │   ├── OffsetsJsonError                     malformed startingOffsets/endingOffsets JSON
    │   └── UnknownTopicPartitionError           a topic or partition the cluster does not have
    ├── SparkConnectUnreachableError             no Spark Connect server answers at the URL
    │                     (ConnectionError)
    ├── MissingDependencyError (ImportError)     an optional extra or a system tool is missing
    ├── KafkaReadError (RuntimeError)            executor-side reads that did not return the range
    │   ├── WrongOffsetError                     a record came back at another offset than asked
    │   └── FetchTimeoutError                    no data within the poll timeout
    ├── KafkaWriteError (RuntimeError)           the Kafka output could not write or commit
    │   └── OutputFencedError                    the group's offsets are not where the batch starts
    ├── BrokerTimeoutError (TimeoutError)        Kafka did not answer a driver request in time
    ├── DataLossError (RuntimeError)             offsets that are no longer in the log
    ├── PartitionsRevokedError (RuntimeError)    another consumer in the same group took partitions
    ├── OffsetCommitError (RuntimeError)         a commit to Kafka or a store failed
    ├── OffsetStoreError (RuntimeError)          offset store failures
    │   ├── OffsetFencedError                    a commit that does not continue the stored offsets
    │   └── CorruptCheckpointError               unreadable or truncated checkpoint files
    ├── RecordDecodeError (ValueError)          a record a Schema Registry decoder cannot decode
    │   └── UnknownSchemaError                   its schema id is not in the registry
    ├── SchemaRegistryError (RuntimeError)       the registry refused or failed a request
    ├── StreamingStateError (RuntimeError)       a StreamingContext used in the wrong state
    └── ReceiverStreamNotSupportedError          0-8 createStream (use createDirectStream)
                          (NotImplementedError)

The local services of the command line raise their own errors
(:mod:`dstream_kafka.operate.services.errors`), outside this tree.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DStreamKafkaError",
    "ConfigurationError",
    "InvalidOffsetRangeError",
    "OffsetsJsonError",
    "UnknownTopicPartitionError",
    "SparkConnectNotSupportedError",
    "SparkConnectUnreachableError",
    "MissingDependencyError",
    "KafkaReadError",
    "WrongOffsetError",
    "FetchTimeoutError",
    "BrokerTimeoutError",
    "KafkaWriteError",
    "OutputFencedError",
    "DataLossError",
    "PartitionsRevokedError",
    "OffsetCommitError",
    "OffsetStoreError",
    "OffsetFencedError",
    "CorruptCheckpointError",
    "RecordDecodeError",
    "UnknownSchemaError",
    "SchemaRegistryError",
    "StreamingStateError",
    "ReceiverStreamNotSupportedError",
    "KafkaAuthenticationError",
]


class DStreamKafkaError(Exception):
    """Root of every exception raised on purpose by dstream_kafka."""


class ConfigurationError(DStreamKafkaError, ValueError):
    """Bad user input: the message names the field and how to fix it."""


class InvalidOffsetRangeError(ConfigurationError):
    """An offset range that cannot be read (``fromOffset > untilOffset``, negative offsets)."""


class OffsetsJsonError(ConfigurationError):
    """Malformed offsets JSON; the message names the offending key and shows the expected shape."""


class UnknownTopicPartitionError(ConfigurationError):
    """A topic or partition that the cluster does not have."""


class SparkConnectNotSupportedError(ConfigurationError):
    """An RDD or DStream call got a Spark Connect session, which has no RDDs; the message names
    the DataFrame call to use instead."""


class SparkConnectUnreachableError(DStreamKafkaError, ConnectionError):
    """No Spark Connect server answers at the session's URL; the message names the URL and
    the fix."""


class MissingDependencyError(DStreamKafkaError, ImportError):
    """An optional extra (``pip install dstream_kafka[X]``) or a system tool is not installed."""


class KafkaReadError(DStreamKafkaError, RuntimeError):
    """An executor could not return exactly the requested offset range."""


class WrongOffsetError(KafkaReadError):
    """Kafka returned a record at another offset than the one requested."""


class FetchTimeoutError(KafkaReadError):
    """No record arrived within ``spark.streaming.kafka.consumer.poll.ms``."""


class KafkaWriteError(DStreamKafkaError, RuntimeError):
    """The Kafka output could not write a partition's records or commit its transaction."""


class OutputFencedError(KafkaWriteError):
    """An exactly-once write whose input range does not start at the group's committed offset
    (another run or driver already wrote it, or the offsets were moved)."""


class BrokerTimeoutError(DStreamKafkaError, TimeoutError):
    """Kafka did not answer a driver-side request (group coordinator, offsets) in time."""


class KafkaAuthenticationError(DStreamKafkaError, PermissionError):
    """The brokers refused the SASL credentials (wrong user name or password, unknown user)."""


class DataLossError(DStreamKafkaError, RuntimeError):
    """Offsets that should be read are gone from Kafka (retention, deletion, truncation)."""


class PartitionsRevokedError(DStreamKafkaError, RuntimeError):
    """Kafka revoked partitions from the driver consumer (another stream uses the group.id)."""


class OffsetCommitError(DStreamKafkaError, RuntimeError):
    """Committing offsets failed."""


class OffsetStoreError(DStreamKafkaError, RuntimeError):
    """An offset store could not load or save offsets."""


class OffsetFencedError(OffsetStoreError):
    """A commit whose ranges do not start where the stored offsets end (another driver won)."""


class CorruptCheckpointError(OffsetStoreError):
    """A checkpoint file is unreadable, truncated or of an unknown version."""


class RecordDecodeError(DStreamKafkaError, ValueError):
    """A record that a Schema Registry decoder cannot decode (bad framing, body or schema).

    The message names the topic, partition, offset and schema id; so do the attributes.
    """

    def __init__(self, message: str, topic: str | None = None, partition: int | None = None,
                 offset: int | None = None, schema_id: int | str | None = None) -> None:
        super().__init__(message)
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.schema_id = schema_id

    def __reduce__(self) -> tuple[Any, ...]:
        # keeps the attributes across the pickling between executors and the driver
        return (type(self), (str(self), self.topic, self.partition, self.offset, self.schema_id))


class UnknownSchemaError(RecordDecodeError):
    """A record whose schema id the Schema Registry does not know."""


class SchemaRegistryError(DStreamKafkaError, RuntimeError):
    """The Schema Registry could not be reached, refused the credentials or failed a request."""


class StreamingStateError(DStreamKafkaError, RuntimeError):
    """A StreamingContext or DStream used in a state that does not allow the call."""


class ReceiverStreamNotSupportedError(DStreamKafkaError, NotImplementedError):
    """``KafkaUtils.createStream`` (the 0-8 ZooKeeper receiver) has no equivalent; the message
    names ``createDirectStream``, which replaces it."""

