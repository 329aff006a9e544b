"""The PySpark internals behind ``dstream_kafka._spark_internals``, checked without a JVM.

Each test names the internal it needs, so an upgrade that moved one says which. Internals
that only exist on a running JVM are checked in ``tests/integration/test_spark_internals_jvm.py``.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys

import pytest

from dstream_kafka import _spark_internals as internals


def _source_of(qualified: str) -> str:
    module_name, _, name = qualified.rpartition(".")
    try:
        owner = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as e:  # pragma: no cover - only on a moved internal
        pytest.fail(f"PySpark internal {qualified} is gone: {e}")
    return inspect.getsource(owner)


def _require_assignment(qualified: str, attribute: str) -> None:
    # An instance or class attribute assigned somewhere in the class body.
    if not re.search(rf"\.{attribute}\s*(:[^=\n]*)?=[^=]", _source_of(qualified)):
        pytest.fail(f"PySpark internal {qualified.rsplit('.', 1)[-1]}.{attribute} is no longer "
                    f"set by {qualified}")


def test_every_accessor_names_its_internal() -> None:
    assert set(internals.INTERNALS) <= set(internals.__all__)
    assert all(callable(getattr(internals, name)) for name in internals.INTERNALS)


def test_pipelined_rdd_is_an_rdd_taking_prev_func_and_preserves_partitioning() -> None:
    from pyspark.core.rdd import RDD

    assert issubclass(internals.PipelinedRDD, RDD), "pyspark.core.rdd.PipelinedRDD moved"
    parameters = list(inspect.signature(internals.PipelinedRDD.__init__).parameters)
    assert parameters[1:4] == ["prev", "func", "preservesPartitioning"], (
        f"pyspark.core.rdd.PipelinedRDD.__init__ changed: {parameters}")


def test_rdd_is_built_from_a_jrdd_a_context_and_a_deserializer() -> None:
    from pyspark.core.rdd import RDD

    parameters = list(inspect.signature(RDD.__init__).parameters)
    assert parameters[1:4] == ["jrdd", "ctx", "jrdd_deserializer"], (
        f"pyspark.core.rdd.RDD.__init__ changed: {parameters}")


def test_rdd_keeps_its_jrdd_and_deserializer() -> None:
    _require_assignment("pyspark.core.rdd.RDD", "_jrdd")
    _require_assignment("pyspark.core.rdd.RDD", "_jrdd_deserializer")


@pytest.mark.parametrize("attribute", ["_jsc", "_jvm", "_conf", "pythonExec"])
def test_spark_context_keeps_its_jvm_handles(attribute: str) -> None:
    _require_assignment("pyspark.core.context.SparkContext", attribute)


def test_live_conf_and_active_context_accept_objects_that_are_not_contexts() -> None:
    conf = {"spark.app.name": "x"}
    assert internals.live_conf(conf) is conf
    assert not internals.is_active_context(conf)


def test_the_daemon_entry_point_is_pyspark_daemon_manager() -> None:
    daemon = importlib.import_module("pyspark.daemon")
    assert callable(getattr(daemon, "manager", None)), "pyspark.daemon.manager is gone"
    assert not inspect.signature(daemon.manager).parameters, "pyspark.daemon.manager takes arguments"


def test_the_worker_daemon_serves_unix_domain_sockets_from_pyspark_4_1_on() -> None:
    # The adapter's table says 4.0 has no Unix-socket path (its setting is ignored there).
    import pyspark
    from packaging.version import Version

    source = inspect.getsource(importlib.import_module("pyspark.daemon"))
    assert ("PYTHON_UNIX_DOMAIN_ENABLED" in source) == (Version(pyspark.__version__) >= Version("4.1"))


def test_the_runtime_daemon_module_is_the_one_spark_is_told_to_start() -> None:
    from dstream_kafka.spark_settings import LOW_OVERHEAD_SETTINGS

    module = LOW_OVERHEAD_SETTINGS["spark.python.daemon.module"]
    assert module == "dstream_kafka.daemon"
    assert importlib.util.find_spec(module) is not None


def test_worker_python_imports_is_cached_and_answers_for_this_interpreter() -> None:
    internals.worker_python_imports.cache_clear()
    assert internals.worker_python_imports(sys.executable, "dstream_kafka")
    assert internals.worker_python_imports(sys.executable, "dstream_kafka")
    assert internals.worker_python_imports.cache_info().hits == 1
    assert not internals.worker_python_imports("/nonexistent/python3", "dstream_kafka")


def test_portable_hash_is_pysparks_partitioning_hash() -> None:
    rdd_module = importlib.import_module("pyspark.rdd")
    assert getattr(rdd_module, "portable_hash", None) is internals.portable_hash, (
        "pyspark.rdd.portable_hash is not pyspark.core.rdd.portable_hash any more")


def test_the_active_context_is_a_class_attribute_of_spark_context() -> None:
    from pyspark import SparkContext

    assert hasattr(SparkContext, "_active_spark_context"), (
        "PySpark internal SparkContext._active_spark_context is gone")


def test_the_gateway_launcher_takes_a_conf_and_popen_keyword_arguments() -> None:
    from pyspark.java_gateway import launch_gateway

    assert list(inspect.signature(launch_gateway).parameters)[:2] == ["conf", "popen_kwargs"]
    assert "popen_kwargs" in _source_of("pyspark.java_gateway.launch_gateway").split("Popen(", 1)[1]
