"""At DEBUG (and below), what kafka-python logs while our clients run on a SASL listener never
holds the password: its admin client's configuration dump included."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any, Callable

import pytest

from dstream_kafka import KafkaUtils, LocationStrategies, OffsetRange
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.client.param_checks import REDACTED
from dstream_kafka.stores import OffsetStores


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(1)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def all_logs(caplog: pytest.LogCaptureFixture) -> Iterator[tuple[_Lines, pytest.LogCaptureFixture]]:
    """Every record of kafka-python and dstream_kafka, down to kafka-python's trace level,
    through caplog and through a handler of the root logger."""
    root_handler = _Lines()
    root_handler.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s %(args)s"))
    loggers = [logging.getLogger(n) for n in ("kafka", "dstream_kafka")]
    logging.getLogger().addHandler(root_handler)
    for lg in loggers:
        caplog.set_level(1, logger=lg.name)
    try:
        yield root_handler, caplog
    finally:
        logging.getLogger().removeHandler(root_handler)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_no_debug_log_line_of_our_sasl_clients_holds_the_password(
        secured_kafka: Any, sc: Any, unique: Callable[[str], str], mechanism: str,
        all_logs: tuple[_Lines, pytest.LogCaptureFixture]) -> None:
    root_handler, caplog = all_logs
    password = secured_kafka.security.users["alice"]
    topic, group = unique("t"), unique("g")
    secured_kafka.create_topic(topic, partitions=1)
    secured_kafka.produce(topic, [b"a", b"b"], partition=0)
    params = {**secured_kafka.client_params("SASL_PLAINTEXT", mechanism=mechanism),
              "bootstrap.servers": secured_kafka.bootstrap_servers_for("SASL_PLAINTEXT"),
              "group.id": group}
    store = OffsetStores.kafka(params)  # a consumer to commit, an admin client to read back
    try:
        store.commit(group, 1000, [OffsetRange(topic, 0, 0, 1)])
        assert store.load(group, [topic]) == {TopicPartition(topic, 0): 1}
    finally:
        store.close()
    rdd = KafkaUtils.createRDD(sc, params, [OffsetRange(topic, 0, 0, 2)],
                               LocationStrategies.PreferConsistent)
    assert rdd.count() == 2

    dumps = [r.getMessage() for r in caplog.records
             if "Starting KafkaAdminClient" in r.getMessage()]
    assert dumps and all(f"'sasl_plain_password': {REDACTED}" in d for d in dumps)
    assert password not in caplog.text
    assert not [line for line in root_handler.lines if password in line]
