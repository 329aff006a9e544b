"""Unit tests for benchmarks/RESULTS.md: the page from a run's results and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.publish import main, publish, results_page

META = {"command": "python -m benchmarks --publish", "started_utc": "2026-11-24T23:00:00+00:00",
        "records": 1_000_000, "value_bytes": 100, "partitions": 4, "repetitions": 2, "warmup": 1,
        "elapsed_seconds": 5400, "kafka_version": "4.1.1",
        "machine": {"nproc": 2, "cpu": "Xeon", "memory_gib": 23.5, "platform": "Linux",
                    "python": "3.11.7", "pyspark_version": "4.3.0", "kafka_version": "3.0.12",
                    "confluent_kafka_version": "2.16.1 (librdkafka 2.16.0)", "java": "openjdk 17"},
        "connector_versions": {"spark-sql-kafka-0-10": "4.2.0",
                               "spark-streaming-kafka-0-10": "4.1.0-preview1"}}
GOALS = [{"workload": "drain", "goal": "createRDD drain >= 0.9x", "ratio": 0.93, "met": True},
         {"workload": "multicore-c2", "goal": "one consumer per partition", "measured": "2.00",
          "met": False},
         {"workload": "json", "goal": "fast is faster", "met": None}]
REPORT = "# dstream_kafka benchmark\n\nMachine: 2 cores\n\n## Workload: drain\n\n| a | b |\n"


def test_the_page_names_the_commit_the_command_and_both_connector_versions() -> None:
    page = results_page({"meta": META, "goals": GOALS}, REPORT, "abc123", "RESULTS-chart.png", None)
    assert "| commit measured | `abc123` |" in page
    assert "| command | `python -m benchmarks --publish` |" in page
    assert "spark-sql-kafka-0-10_2.13 4.2.0" in page
    assert "spark-streaming-kafka-0-10_2.13 4.1.0-preview1" in page
    assert "| Kafka broker (KRaft, 1 node) | 4.1.1 |" in page
    assert "| duration | 90 min |" in page


def test_goals_are_counted_and_marked_met_missed_or_not_measured() -> None:
    page = results_page({"meta": META, "goals": GOALS}, REPORT, "abc", None, None)
    assert "1 met, 1 missed, 1 not measured." in page
    assert "| drain | createRDD drain >= 0.9x | 0.93x | met |" in page
    assert "| multicore-c2 | one consumer per partition | 2.00 | **missed** |" in page
    assert "| json | fast is faster | – | not measured |" in page


def test_the_run_report_follows_one_heading_level_down_without_its_title() -> None:
    page = results_page({"meta": META, "goals": []}, REPORT, "abc", None, "## Analysis\n\nWhy.")
    assert "# dstream_kafka benchmark\n" not in page
    assert "### Workload: drain" in page
    assert page.index("## Analysis") < page.index("## The run's report")


def test_a_quick_run_is_marked_as_not_a_full_run() -> None:
    page = results_page({"meta": {**META, "quick": True}, "goals": []}, REPORT, "abc", None, None)
    assert "**Not a full run: quick settings." in page


def test_publish_writes_the_page_from_the_run_records_and_copies_the_chart(tmp_path: Path) -> None:
    run, repo = tmp_path / "run", tmp_path / "repo"
    run.mkdir()
    (repo / "benchmarks").mkdir(parents=True)
    runs = [{"workload": "multicore-c2", "contender": "dk-stream-cluster", "ok": True,
             "warmup": False, "records_per_s": 70_000.0, "round": 1,
             "extra": {"multicore": {"consumers_per_partition": 2.0, "seeking_tasks_share": 0.0,
                                     "seeks_per_batch": 0.0}}}]
    stale_goals = [{"workload": "old", "goal": "a goal no longer checked", "met": True}]
    (run / "results.json").write_text(json.dumps(
        {"meta": {**META, "commit": "feed42"}, "runs": runs, "goals": stale_goals}))
    (run / "report.md").write_text("# an old report\n")
    (run / "chart.png").write_bytes(b"png")
    (repo / "benchmarks" / "RESULTS-analysis.md").write_text("## Analysis\n\nkept by hand\n")
    page = publish(run, repo=repo).read_text()
    assert "`feed42`" in page  # the commit recorded when the run started
    assert "kept by hand" in page
    assert "a goal no longer checked" not in page and "an old report" not in page
    assert "one consumer per partition per executor (dk-stream-cluster, 2-core executor)" in page
    assert "### Workload: multicore" in page
    assert (repo / "benchmarks" / "RESULTS-chart.png").read_bytes() == b"png"


def test_a_folder_without_results_is_refused_with_the_fix(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main([str(tmp_path)])
    assert "give the folder a run wrote (--out)" in capsys.readouterr().err
