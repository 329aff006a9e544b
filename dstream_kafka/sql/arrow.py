"""Structured Streaming's Kafka schema, and offset ranges read into Arrow record batches.

The executor side of :mod:`dstream_kafka.sql`: Spark ships :func:`range_batches`' function
to the Python workers of a ``mapInArrow`` stage, which import this module and the read path
under it (:func:`dstream_kafka.read.task.read_range`, the cached consumers, the backends);
never the driver side (:mod:`dstream_kafka.sql.frame`).

A range's records come from the same reader as a Kafka RDD's and are turned into columns a
block at a time: ``zip(*block)`` transposes the block's record tuples in C and each column
becomes one Arrow array, so no Python object is made per record or per value beyond those
the client library and the shared reader already make. The ``topic`` and ``partition``
columns are a range's constants, repeated by Arrow.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.read.task import RangeTask, ReadSettings, read_range

__all__ = [
    "INSTALL_HINT",
    "KAFKA_COLUMNS",
    "arrow_schema",
    "range_batches",
    "records_to_batch",
    "require_pyarrow",
    "spark_schema",
]

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install dstream_kafka[dataframe]"

#: Structured Streaming's Kafka source columns, in its order (``headers`` only with
#: ``includeHeaders``): Spark type names as ``StructType.simpleString`` spells them.
KAFKA_COLUMNS: tuple[tuple[str, str], ...] = (
    ("key", "binary"),
    ("value", "binary"),
    ("topic", "string"),
    ("partition", "int"),
    ("offset", "bigint"),
    ("timestamp", "timestamp"),
    ("timestampType", "int"),
)
HEADERS_COLUMN = ("headers", "array<struct<key:string,value:binary>>")


def require_pyarrow() -> Any:
    """Import and return ``pyarrow``, or raise :class:`MissingDependencyError` naming the extra."""
    try:
        import pyarrow
    except ImportError as exc:
        raise MissingDependencyError(
            f"Kafka DataFrames are decoded to Arrow and need the pyarrow package: {INSTALL_HINT}"
        ) from exc
    return pyarrow


def spark_schema(include_headers: bool = False) -> Any:
    """Return Structured Streaming's Kafka source schema as a pyspark ``StructType``.

    Every field is nullable, as Spark's. ``headers`` (an array of ``key``/``value`` structs)
    is the last column and only present with ``include_headers``.
    """
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(StructType([
            StructField("key", StringType()), StructField("value", BinaryType())]))))
    return StructType(fields)


def arrow_schema(include_headers: bool = False) -> Any:
    """Return the Arrow schema of :func:`spark_schema` (timestamps in UTC microseconds)."""
    pa = require_pyarrow()
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _headers_type(pa)))
    return pa.schema(fields)


def _headers_type(pa: Any) -> Any:
    return pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


def records_to_batch(
    topic: str, partition: int, records: Sequence[Any], include_headers: bool, schema: Any = None
) -> Any:
    """Return the records of one partition (``ConsumerRecord`` tuples) as one RecordBatch.

    ``timestamp`` is Kafka's milliseconds times 1000 (Spark timestamps are microseconds);
    ``headers`` is null, not an empty list, for a record without headers, as in Spark.
    """
    pa = require_pyarrow()
    import pyarrow.compute as pc

    schema = schema if schema is not None else arrow_schema(include_headers)
    n = len(records)
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=schema)
    # ConsumerRecord: topic, partition, offset, timestamp, timestampType, key, value, headers
    _, _, offsets, stamps, types, keys, values, headers = zip(*records)
    millis = pa.array(stamps, pa.int64())
    columns = [
        pa.array(keys, pa.binary()),
        pa.array(values, pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
        pa.array(types, pa.int32()),
    ]
    if include_headers:
        # An empty tuple (no headers) becomes null; tuples of (key, value) become structs.
        columns.append(pa.array([h or None for h in headers], _headers_type(pa)))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def range_batches(
    kafka_config: Mapping[str, Any], settings: ReadSettings, ranges: Sequence[RangeTask],
    include_headers: bool, batch_rows: int,
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """Return the ``mapInArrow`` function reading ranges into RecordBatches.

    Its input batches hold one ``id`` column of range indexes (``spark.range``, one per Spark
    partition); it yields the records of each range in offset order, at most ``batch_rows``
    per RecordBatch (``spark.sql.execution.arrow.maxRecordsPerBatch``; <= 0: one per range).
    With ``settings.failOnDataLoss`` false, records deleted from Kafka after planning are
    skipped and each lost range is logged as a warning by the executor.
    """
    tasks = list(ranges)
    limit = batch_rows if batch_rows > 0 else None

    def on_lost(lost: tuple[str, int, int, int]) -> None:
        topic, partition, start, until = lost
        log.warning("Records [%d, %d) of %s-%d are no longer in Kafka and were skipped "
                    "(failOnDataLoss is false)", start, until, topic, partition)

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        # Drain the input first: a Python worker whose input was not fully read is not reused,
        # and its cached consumers would go with it.
        indexes = [i for batch in batches for i in batch.column(0).to_pylist()]
        schema = arrow_schema(include_headers)
        for index in indexes:
            task = tasks[index]
            reader = read_range(task, kafka_config, settings, on_lost)
            try:
                while True:
                    block = list(itertools.islice(reader, limit))
                    if not block:
                        break
                    yield records_to_batch(task.topic, task.partition, block, include_headers,
                                           schema)
            finally:
                reader.close()  # gives the consumer back to the cache now

    return read
