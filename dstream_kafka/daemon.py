"""PySpark worker daemon that freezes import-time objects before forking workers.

PySpark's daemon runs ``gc.collect()`` after every reused task; freezing what the daemon
imported (pyspark, kafka-python, dstream_kafka) into the permanent generation keeps that
collection short. Selected with ``spark.python.daemon.module=dstream_kafka.daemon``; it runs
on executors, so it is part of the runtime package.
"""

import gc

import pyspark.worker  # noqa: F401  imported once here so every forked worker inherits it

try:  # warm the read path too; a worker without kafka-python still starts
    import kafka  # noqa: F401

    import dstream_kafka  # noqa: F401
except ImportError:  # pragma: no cover
    pass

from dstream_kafka._spark_internals import run_daemon  # noqa: E402

gc.freeze()

if __name__ == "__main__":
    run_daemon()
