"""The PySpark/py4j internals behind ``dstream_kafka._spark_internals`` on a running JVM.

One test per accessor: a failure names the internal the installed PySpark moved.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest

from dstream_kafka import _spark_internals as internals

pytestmark = pytest.mark.integration


def test_executor_list_reads_the_status_store(sc: Any) -> None:
    found = internals.executor_list(sc)
    assert ("driver" in [executor_id for _, executor_id in found]), (
        f"{internals.INTERNALS['executor_list']} gave {found}")


def test_located_source_places_each_element_in_its_own_partition(sc: Any) -> None:
    jrdd = internals.located_source(sc, [(0, "t", 0), (1, "t", 1)], ["host-a", None])
    rdd = internals.python_rdd(jrdd, sc)
    assert rdd.glom().collect() == [[(0, "t", 0)], [(1, "t", 1)]]
    assert internals.source_preferred_locations(jrdd, 0) == ["host-a"]
    assert internals.source_preferred_locations(jrdd, 1) == []
    assert internals.python_rdd(internals.located_source(sc, [], []), sc).isEmpty()


def test_detached_rdd_reads_the_same_jvm_rdd(sc: Any) -> None:
    rdd = sc.parallelize([1, 2, 3], 2)
    assert internals.detached_rdd(rdd).collect() == [1, 2, 3]


def test_live_conf_is_the_contexts_spark_conf(sc: Any) -> None:
    from pyspark import SparkConf

    assert isinstance(internals.live_conf(sc), SparkConf)
    assert internals.live_conf(sc).get("spark.app.name") == sc.appName


def test_an_active_context_is_recognised_and_not_stopped(sc: Any) -> None:
    assert internals.is_active_context(sc)
    assert not internals.context_stopped(sc)


def test_hadoop_filesystem_reads_and_lists_a_local_file(sc: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "f.bin")
        with open(path, "wb") as f:
            f.write(b"\x00payload")
        jpath, fs = internals.hadoop_filesystem(sc, "file://" + path)
        assert fs.exists(jpath)
        stream = fs.open(jpath)
        try:
            assert internals.read_stream_bytes(sc, stream) == b"\x00payload"
        finally:
            stream.close()
    assert internals.default_filesystem(sc).startswith("file:")


def test_worker_python_is_the_interpreter_spark_starts_workers_with(sc: Any) -> None:
    assert os.path.exists(internals.worker_python(sc))


def test_active_context_is_the_running_context(sc: Any) -> None:
    assert internals.active_context() is sc


def test_hadoop_path_class_builds_paths(sc: Any) -> None:
    assert str(internals.hadoop_path_class(sc)("file:///tmp/x").getName()) == "x"
