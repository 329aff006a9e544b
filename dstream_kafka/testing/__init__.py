"""Test support: private PostgreSQL, ZooKeeper and Spark standalone servers on loopback.

These servers exist for tests, benchmarks and the crash campaign, in the way ``structlog.testing``
serves structlog's users' tests; no reading, streaming or offset-store code imports them. Each
listens on 127.0.0.1 on free ports and keeps its files in its own temporary folder, which
``stop()`` removes.

Modules
-------
postgres
    :class:`~dstream_kafka.testing.postgres.PostgresServer`, a private PostgreSQL cluster.
zookeeper
    :class:`~dstream_kafka.testing.zookeeper.ZooKeeperServer`, a standalone ZooKeeper.
spark_cluster
    :class:`~dstream_kafka.testing.spark_cluster.SparkStandaloneCluster`, a Spark standalone
    master with workers, and :func:`~dstream_kafka.testing.spark_cluster.wait_for_executors`.
"""
