"""The Arrow side of Kafka DataFrames: records to RecordBatches, the schema, the pyarrow extra."""

from __future__ import annotations

import inspect
import sys

import pytest

from dstream_kafka.errors import ConfigurationError, MissingDependencyError
from dstream_kafka.record import ConsumerRecord
from dstream_kafka.sql import offsetRanges
from dstream_kafka.sql.arrow import arrow_schema, records_to_batch, require_pyarrow, spark_schema

pa = pytest.importorskip("pyarrow")

RECORDS = [
    ConsumerRecord("t", 3, 10, 1700000000123, 0, b"k", b"v", ()),
    ConsumerRecord("t", 3, 11, 1700000000456, 1, None, None, (("h", b"x"), ("h", b""))),
]


def test_timestamps_become_utc_microseconds_and_types_stay_javas_ids():
    batch = records_to_batch("t", 3, RECORDS, include_headers=False)
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [1700000000123000,
                                                                      1700000000456000]
    assert batch.column("timestampType").to_pylist() == [0, 1]


def test_topic_and_partition_come_from_the_range_for_every_row():
    batch = records_to_batch("t", 3, RECORDS, include_headers=False)
    assert (batch.column("topic").to_pylist(), batch.column("partition").to_pylist()) == (
        ["t", "t"], [3, 3])


def test_null_keys_and_values_stay_null():
    batch = records_to_batch("t", 3, RECORDS, include_headers=False)
    assert (batch.column("key").to_pylist(), batch.column("value").to_pylist()) == (
        [b"k", None], [b"v", None])


def test_headers_are_null_for_a_record_without_any_and_keep_log_order():
    batch = records_to_batch("t", 3, RECORDS, include_headers=True)
    assert batch.column("headers").to_pylist() == [
        None, [{"key": "h", "value": b"x"}, {"key": "h", "value": b""}]]


def test_the_arrow_schema_is_pysparks_arrow_type_of_the_spark_schema():
    from pyspark.sql.pandas.types import to_arrow_schema

    # PySpark 4.0 names UTC timestamps timestamp_utc=True (its default); 4.1 on, timezone="UTC"
    utc = {"timezone": "UTC"} if "timezone" in inspect.signature(to_arrow_schema).parameters else {}
    for headers in (False, True):
        ours = arrow_schema(headers)
        theirs = to_arrow_schema(spark_schema(headers), **utc)
        assert ours.equals(theirs), (ours, theirs)


def test_without_pyarrow_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(MissingDependencyError, match=r"dstream_kafka\[dataframe\]"):
        require_pyarrow()


def test_without_pyarrow_create_dataframe_fails_before_anything_else(monkeypatch):
    from dstream_kafka import KafkaUtils

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(MissingDependencyError, match=r"dstream_kafka\[dataframe\]"):
        KafkaUtils.createDataFrame(object(), {"bootstrap.servers": "127.0.0.1:9"}, [])


def test_another_dataframe_has_no_offset_ranges():
    with pytest.raises(ConfigurationError, match="not built by KafkaUtils.createDataFrame"):
        offsetRanges(object())


def _connect_like() -> object:
    cls = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})
    return cls()


def test_a_connect_session_is_refused_by_rdd_calls_naming_the_dataframe_call():
    from dstream_kafka import KafkaUtils
    from dstream_kafka.errors import SparkConnectNotSupportedError

    with pytest.raises(SparkConnectNotSupportedError,
                       match=r"KafkaUtils.createRDD needs a classic SparkContext.*createDataFrame"):
        KafkaUtils.createRDD(_connect_like(), {"bootstrap.servers": "127.0.0.1:9"}, [])
