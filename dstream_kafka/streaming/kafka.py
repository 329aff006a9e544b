"""The porting path of PySpark 2.4's ``pyspark.streaming.kafka``: the code lives in
:mod:`dstream_kafka.compat.pyspark_kafka`, the engine does not depend on it."""

from dstream_kafka.compat.pyspark_kafka import *  # noqa: F401,F403
from dstream_kafka.compat.pyspark_kafka import __all__ as __all__  # noqa: F401
