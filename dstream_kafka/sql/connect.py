"""Spark Connect sessions: recognised, and refused with the DataFrame alternative where RDDs are needed.

A Spark Connect client has no SparkContext, no RDDs and no JVM; PySpark itself answers
``spark.sparkContext`` with ``JVM_ATTRIBUTE_NOT_SUPPORTED``. The calls of dstream_kafka that
need them check here first, so a Connect session handed to them fails at once with
:class:`~dstream_kafka.errors.SparkConnectNotSupportedError` naming what to call instead.
"""

from __future__ import annotations

from typing import Any

from dstream_kafka.errors import SparkConnectNotSupportedError

__all__ = ["is_connect_session", "refuse_connect"]


def is_connect_session(spark: Any) -> bool:
    """Return True for a Spark Connect ``SparkSession`` (its class lives in pyspark.sql.connect).

    Decided by the class's module, so nothing is imported (Connect's client needs grpcio).
    """
    return type(spark).__module__.startswith("pyspark.sql.connect")


def refuse_connect(obj: Any, call: str, instead: str) -> None:
    """Raise :class:`SparkConnectNotSupportedError` when ``obj`` is a Spark Connect session.

    ``call`` names what was called; ``instead`` the DataFrame call to use.
    """
    if is_connect_session(obj):
        raise SparkConnectNotSupportedError(
            f"{call} needs a classic SparkContext, and a Spark Connect session has none: Spark "
            f"Connect has no RDDs. Use {instead}, which works on Spark Connect")
