"""read/backends/kafka_python.py: an executor consumer that cannot reach its bootstrap servers."""

from __future__ import annotations

import pytest

from dstream_kafka.errors import BrokerTimeoutError


def test_an_executor_consumer_that_cannot_bootstrap_names_the_servers_and_its_bound() -> None:
    from dstream_kafka.read.backends.kafka_python import KafkaPythonBackend

    with pytest.raises(BrokerTimeoutError, match="127.0.0.1:1.*bootstrap.timeout.ms=1000"):
        KafkaPythonBackend("t", 0, {"bootstrap_servers": "127.0.0.1:1",
                                    "bootstrap_timeout_ms": 1000})
