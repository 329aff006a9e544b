"""The PySpark/py4j internals behind ``dstream_kafka._spark_internals`` on a running JVM.

One test per accessor: a failure names the internal the installed PySpark moved.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any

import pyspark
import pytest

from dstream_kafka import _spark_internals as internals

# smoke: .ci/compat checks every accessor on the oldest and the newest supported PySpark
pytestmark = [pytest.mark.integration, pytest.mark.smoke]


@contextlib.contextmanager
def _internal(accessor: str) -> Iterator[None]:
    try:
        yield
    except Exception as error:  # an assertion or a py4j error alike: name the internal
        pytest.fail(f"PySpark internal {internals.INTERNALS[accessor]} does not work on "
                    f"PySpark {pyspark.__version__}: {error!r}")


def test_executor_list_reads_the_status_store(sc: Any) -> None:
    with _internal("executor_list"):
        assert "driver" in [executor_id for _, executor_id in internals.executor_list(sc)]


def test_located_source_places_each_element_in_its_own_partition(sc: Any) -> None:
    with _internal("located_source"):
        jrdd = internals.located_source(sc, [(0, "t", 0), (1, "t", 1)], ["host-a", None])
        assert internals.python_rdd(internals.located_source(sc, [], []), sc).isEmpty()
    with _internal("python_rdd"):
        assert internals.python_rdd(jrdd, sc).glom().collect() == [[(0, "t", 0)], [(1, "t", 1)]]
    with _internal("source_preferred_locations"):
        assert internals.source_preferred_locations(jrdd, 0) == ["host-a"]
        assert internals.source_preferred_locations(jrdd, 1) == []


def test_detached_rdd_reads_the_same_jvm_rdd(sc: Any) -> None:
    with _internal("detached_rdd"):
        assert internals.detached_rdd(sc.parallelize([1, 2, 3], 2)).collect() == [1, 2, 3]


def test_live_conf_is_the_contexts_spark_conf(sc: Any) -> None:
    from pyspark import SparkConf

    with _internal("live_conf"):
        assert isinstance(internals.live_conf(sc), SparkConf)
        assert internals.live_conf(sc).get("spark.app.name") == sc.appName


def test_an_active_context_is_recognised_and_not_stopped(sc: Any) -> None:
    with _internal("is_active_context"):
        assert internals.is_active_context(sc)
    with _internal("context_stopped"):
        assert not internals.context_stopped(sc)


def test_active_context_is_the_running_context(sc: Any) -> None:
    with _internal("active_context"):
        assert internals.active_context() is sc


def test_hadoop_path_class_builds_paths(sc: Any) -> None:
    with _internal("hadoop_path_class"):
        assert str(internals.hadoop_path_class(sc)("file:///tmp/x").getName()) == "x"


def test_hadoop_filesystem_reads_a_local_file(sc: Any) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "f.bin")
        with open(path, "wb") as f:
            f.write(b"\x00payload")
        with _internal("hadoop_filesystem"):
            jpath, fs = internals.hadoop_filesystem(sc, "file://" + path)
            assert fs.exists(jpath)
        with _internal("read_stream_bytes"):
            stream = fs.open(jpath)
            try:
                assert internals.read_stream_bytes(sc, stream) == b"\x00payload"
            finally:
                stream.close()


def test_default_filesystem_is_local_in_local_mode(sc: Any) -> None:
    with _internal("default_filesystem"):
        assert internals.default_filesystem(sc).startswith("file:")


def test_worker_python_is_the_interpreter_spark_starts_workers_with(sc: Any) -> None:
    with _internal("worker_python"):
        assert os.path.exists(internals.worker_python(sc))
