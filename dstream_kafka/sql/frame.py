"""Driver side of Kafka DataFrames: offset ranges planned here, read by ``mapInArrow``.

A DataFrame of ``n`` ranges is ``spark.range(0, n, 1, n)`` (one row, the range's index, per
Spark partition) mapped with ``mapInArrow`` through
:func:`~dstream_kafka.sql.arrow.range_batches`, whose closure carries the ranges, the
executor consumer settings and the :class:`~dstream_kafka.read.task.ReadSettings`. Both
exist on classic and Spark Connect sessions, and the ranges stay exactly those this driver
code planned. The Python Data Source API was weighed and not used: its reader is
instantiated from options on the server, so ranges planned by the client would travel as
option strings and be planned again there, its planning methods run in a process the
server's driver starts (Kafka clients and the offset stores must be reachable from there),
and a source must be registered per session first.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from dstream_kafka._spark_internals import live_conf
from dstream_kafka.client.configs import ClientConfigs
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.read.settings import read_settings
from dstream_kafka.read.task import RangeTask, ReadSettings
from dstream_kafka.sql.arrow import range_batches, require_pyarrow, spark_schema
from dstream_kafka.spark_connect import check_connect_server, is_connect_session

__all__ = [
    "FrameInfo",
    "build_dataframe",
    "frame_info",
    "session_conf",
]

log = logging.getLogger(__name__)

#: The :class:`FrameInfo` of each DataFrame built here, while it lives.
_infos: weakref.WeakKeyDictionary[Any, FrameInfo] = weakref.WeakKeyDictionary()
_ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


class FrameInfo(NamedTuple):
    """What a Kafka DataFrame was planned from.

    Attributes
    ----------
    offsetRanges : list of OffsetRange
        Element ``i`` is read by Spark partition ``i``.
    lostOffsetRanges : list of OffsetRange
        Ranges already gone from Kafka when the DataFrame was planned (``failOnDataLoss=false``).
    """

    offsetRanges: list[OffsetRange]
    lostOffsetRanges: list[OffsetRange]


def check_session(spark: Any) -> None:
    """Refuse anything but a classic or Spark Connect ``SparkSession``, and a Connect session
    whose server does not answer (:func:`~dstream_kafka.spark_connect.check_connect_server`)."""
    from pyspark.sql import SparkSession

    if is_connect_session(spark):
        check_connect_server(spark)
        return
    if isinstance(spark, SparkSession):
        return
    raise ConfigurationError(
        f"spark must be a SparkSession (classic or Spark Connect), got {type(spark).__name__}; "
        "use SparkSession.builder.getOrCreate()"
    )


def session_conf(spark: Any) -> Any:
    """Return what the read settings are read from: the live SparkConf of a classic session
    (as a Kafka RDD reads it), else a snapshot of the Connect session's configuration."""
    if is_connect_session(spark):
        return dict(spark.conf.getAll)  # one round trip, not one per key
    return live_conf(spark.sparkContext)


def _batch_rows(spark: Any, conf: Any) -> int:
    value = conf.get(_ARROW_BATCH, None) if isinstance(conf, dict) else None
    if value is None:
        value = spark.conf.get(_ARROW_BATCH, "10000")
    try:
        return int(value)
    except ValueError:
        raise ConfigurationError(
            f"{_ARROW_BATCH} must be a whole number, got {value!r}") from None


def build_dataframe(
    spark: Any,
    configs: ClientConfigs | Mapping[str, Any],
    ranges: Sequence[OffsetRange],
    include_headers: bool = False,
    settings: ReadSettings | None = None,
    lost: Sequence[OffsetRange] = (),
) -> Any:
    """Return the DataFrame reading ``ranges`` (validated by the caller), one partition each.

    ``configs`` are the Kafka parameters translated (or only their executor settings, from
    :func:`~dstream_kafka.client.kafka_params.fix_kafka_params`). ``settings`` defaults to
    :func:`~dstream_kafka.read.settings.read_settings` of the session's configuration with
    the consumer cache on. Reads skip offsets without a record
    (compaction, transaction markers, aborted records under ``read_committed``), as
    Structured Streaming's Kafka source does.
    """
    require_pyarrow()
    conf = session_conf(spark)
    if settings is None:
        settings = read_settings(conf, configs, use_cache=True)
    settings = settings._replace(strict=False)
    schema = spark_schema(include_headers)
    ranges = list(ranges)
    if not ranges:
        frame = spark.createDataFrame([], schema)
    else:
        tasks = [RangeTask(i, r.topic, r.partition, r.fromOffset, r.untilOffset)
                 for i, r in enumerate(ranges)]
        executor = configs.executor if isinstance(configs, ClientConfigs) else configs
        read = range_batches(dict(executor), settings, tasks, include_headers,
                             _batch_rows(spark, conf))
        frame = spark.range(0, len(ranges), 1, len(ranges)).mapInArrow(read, schema)
    _infos[frame] = FrameInfo(ranges, list(lost))
    return frame


def frame_info(df: Any) -> FrameInfo:
    """Return the :class:`FrameInfo` of a DataFrame built by dstream_kafka.

    Raises
    ------
    ConfigurationError
        For another DataFrame, including one derived from it (a transformation returns a
        new DataFrame, which knows nothing of the ranges).
    """
    try:
        info = _infos.get(df)
    except TypeError:  # not weakly referable: not one of ours
        info = None
    if info is None:
        raise ConfigurationError(
            f"this {type(df).__name__} was not built by KafkaUtils.createDataFrame, "
            "createDataFrameFromOptions, KafkaRDD.toDF or foreachBatch; ask the DataFrame they "
            "return, before transforming it, for its offset ranges"
        )
    return info


def check_raw_bytes(configs: ClientConfigs | Mapping[str, Any]) -> None:
    """Refuse key/value deserializers: the schema's key and value are binary, as in Spark."""
    executor = configs.executor if isinstance(configs, ClientConfigs) else configs
    for field in ("key", "value"):
        if executor.get(f"{field}_deserializer") is not None:
            raise ConfigurationError(
                f"Kafka DataFrames have binary key and value columns, so {field}.deserializer "
                "is not supported (as in Structured Streaming's Kafka source): leave it out or "
                f"set ByteArrayDeserializer, and decode with DataFrame operations such as "
                f"CAST({field} AS STRING)"
            )


def offset_ranges_argument(offsetRanges: Any) -> list[OffsetRange]:
    """Check ``offsetRanges`` is a list of OffsetRange and return a copy."""
    if isinstance(offsetRanges, (str, bytes)) or not isinstance(offsetRanges, Sequence):
        raise ConfigurationError(
            f"offsetRanges must be a list of OffsetRange, got {type(offsetRanges).__name__}"
        )
    ranges = list(offsetRanges)
    for r in ranges:
        if not isinstance(r, OffsetRange):
            raise ConfigurationError(
                f"offsetRanges must hold OffsetRange objects, got {r!r}; build them with "
                "OffsetRange.create(topic, partition, fromOffset, untilOffset)"
            )
    return ranges
