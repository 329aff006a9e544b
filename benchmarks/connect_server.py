"""The ``*-connect`` contenders' session: a Spark Connect client of a local Connect server.

Each run starts its own server, as each classic run starts its own JVM: the tests'
:class:`tests.support.connect.ConnectServer` (``spark-submit`` of PySpark's own
``SparkConnectServer`` on ``local[2]``, Python workers on this interpreter with the checkout on
``PYTHONPATH``, so the executors import this dstream_kafka). The server is this process's child,
so the run's CPU and memory figures include it, as they include a classic run's JVM. It gets the
settings a classic run's SparkConf gets (1 GiB driver, the project's low-overhead settings, the
backend of a ``*-fast`` variant, the Kafka connector jars of an ``ss-*`` contender). Start-up,
the client's session and the same warm-up jobs as the classic twins' (a SQL job, a
``mapInArrow`` job that starts both Python workers) come before the timed region.
"""

from __future__ import annotations

from typing import Any

from benchmarks.contenders import FAST_BACKEND_CONF, is_fast

__all__ = ["connect_session"]

_BACKEND = "spark.streaming.kafka.consumer.backend"


def connect_session(spec: dict[str, Any], with_kafka_jars: bool) -> tuple[Any, Any, dict[str, Any]]:
    """Start a Connect server for ``spec``'s contender; return ``(server, session, info)``.

    The caller stops the session, then the server (:meth:`ConnectServer.stop` also removes its
    folder). The session ran :func:`warm_up_dataframes` (a SQL job, a ``mapInArrow`` job that
    starts both Python workers) before this returns, as the classic twins' sessions do.
    """
    from pyspark.sql import SparkSession

    from benchmarks.contenders.pyspark_contenders import warm_up_dataframes

    from tests.support.connect import ConnectServer

    conf = {"spark.driver.memory": "1g"}
    info: dict[str, Any] = {"session": "Spark Connect", "master": "local[2] via a Connect server"}
    jars: list[Any] = []
    if with_kafka_jars:
        from benchmarks.jars import sql_kafka_jars

        version, jars = sql_kafka_jars()
        info["connector"] = f"spark-sql-kafka-0-10_2.13:{version}"
    if is_fast(spec["contender"]):
        conf.update(FAST_BACKEND_CONF)
    server = ConnectServer(jars=jars, conf=conf).start()
    try:
        spark = SparkSession.builder.remote(server.url).getOrCreate()
        if is_fast(spec["contender"]):
            # read back from the client's session: what createDataFrame's reads will use
            info["backend"] = spark.conf.get(_BACKEND)
        warm_up_dataframes(spark)
    except BaseException:
        server.stop()
        raise
    return server, spark, info
