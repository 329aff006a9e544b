"""Kafka's own exactly-once system test on three brokers, with the confluent-kafka backend.

The same copy as test_kafka_output_eos_system.py (kafka-python), whose docstring says more.

See :mod:`tests.crash.copier`: 100,000 records, 2 input and 3 output partitions, replication 3
with ``min.insync.replicas=2``; a hard broker bounce when the group has committed 20% of the
input, a driver kill at 45%, both at 70%; a ``read_committed`` reader of the output must see no
duplicate, nothing missing, and, per output partition, the records of each input partition in
input-offset order. The many seeded trials are the campaign's: ``python -m tests.crash.copier``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests.crash` from any working directory

from tests.crash.copier import run_copy  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.slow]

# One file per backend: each copy takes minutes, and with --dist loadfile two files can run on
# the two workers at once (tests/support/file_share.py)
BACKEND = "confluent-kafka"


def test_an_exactly_once_copy_through_broker_bounces_and_driver_kills_writes_each_record_once_in_order(  # noqa: E501
        kafka3: Any, tmp_path: Path) -> None:
    result = run_copy(kafka3, BACKEND, tmp_path / "copy")
    assert result.kills == 2 and result.bounces == 2, result.describe()
    assert (result.lost, result.duplicated, result.order) == (0, 0, 0), result.describe()
    assert result.ok, result.describe()
