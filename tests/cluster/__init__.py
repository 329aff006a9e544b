"""Cluster tests' driver program (:mod:`tests.cluster.driver`), run in its own process.

A Python process holds one SparkContext and the test session's is on ``local[2]``; scenarios
on the standalone cluster (``tests.support.spark_cluster``) therefore run as separate
driver processes. ``tests/integration/test_cluster.py`` starts them and checks what they print.
Nothing here is named ``test_*``.
"""
