"""Kafka's own exactly-once system test on three brokers, with the confluent-kafka backend.

The same copy as test_kafka_output_eos_system.py (kafka-python), whose docstring describes the
scenario; both run tests.crash.copier.assert_copied_exactly_once.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests.crash` from any working directory

from tests.crash.copier import assert_copied_exactly_once  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.slow]

# One file per backend: each copy takes minutes, and with --dist loadfile two files can run on
# the two workers at once (tests/support/file_share.py)
BACKEND = "confluent-kafka"


def test_an_exactly_once_copy_through_broker_bounces_and_driver_kills_writes_each_record_once_in_order(  # noqa: E501
        kafka3: Any, tmp_path: Path) -> None:
    assert_copied_exactly_once(kafka3, BACKEND, tmp_path / "copy")
