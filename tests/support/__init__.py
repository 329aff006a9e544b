"""Test support: private PostgreSQL, ZooKeeper and Spark standalone servers on loopback.

These servers exist for tests, benchmarks and the crash campaign, in the way ``structlog.testing``
serves structlog's users' tests; no reading, streaming or offset-store code imports them. Each
listens on 127.0.0.1 on free ports and keeps its files in its own temporary folder, which
``stop()`` removes.

Modules
-------
postgres
    :class:`~tests.support.postgres.PostgresServer`, a private PostgreSQL cluster.
zookeeper
    :class:`~tests.support.zookeeper.ZooKeeperServer`, a standalone ZooKeeper.
spark_cluster
    :class:`~tests.support.spark_cluster.SparkStandaloneCluster`, a Spark standalone
    master with workers, and :func:`~tests.support.spark_cluster.wait_for_executors`.
"""
