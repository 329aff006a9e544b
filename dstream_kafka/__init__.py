"""dstream_kafka: Kafka direct streams for PySpark on RDDs, with precise offset control."""

from __future__ import annotations

from dstream_kafka import errors
from dstream_kafka.errors import DStreamKafkaError

__version__ = "0.1.0"

__all__ = ["DStreamKafkaError", "errors", "__version__"]
