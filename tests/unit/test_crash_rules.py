"""The crash harness's counting rules per store (no services: the verdict of a counted trial)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests.crash` from any working directory

from tests.crash.campaign import table  # noqa: E402
from tests.crash.harness import STORES, POINTS, TrialResult, TrialSpec  # noqa: E402


def test_the_hbase_store_is_a_crash_tested_store_with_the_common_crash_points() -> None:
    assert "hbase" in STORES
    assert POINTS["hbase"] == ("before-output", "mid-output", "after-output", "after-commit")


def test_an_hbase_trial_passes_with_replays_in_its_effects_file_of_the_uncommitted_batch_only() -> None:
    assert TrialResult(TrialSpec("hbase", 1), duplicated=40).ok
    assert not TrialResult(TrialSpec("hbase", 1), duplicated=40, outside=1).ok
    assert not TrialResult(TrialSpec("hbase", 1), lost=1).ok


def test_an_hbase_trial_fails_on_any_lost_or_duplicated_result_row() -> None:
    assert not TrialResult(TrialSpec("hbase", 1), rows_lost=1).ok
    assert not TrialResult(TrialSpec("hbase", 1), rows_duplicated=1).ok


def test_the_campaign_table_shows_result_rows_for_hbase_only() -> None:
    results = [TrialResult(TrialSpec("hbase", 1), duplicated=3, rows_duplicated=2),
               TrialResult(TrialSpec("kafka", 1), duplicated=3)]
    lines = table(results, ["kafka", "hbase"]).splitlines()
    assert "rows lost" in lines[0] and "rows duplicated" in lines[0]
    kafka, hbase = lines[2].split(), lines[3].split()
    assert kafka[0] == "kafka" and kafka[8:10] == ["-", "-"]
    assert hbase[0] == "hbase" and hbase[8:10] == ["0", "2"] and hbase[-1] == "1"


def test_the_results_page_counts_each_killed_run_by_how_it_was_ended() -> None:
    from tests.crash.campaign import report
    from tests.crash.harness import Run

    runs = [Run("timed-output:0.4", killed=True), Run("mid-output:2", killed=True),
            Run("mid-output:1", killed=True), Run("after-commit:1", killed=False), Run("final")]
    page = report([TrialResult(TrialSpec("sqlite", 1), runs=runs)], ["sqlite", "kafka"],
                  "tests.crash.campaign --stores sqlite,kafka", 1.5)
    assert "sqlite: mid-output 2, timed-output 1" in page
    assert "kafka: no kills" in page
    assert "    .venv/bin/python -m tests.crash.campaign --stores sqlite,kafka" in page


def test_the_results_page_shows_the_command_without_file_locations_and_says_when_cut_short() -> None:
    from tests.crash.campaign import report, shown_command

    command = shown_command(["--trials", "50", "--workdir", "/tmp/w", "--output=/tmp/p.rst", "--seed", "1"])
    assert command == "tests.crash.campaign --trials 50 --seed 1"
    page = report([TrialResult(TrialSpec("sqlite", 1))], ["sqlite"], command, 2.0, planned=300)
    assert "1 trials in 2.0 min (stopped early: 1 of 300 planned trials ran)" in page
