"""KafkaUtils refuses a local master whose Python workers cannot import dstream_kafka."""

from __future__ import annotations

import sys
from typing import Any

import pytest

from dstream_kafka import _spark_internals
from dstream_kafka.errors import ConfigurationError
from dstream_kafka.kafka_utils import _check_worker_python


class _ContextLike:
    def __init__(self, master: str, python: str, conf: dict[str, str] | None = None) -> None:
        self.master = master
        self.pythonExec = python
        self._conf = conf or {}


def test_workers_on_the_drivers_interpreter_pass_without_a_probe(monkeypatch: Any) -> None:
    _spark_internals.worker_python_imports.cache_clear()
    _check_worker_python(_ContextLike("local[2]", sys.executable))
    assert _spark_internals.worker_python_imports.cache_info().currsize == 0


def test_a_local_worker_python_without_dstream_kafka_is_refused_naming_pyspark_python() -> None:
    with pytest.raises(ConfigurationError, match="PYSPARK_PYTHON=") as info:
        _check_worker_python(_ContextLike("local[2]", "/nonexistent/python3"))
    assert "/nonexistent/python3" in str(info.value) and sys.executable in str(info.value)


def test_spark_pyspark_python_set_on_a_context_does_not_hide_a_worker_python_without_the_package(
) -> None:
    # PySpark starts workers with sc.pythonExec (PYSPARK_PYTHON at creation); a builder's
    # spark.pyspark.python does not reach them under `python app.py`
    conf = {"spark.pyspark.python": sys.executable}
    with pytest.raises(ConfigurationError, match="/nonexistent/python3"):
        _check_worker_python(_ContextLike("local[2]", "/nonexistent/python3", conf))


def test_masters_that_are_not_local_are_not_probed() -> None:
    _check_worker_python(_ContextLike("spark://10.0.0.1:7077", "/nonexistent/python3"))
