"""Placement, consumer reuse and executor failure on a Spark standalone cluster (two 1-core workers).

``local[N]`` has one executor, so it cannot show where Spark places a partition's task or
what happens when an executor dies. These tests run a driver process
(:mod:`tests.cluster.driver`) against a real standalone master with two workers on loopback.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark_cluster import SparkStandaloneCluster

DRIVER = Path(__file__).resolve().parents[1] / "cluster" / "driver.py"

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


def _run(scenario: str, config: dict[str, Any], tmp_path: Path, timeout: float = 300) -> dict[str, Any]:
    path = tmp_path / f"{scenario}.json"
    path.write_text(json.dumps(config))
    done = subprocess.run([sys.executable, str(DRIVER), scenario, str(path)], capture_output=True,
                          text=True, timeout=timeout, cwd=str(tmp_path))
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, (
        f"driver {scenario} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    return json.loads(results[-1][len("RESULT "):])


def _executor_id(location: str) -> str:
    return location.rsplit("_", 1)[1]  # executor_<host>_<id>


@pytest.mark.service_check
def test_prefer_consistent_runs_each_partition_on_the_executor_it_prefers(
    spark_cluster, kafka, unique, tmp_path
):
    topic = unique("place")
    kafka.create_topic(topic, partitions=4)
    for p in range(4):
        kafka.produce(topic, [f"{p}-{i}" for i in range(10)], partition=p)
    result = _run("placement", {"master": spark_cluster.master_url,
                                "bootstrap": kafka.bootstrap_servers, "topic": topic,
                                "partitions": 4, "records_per_partition": 10,
                                "group": unique("g")}, tmp_path)
    assert sorted(result["executors"]) == ["0", "1"]
    preferred = [_executor_id(locs[0]) for locs in result["preferred"]]
    assert set(preferred) == {"0", "1"}  # Spark's hashing spreads the 4 partitions over both
    ran = {int(i): executor for i, (executor, _) in result["tasks"].items()}
    assert ran == dict(enumerate(preferred))
    assert {locality for _, locality in result["tasks"].values()} == {"PROCESS_LOCAL"}
    assert result["counts"] == {str(p): 10 for p in range(4)}


def test_a_stream_on_one_core_executors_never_recreates_or_seeks_its_consumers(
    spark_cluster, kafka, unique, tmp_path
):
    topic = unique("reuse")
    kafka.create_topic(topic, partitions=4)
    result = _run("stream", {"master": spark_cluster.master_url,
                             "bootstrap": kafka.bootstrap_servers, "topic": topic,
                             "partitions": 4, "group": unique("g"), "seconds": 8,
                             "min_batches": 3, "per_batch": 25, "locality_wait": "60s"},
                  tmp_path)
    batches = result["batches"]
    # On a loaded machine batches grow and fewer carry records: the producer writes on until
    # three batches did, enough to show reuse.
    assert len(batches) >= 3
    assert Counter(result["values"]) == Counter(
        f"{p}-{s}-{i}" for p in range(4) for s in range(result["seconds"]) for i in range(25))
    # Each partition's task always lands on the executor it prefers (the long locality wait
    # keeps a busy machine from sending it elsewhere, which is Spark's choice, not a cache
    # miss), whose one Python worker
    # keeps the consumer where the last batch left it: one creation per partition and the
    # fresh consumer's first positioning, never again.
    assert sum(b["creations"] for b in batches) == 4
    assert sum(b["seeks"] for b in batches) == 4
    assert len({pid for b in batches for pid in b["workers"]}) == 2


@pytest.mark.slow  # a driver program, a killed worker and its replacement: about 33 s
def test_a_killed_executor_loses_no_records_and_the_stream_goes_on(kafka, unique, tmp_path):
    topic = unique("kill")
    kafka.create_topic(topic, partitions=4)
    with SparkStandaloneCluster(workers=2, cores=1) as cluster:
        victim = cluster.worker_pids[1]
        result = _run("stream", {"master": cluster.master_url,
                                 "bootstrap": kafka.bootstrap_servers, "topic": topic,
                                 "partitions": 4, "group": unique("g"), "seconds": 10,
                                 # produce on until two batches after the kill carried records
                                 "min_batches": 5, "per_batch": 25, "kill_pid": victim,
                                 "kill_after": 3}, tmp_path)
    batches = result["batches"]
    after = [b for b in batches if b["after_kill"]]
    assert after and sum(b["records"] for b in after) > 0
    # Every record exactly once: the tasks of the lost executor ran again on the survivor.
    assert Counter(result["values"]) == Counter(
        f"{p}-{s}-{i}" for p in range(4) for s in range(result["seconds"]) for i in range(25))
    assert len({pid for b in after for pid in b["workers"]}) == 1


def test_a_task_failing_mid_range_is_retried_by_spark_and_reads_the_same_range_once_with_a_fresh_consumer(
    spark_cluster, kafka, unique, tmp_path
):
    """With spark.task.maxFailures=4, a first attempt that dies halfway (SIGKILLed Python
    worker, or a dropped connection) is retried by Spark; the retry creates a new consumer
    (Spark's rule for reattempts) and the job's result holds each record exactly once."""
    topic = unique("retry")
    kafka.create_topic(topic, partitions=2)
    produced = {p: [f"{p}-{i}" for i in range(40)] for p in range(2)}
    for p, values in produced.items():
        kafka.produce(topic, values, partition=p)
    result = _run("retry", {"master": spark_cluster.master_url, "bootstrap": kafka.bootstrap_servers,
                            "topic": topic, "partitions": 2, "records_per_partition": 40,
                            "group": unique("g")}, tmp_path)
    assert result["failed_tasks"] >= 2
    for p, values in produced.items():
        part = result["parts"][str(p)]
        assert part["attempt"] >= 1
        assert part["values"] == values
        assert part["creations"] == 1
