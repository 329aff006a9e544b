"""An out-of-range read whose log bounds cannot be read keeps the reason in the debug log."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from dstream_kafka.errors import KafkaReadError
from dstream_kafka.read import internal_consumer
from dstream_kafka.read.backends import OffsetOutOfRange
from dstream_kafka.read.internal_consumer import CacheKey, InternalKafkaConsumer


class _OutOfRangeBackend:
    """Every fetch is out of range; the log bounds cannot be read."""

    offset_of = staticmethod(lambda item: item)
    to_record = staticmethod(lambda item: item)

    def seek(self, offset: int) -> None:
        pass

    def fetch(self, timeout_ms: int, max_records: int | None = None) -> list[Any]:
        raise OffsetOutOfRange()

    def watermarks(self, timeout_ms: int) -> tuple[int, int]:
        raise PermissionError("SASL authentication failed for user reader")

    def close(self) -> None:
        pass


def test_an_out_of_range_read_whose_watermarks_fail_logs_why_at_debug(monkeypatch, caplog):
    monkeypatch.setattr(internal_consumer, "create_backend", lambda *args: _OutOfRangeBackend())
    consumer = InternalKafkaConsumer(CacheKey("spark-executor-g", "t", 0), {})
    with caplog.at_level(logging.DEBUG, logger=internal_consumer.__name__), \
            pytest.raises(KafkaReadError, match=r"the log holds \[None, None\)"):
        list(consumer.iter_range(5, 10, 1000))
    causes = [r.exc_info[1] for r in caplog.records if r.exc_info]
    assert any(isinstance(c, PermissionError) and "SASL authentication" in str(c) for c in causes)
