"""The crash harness's kafka-eos mode: Kafka to Kafka through an exactly-once KafkaOutput."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests.crash` from any working directory

from tests.crash.campaign import parse_args, table  # noqa: E402
from tests.crash.harness import POINTS, STORES, TrialResult, TrialSpec  # noqa: E402


def test_kafka_eos_is_a_crash_tested_mode_with_the_common_crash_points() -> None:
    assert "kafka-eos" in STORES
    assert POINTS["kafka-eos"] == ("before-output", "mid-output", "after-output", "after-commit")


def test_a_kafka_eos_trial_fails_on_any_duplicate_as_a_transactional_store_does() -> None:
    assert TrialResult(TrialSpec("kafka-eos", 1)).ok
    assert not TrialResult(TrialSpec("kafka-eos", 1), duplicated=1).ok
    assert not TrialResult(TrialSpec("kafka-eos", 1), lost=1).ok


def test_the_campaign_table_counts_no_allowed_replays_for_kafka_eos() -> None:
    lines = table([TrialResult(TrialSpec("kafka-eos", 1), duplicated=2)], ["kafka-eos"]).splitlines()
    row = lines[2].split()
    assert row[0] == "kafka-eos" and row[5] == "2" and row[6] == "-" and row[-1] == "1"


def test_the_campaign_takes_the_backend_of_its_drivers() -> None:
    assert parse_args(["--stores", "kafka-eos", "--backend", "confluent-kafka"]).backend == \
        "confluent-kafka"
