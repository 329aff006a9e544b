"""The local services' errors, outside the library's exception tree.

Only the services the ``dstream-kafka`` command (and the test suite) starts raise these: a
stream, a store or a read never does, so a program catching
:class:`~dstream_kafka.errors.DStreamKafkaError` meets none of them.
"""

from __future__ import annotations

__all__ = ["ServiceAlreadyRunningError", "ServiceError"]


class ServiceError(RuntimeError):
    """A local service (Kafka broker, HBase, PostgreSQL, ZooKeeper, Spark cluster) failed."""


class ServiceAlreadyRunningError(ServiceError):
    """A service was started while another instance of it is running."""
