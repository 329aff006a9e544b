"""WHERE DATAFRAMES ARE BUILT: offset ranges as DataFrames in Structured Streaming's Kafka schema.

:meth:`~dstream_kafka.kafka_utils.KafkaUtils.createDataFrame`,
:meth:`~dstream_kafka.kafka_utils.KafkaUtils.createDataFrameFromOptions`,
:meth:`~dstream_kafka.read.kafka_rdd.KafkaRDD.toDF` and a direct stream's ``foreachBatch``
build their DataFrames here, on classic and Spark Connect sessions alike.

* :mod:`dstream_kafka.sql.frame`: the driver side (planned ranges, the session's settings,
  ``spark.range(...).mapInArrow(...)``) and :func:`offsetRanges` for a DataFrame built here;
* :mod:`dstream_kafka.sql.arrow`: the executor side (the schema, ranges read by the Kafka
  RDD's read path and decoded into Arrow record batches);
* :mod:`dstream_kafka.sql.stream`: :func:`createDataFrameStream`, a stream of DataFrames whose
  batch loop runs in the client (Spark Connect's stream, ``foreachBatch``).

Why ``mapInArrow`` and not the Python Data Source API: see :mod:`dstream_kafka.sql.frame`.
Needs pyarrow: ``pip install dstream_kafka[dataframe]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dstream_kafka.offsets import OffsetRange

if TYPE_CHECKING:
    from dstream_kafka.sql.stream import KafkaDataFrameStream, createDataFrameStream

__all__ = ["KafkaDataFrameStream", "createDataFrameStream", "lostOffsetRanges", "offsetRanges"]


def offsetRanges(df: Any) -> list[OffsetRange]:
    """Return the offset ranges a Kafka DataFrame reads; element ``i`` is Spark partition ``i``.

    ``df`` is a DataFrame as ``createDataFrame``, ``createDataFrameFromOptions``,
    ``KafkaRDD.toDF`` or ``foreachBatch`` hand it out (not one derived from it).

    Raises
    ------
    ConfigurationError
        For any other DataFrame.
    """
    from dstream_kafka.sql.frame import frame_info

    return list(frame_info(df).offsetRanges)


def lostOffsetRanges(df: Any) -> list[OffsetRange]:
    """Return the ranges already gone from Kafka when ``df`` was planned
    (``failOnDataLoss=false``); ranges executors find deleted while reading are logged there."""
    from dstream_kafka.sql.frame import frame_info

    return list(frame_info(df).lostOffsetRanges)



def __getattr__(name: str) -> Any:
    # Imported on first use: executors import this package for sql.arrow, and need none of
    # the stream's driver-side planning.
    if name in ("KafkaDataFrameStream", "createDataFrameStream"):
        from dstream_kafka.sql import stream

        return getattr(stream, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
