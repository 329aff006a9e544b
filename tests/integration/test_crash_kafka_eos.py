"""Crash test of Kafka to Kafka exactly-once: a driver killed inside a partition's transaction.

One trial per backend (:mod:`tests.crash.harness`, mode ``kafka-eos``): the driver reads the
input with a direct stream and writes one record per input record through an exactly-once
``KafkaOutput``; its first run dies (driver, JVM and Python workers) from a Python worker
half-way through a partition's transaction of its first batch with records, its second at a
seeded random moment, and the last run finishes. A ``read_committed`` reader of the output must
then see every input record exactly once, and the group's offsets must be the input's end.
The many seeded trials are the campaign's: ``python -m tests.crash.campaign --stores kafka-eos``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests.crash` from any working directory

from tests.crash.harness import Services, TrialSpec, run_trial  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("backend_name", ["kafka-python", "confluent-kafka"])
def test_kafka_to_kafka_exactly_once_writes_every_record_once_across_kills(
        kafka: Any, backend_name: str, tmp_path: Path) -> None:
    spec = TrialSpec("kafka-eos", "ci-1", records=600, plans=("mid-output:1", "random"),
                     backend=backend_name)
    result = run_trial(Services(kafka), spec, tmp_path / "trial")
    assert result.kills >= 1 and not result.errors, result.describe()
    assert (result.lost, result.duplicated) == (0, 0), result.describe()
