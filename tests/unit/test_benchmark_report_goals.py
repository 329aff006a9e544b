"""Goal lines of the benchmark report: partition counts, grouping by workload, the fast
backend's contenders, and the monitor leaving the steady workload's producer out."""

from __future__ import annotations

from benchmarks.contenders import (
    CONNECT_SUFFIX,
    CONTENDERS,
    FAST_BACKEND_CONF,
    base_name,
    contenders_for,
    is_fast,
)
from benchmarks.monitor import LOAD_GENERATOR_MARK, _is_load_generator
from benchmarks.report import all_goals, check_partition_goals, summarize


def _run(contender: str, rate: float, workload: str) -> dict:
    return {"contender": contender, "workload": workload, "round": 1, "warmup": False, "ok": True,
            "records_per_s": rate, "mb_per_s": None, "cpu_s_per_million": None,
            "peak_rss_driver_mb": None, "peak_rss_workers_mb": None}


def test_a_partition_goal_is_decided_by_the_worst_partition_count() -> None:
    runs = [_run("dk-rdd", 90.0, "partitions-p1"), _run("raw-kafka-python", 100.0, "partitions-p1"),
            _run("dk-rdd", 70.0, "partitions-p16"), _run("raw-kafka-python", 100.0, "partitions-p16")]
    [goal] = [g for g in check_partition_goals(summarize(runs)) if g["baseline"] == "raw-kafka-python"]
    assert goal["value"] == 0.7
    assert goal["met"] is False
    assert goal["measured"] == "p=1: 0.90x, p=16: 0.70x (worst at p=16)"


def test_a_partition_goal_without_its_baseline_is_not_measured() -> None:
    runs = [_run("dk-rdd", 90.0, "partitions-p1")]
    goals = check_partition_goals(summarize(runs))
    assert goals and all(g["met"] is None for g in goals)


def test_no_partition_goals_when_the_partitions_workload_did_not_run() -> None:
    assert check_partition_goals(summarize([_run("dk-rdd", 90.0, "drain")])) == []


def test_goals_are_grouped_in_workload_order() -> None:
    runs = [_run("dk-rdd", 90.0, "partitions-p4"), _run("raw-kafka-python", 100.0, "partitions-p4"),
            _run("dk-rdd", 50.0, "json"), _run("ss-udf", 20.0, "json"),
            _run("dk-rdd", 90.0, "drain"), _run("raw-kafka-python", 100.0, "drain")]
    order = [g["workload"] for g in all_goals(runs)]
    assert order == sorted(order, key=["drain", "json", "partitions"].index)
    assert {"drain", "json", "partitions"} == set(order)


def test_goals_of_a_workload_that_did_not_run_are_left_out() -> None:
    goals = all_goals([_run("dk-rdd", 90.0, "drain"), _run("raw-kafka-python", 100.0, "drain")])
    assert all(g["workload"] == "drain" for g in goals)


def test_fast_contenders_run_their_base_contender_with_the_confluent_backend() -> None:
    assert base_name("dk-rdd-fast") == "dk-rdd"
    assert base_name("dk-stream") == "dk-stream"
    assert base_name("dk-stream-cluster") == "dk-stream"
    assert FAST_BACKEND_CONF == {"spark.streaming.kafka.consumer.backend": "confluent-kafka"}
    assert set(CONTENDERS["dk-rdd-fast"].workloads) <= set(CONTENDERS["dk-rdd"].workloads)


def test_connect_contenders_run_their_classic_contender_on_the_same_backend() -> None:
    assert base_name("dk-df-connect") == "dk-df" and not is_fast("dk-df-connect")
    assert base_name("dk-df-fast-connect") == "dk-df" and is_fast("dk-df-fast-connect")
    assert base_name("dk-df-parquet-fast-connect") == "dk-df-parquet"
    assert base_name("ss-batch-connect") == "ss-batch" and not is_fast("ss-batch-connect")
    assert is_fast("dk-stream-fast-cluster") and not is_fast("dk-stream-cluster")


def test_the_drain_runs_every_dataframe_drain_on_classic_and_connect_sessions() -> None:
    drain = {c.name for c in contenders_for("drain")}
    for classic in ("dk-df", "dk-df-fast", "dk-df-parquet", "dk-df-parquet-fast", "ss-batch",
                    "ss-parquet"):
        assert {classic, f"{classic}-connect"} <= drain
        assert CONTENDERS[f"{classic}-connect"].family == CONTENDERS[classic].family


def test_every_connect_contenders_classic_twin_gets_the_same_dataframe_warm_up() -> None:
    from benchmarks.contenders.pyspark_contenders import DATAFRAME_DRAINS

    twins = {base_name(n) for n in CONTENDERS if n.endswith(CONNECT_SUFFIX)}
    assert twins == set(DATAFRAME_DRAINS)


def test_steady_runs_both_backends_the_cluster_deployment_and_structured_streaming() -> None:
    assert [c.name for c in contenders_for("steady")] == [
        "dk-stream", "dk-stream-fast", "dk-stream-cluster", "ss-stream"]


class _Proc:
    def __init__(self, pid: int, cmdline: list[str]) -> None:
        self.pid = pid
        self._cmdline = cmdline
        self.calls = 0

    def cmdline(self) -> list[str]:
        self.calls += 1
        return self._cmdline


def test_the_producer_jvm_is_recognized_as_a_load_generator_once_per_pid() -> None:
    seen: dict[int, bool] = {}
    producer = _Proc(7, ["java", "-cp", "x", LOAD_GENERATOR_MARK, "--topic", "t"])
    spark = _Proc(8, ["java", "-cp", "x", "org.apache.spark.deploy.SparkSubmit"])
    assert _is_load_generator(producer, seen) is True
    assert _is_load_generator(producer, seen) is True
    assert producer.calls == 1
    assert _is_load_generator(spark, seen) is False


def test_an_interrupted_run_says_so_at_the_top_of_the_report() -> None:
    from benchmarks.report import markdown_report

    meta = {"records": 1, "value_bytes": 1, "partitions": 1, "machine": {},
            "interrupted": "interrupted after 3 runs; the rest did not run"}
    text = markdown_report([], meta)
    assert "**Stopped early (interrupted after 3 runs; the rest did not run).**" in text
