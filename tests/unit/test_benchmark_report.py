"""The benchmark harness's pure logic: medians, spreads, ratios within a run, goals, the table."""

from __future__ import annotations

import pytest

from benchmarks.adapter import CacheTracker
from benchmarks.contenders.jvm import parse_consumer_perf
from benchmarks.harness import _check_checksums, parse_args
from benchmarks.report import (
    check_goals,
    markdown_report,
    median_spread,
    paired_ratios,
    ratio,
    summarize,
)


def _run(contender: str, rate: float, round_no: int, workload: str = "drain", ok: bool = True,
         warmup: bool = False, **extra: object) -> dict:
    return {"contender": contender, "workload": workload, "round": round_no, "warmup": warmup,
            "ok": ok, "records_per_s": rate, "mb_per_s": rate * 100 / 1e6,
            "cpu_s_per_million": 1e6 / rate, "peak_rss_driver_mb": 500.0,
            "peak_rss_workers_mb": 100.0, **extra}


RUNS = [
    _run("dk-rdd", 1_000_000, 0, warmup=True),  # warm-up: must not count
    _run("raw-kafka-python", 1.0, 0, warmup=True),
    _run("dk-rdd", 90.0, 1), _run("raw-kafka-python", 100.0, 1), _run("ss-batch", 300.0, 1),
    _run("dk-rdd", 80.0, 2), _run("raw-kafka-python", 100.0, 2), _run("ss-batch", 200.0, 2),
    _run("dk-rdd", 100.0, 3), _run("raw-kafka-python", 125.0, 3), _run("ss-batch", 250.0, 3),
    _run("dk-rdd", 5.0, 4, ok=False, error="boom"),  # failed: must not count
]


def test_median_spread_odd_even_and_empty() -> None:
    assert median_spread([3, 1, 2]) == {"n": 3, "median": 2.0, "min": 1.0, "max": 3.0, "spread": 1.0}
    assert median_spread([1, 2, 3, 4])["median"] == 2.5
    assert median_spread([None, 4.0])["n"] == 1
    assert median_spread([]) == {"n": 0, "median": None, "min": None, "max": None, "spread": None}


def test_summarize_skips_warmup_and_failed_runs() -> None:
    summary = summarize(RUNS)
    dk = summary["drain"]["dk-rdd"]["records_per_s"]
    assert dk["n"] == 3
    assert dk["median"] == 90.0
    assert dk["max"] == 100.0
    assert dk["spread"] == pytest.approx(20 / 90)


def test_ratio_is_of_medians_within_the_run() -> None:
    summary = summarize(RUNS)
    assert ratio(summary, "drain", "dk-rdd", "raw-kafka-python") == pytest.approx(0.9)
    assert ratio(summary, "drain", "dk-rdd", "ss-batch") == pytest.approx(90 / 250)
    assert ratio(summary, "drain", "dk-rdd", "kafka-perf") is None
    assert ratio(summary, "json", "dk-rdd", "ss-udf") is None


def test_paired_ratios_follow_rounds() -> None:
    assert paired_ratios(RUNS, "drain", "dk-rdd", "raw-kafka-python") == pytest.approx([0.9, 0.8, 0.8])


def test_goals_report_met_missed_and_unmeasured() -> None:
    fast = [_run("dk-rdd-fast", 200.0, 1), _run("raw-confluent", 300.0, 1)]
    goals = {(g["contender"], g["baseline"]): g for g in check_goals(summarize(RUNS + fast))}
    assert goals[("dk-rdd", "raw-kafka-python")]["met"] is True
    assert goals[("dk-rdd-fast", "raw-confluent")]["met"] is False
    assert goals[("dk-rdd", "ss-udf")]["met"] is None


def test_each_backend_is_held_to_the_raw_loop_of_the_same_client() -> None:
    pairs = {(g["contender"], g["baseline"]) for g in check_goals({})}
    assert ("dk-rdd", "raw-kafka-python") in pairs
    assert ("dk-rdd-fast", "raw-confluent") in pairs
    assert ("dk-rdd-fast", "ss-batch") in pairs
    assert ("dk-rdd", "raw-confluent") not in pairs
    assert ("dk-rdd", "ss-batch") not in pairs


def test_markdown_table_has_ratios_goals_and_failures() -> None:
    meta = {"records": 1000, "value_bytes": 100, "partitions": 4, "repetitions": 3, "warmup": 1,
            "machine": {"nproc": 2, "memory_gib": 24}}
    text = markdown_report(RUNS, meta)
    assert "| ss-batch | 250 |" in text  # sorted fastest first, median shown
    assert "0.90 (0.80–0.90)" in text  # dk-rdd vs raw-kafka-python: median ratio and round range
    assert ("| drain | createRDD drain >= 0.9x the raw loop of the same backend (kafka-python) "
            "| 0.90x | yes |") in text
    assert "SS Python UDF | – | not measured |" not in text  # json did not run: no json goal line
    assert "dk-rdd round 4: boom" in text


def test_cache_tracker_per_batch_deltas() -> None:
    tracker = CacheTracker()
    tracker.add_batch([(10, 0, 1, {"creations": 2, "seeks": 2, "polls": 5}),
                       (10, 0, 2, {"creations": 2, "seeks": 2, "polls": 4})])
    tracker.add_batch([(10, 0, 1, {"creations": 2, "seeks": 2, "polls": 9}),
                       (10, 0, 2, {"creations": 3, "seeks": 3, "polls": 6})])
    tracker.add_batch([(10, 0, 1, {"creations": 2, "seeks": 2, "polls": 12})])
    s = tracker.summary()
    assert s["first_batch"]["creations"] == 4
    assert s["after_first_total"]["creations"] == 1
    assert s["after_first_total"]["seeks"] == 1
    assert s["after_first_max_per_batch"]["polls"] == 6
    assert s["batches"] == 3


def test_consumer_perf_line_is_parsed() -> None:
    out = ("WARN something\n2026-11-21 13:00:00:000, 2026-11-21 13:00:02:000, 190.7349, 95.3674, "
           "2000000, 1000000.0000, 120, 1880, 101.4547, 1063829.7872\n")
    parsed = parse_consumer_perf(out)
    assert parsed["records"] == 2_000_000
    assert parsed["seconds"] == pytest.approx(1.88)
    assert parsed["extra"]["rebalance_ms"] == 120


def test_checksum_disagreement_is_reported() -> None:
    runs = [{"ok": True, "workload": "json", "checksum": 5, "contender": "a"},
            {"ok": True, "workload": "json", "checksum": 6, "contender": "b"},
            {"ok": False, "workload": "json", "checksum": 7, "contender": "c"}]
    assert _check_checksums(runs) == ["json: checksums differ: {5: ['a'], 6: ['b']}"]
    assert _check_checksums(runs[:1]) == []


def test_quick_preset_and_explicit_options() -> None:
    args = parse_args(["--quick", "--repetitions", "2", "--workloads", "drain", "--out", "/tmp/x"])
    assert args.records == 200_000
    assert args.repetitions == 2
    assert args.warmup == 0
    assert args.workloads == ["drain"]
    with pytest.raises(SystemExit):
        parse_args(["--workloads", "nope"])


# ---------------------------------------------------------------------------------------------
# Workloads 3 (overhead), 5 (exactly-once) and 6 (partitions)

from benchmarks.adapter import _PlanTimer, job_phases, work_ms  # noqa: E402
from benchmarks.adapter_stores import _StoreTimer  # noqa: E402
from benchmarks.broker import TopicInfo  # noqa: E402
from benchmarks.contenders import overhead_batches, workload_kind  # noqa: E402
from benchmarks.contenders.pyspark_contenders import ss_progress_row  # noqa: E402
from benchmarks.harness import Runner, expand_plan  # noqa: E402
from benchmarks.report import (  # noqa: E402
    all_goals,
    check_latency_goals,
    check_steady_state,
    latency_stats,
    partition_counts_of,
    percentile,
    summarize_latency,
)


def _rows(totals: list[float], **fixed: float) -> list[dict]:
    return [{"batch_time": 1000 * i, "records": 0, "total": t, **fixed} for i, t in enumerate(totals)]


def _latency_run(contender: str, workload: str, latency: dict, round_no: int = 1, ok: bool = True,
                 warmup: bool = False) -> dict:
    return {"contender": contender, "workload": workload, "round": round_no, "warmup": warmup,
            "ok": ok, "kind": "latency", "latency": latency, "records_per_s": None}


OVERHEAD_RUNS = [
    _latency_run("dk-stream", "overhead", {
        "job@0.1s": {"params": {"interval": 0.1, "output": "job"},
                     "rows": _rows([30, 50, 70], plan=10, queue=0, output=20, commit=5, work=35),
                     "warmup_rows": _rows([900])},
        "job@1s": {"params": {"interval": 1.0, "output": "job"},
                   "rows": _rows([40, 40, 40], plan=10, queue=0, output=20, commit=5, work=35)},
        "count@0.1s": {"params": {"interval": 0.1, "output": "count"}, "capped": True,
                       "rows": _rows([500, 700, 900], plan=10, queue=400, output=1, commit=5, work=16)},
    }),
    _latency_run("dk-stream", "overhead", {  # a second round: rows pool with the first
        "job@0.1s": {"params": {"interval": 0.1, "output": "job"},
                     "rows": _rows([40, 60], plan=10, queue=0, output=20, commit=5, work=35)},
    }, round_no=2),
    _latency_run("dk-stream", "overhead", {  # warm-up round: ignored
        "job@0.1s": {"params": {"interval": 0.1, "output": "job"}, "rows": _rows([5000])},
    }, round_no=0, warmup=True),
    _latency_run("java-dstream-stream", "overhead", {
        "job@0.1s": {"params": {"interval": 0.1, "output": "job"},
                     "rows": _rows([70, 70, 70], plan=20, queue=0, output=50, work=70)},
    }),
    _latency_run("ss-stream", "overhead", {
        "idle-trigger@0.1s": {"params": {"interval": 0.1, "output": "idle-trigger"},
                              "rows": _rows([14, 14], plan=14, work=14)},
    }),
]

EO_RUNS = [
    _latency_run("dk-stream", "exactly-once", {
        "postgres-tx": {"params": {"store": "postgres-tx"},
                        "rows": [{"records": 1000, "store_cost": c, "eo_extra": c - 1}
                                 for c in (3, 4, 5, 6)],
                        "verified": {"exactly_once": True, "records": 4000, "batches": 4},
                        "cache": {"batches": 4, "first_batch": {"creations": 4},
                                  "after_first_total": {"creations": 0, "seeks": 0}}},
        "zookeeper": {"params": {"store": "zookeeper"}, "error": "RuntimeError: no ZooKeeper server"},
        "sqlite": {"params": {"store": "sqlite"},
                   "rows": [{"records": 1000, "store_cost": 1.0}],
                   "cache": {"batches": 3, "first_batch": {"creations": 4},
                             "after_first_total": {"creations": 1, "seeks": 3}}},
    }),
]


def test_percentile_interpolates_like_numpy_linear() -> None:
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile([10, 20, 30, 40, 50], 99) == pytest.approx(49.6)
    assert percentile([7], 99) == 7
    assert percentile([3, 1, 2], 0) == 1
    assert percentile([None, 5.0], 50) == 5.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1], 101)


def test_latency_stats_ignores_missing_values() -> None:
    st = latency_stats([4.0, None, 2.0, 6.0])
    assert st["n"] == 3
    assert st["p50"] == 4.0
    assert st["mean"] == pytest.approx(4.0)
    assert st["max"] == 6.0
    assert latency_stats([None])["p50"] is None


def test_summarize_latency_pools_rounds_and_skips_warmup_and_failures() -> None:
    lat = summarize_latency(OVERHEAD_RUNS + EO_RUNS)
    job = lat["overhead"]["dk-stream"]["job@0.1s"]
    assert job["batches"] == 5  # 3 + 2 rows from two measured rounds; warm-up rows never count
    assert job["runs"] == 2
    assert job["phases"]["total"]["p50"] == 50.0
    assert job["phases"]["total"]["max"] == 70.0
    assert "batch_time" not in job["phases"]
    zk = lat["exactly-once"]["dk-stream"]["zookeeper"]
    assert zk["batches"] == 0
    assert zk["errors"] == ["RuntimeError: no ZooKeeper server"]
    assert lat["exactly-once"]["dk-stream"]["postgres-tx"]["verified"][0]["exactly_once"] is True


def test_latency_goals_take_the_worst_interval_per_output() -> None:
    goals = {g["goal"]: g for g in check_latency_goals(summarize_latency(OVERHEAD_RUNS + EO_RUNS))}
    job = next(g for k, g in goals.items() if "output job," in k)
    assert job["value"] == 50.0  # p50 of 0.1 s (50) is worse than 1 s (40)
    assert job["met"] is True
    assert job["measured"] == "p50 total ms per interval: 0.1 s: 50, 1 s: 40 (worst at 0.1 s)"
    count = next(g for k, g in goals.items() if "output count," in k)
    assert count["value"] == 700.0
    assert count["met"] is False
    pg = next(g for k, g in goals.items() if k.startswith("PostgreSQL"))
    assert pg["value"] == pytest.approx(4.5)
    assert pg["met"] is True
    assert check_latency_goals({}) == []


def test_steady_state_goal_counts_creations_and_seeks_after_the_first_batch() -> None:
    [goal] = check_steady_state(EO_RUNS)
    assert goal["met"] is False
    assert goal["value"] == 4  # sqlite: 1 creation + 3 seeks after its first batch
    assert "sqlite" in goal["measured"]
    assert "5 batches after the first" in goal["measured"]  # (4 - 1) + (3 - 1)
    clean = [dict(EO_RUNS[0], latency={"postgres-tx": EO_RUNS[0]["latency"]["postgres-tx"]})]
    assert check_steady_state(clean)[0]["met"] is True
    assert check_steady_state(RUNS) == []  # no dk-stream runs with several batches


def test_steady_state_goal_has_one_line_per_deployment() -> None:
    def steady(contender: str, seeks: int) -> dict:
        run = _run(contender, 1.0, 0, workload="steady")
        run["extra"] = {"cache": {"batches": 10, "first_batch": {"creations": 4},
                                  "after_first_total": {"creations": 0, "seeks": seeks}}}
        return run

    goals = check_steady_state([steady("dk-stream", 7), steady("dk-stream-cluster", 0)])
    assert [(g["goal"].rsplit("(", 1)[1], g["met"]) for g in goals] == [
        ("local[2])", False), ("standalone 2 x 1-core executors)", True)]


def test_all_goals_joins_ratio_latency_and_steady_state_goals() -> None:
    goals = all_goals(RUNS + OVERHEAD_RUNS + EO_RUNS)
    labels = [g["goal"] for g in goals]
    assert "createRDD drain >= 0.9x the raw loop of the same backend (kafka-python)" in labels
    assert any(label.startswith("empty-batch overhead") for label in labels)
    assert any(label.startswith("PostgreSQL exactly-once") for label in labels)
    assert any(label.startswith("steady state") for label in labels)
    assert all(g.get("ratio") is not None for g in goals if "x raw" in g["goal"])


def test_latency_runs_stay_out_of_the_throughput_summary() -> None:
    assert "overhead" not in summarize(RUNS + OVERHEAD_RUNS)
    assert summarize(RUNS + OVERHEAD_RUNS)["drain"]["dk-rdd"]["records_per_s"]["n"] == 3


def test_markdown_report_renders_the_new_workloads() -> None:
    part = [_run(c, rate, 1, workload=f"partitions-p{n}")
            for c, rate, n in (("dk-rdd", 90.0, 1), ("ss-batch", 30.0, 1), ("dk-rdd", 200.0, 16),
                               ("ss-batch", 50.0, 16))]
    meta = {"records": 1000, "value_bytes": 100, "partitions": 4, "repetitions": 1, "warmup": 0,
            "quick": True, "machine": {"nproc": 2}}
    text = markdown_report(OVERHEAD_RUNS + EO_RUNS + part, meta)
    assert "indicative only" in text
    assert "## Workload: overhead" in text
    # dk-stream job at 0.1 s: total p50 50, and work 35 vs Java's 70 -> 0.50
    assert "| dk-stream | job | 0.1 | 5 |" in text
    assert "| 0.50 | " in text
    assert "(backlog)" in text  # count at 0.1 s queued 400 ms > half the interval
    assert "| dk-stream | count | 0.1 | 3 (capped) |" in text
    assert "## Workload: exactly-once" in text
    assert "yes (4,000 rec)" in text
    assert "FAILED: RuntimeError: no ZooKeeper server" in text
    assert "| dk-rdd | 90 | 200 |" in text  # one partitions table across counts
    assert "| dk-rdd x ss-batch | 3.00 | 4.00 |" in text
    assert "## Workload: partitions-p1" not in text
    assert "PostgreSQL exactly-once commit <= 5 ms per batch" in text
    assert "dk-stream zookeeper round 1: RuntimeError" in text


def test_job_phases_split_launch_tasks_and_return() -> None:
    parts = [(0, 0, 1, {}, 10.010, 10.011, 10.012), (0, 0, 2, {}, 10.020, 10.020, 10.030)]
    ph = job_phases(10.000, 10.050, parts)
    assert ph["job"] == pytest.approx(50.0)
    assert ph["job_launch"] == pytest.approx(10.0)
    assert ph["job_tasks"] == pytest.approx(20.0)
    assert ph["job_return"] == pytest.approx(20.0)
    assert ph["task_read"] == pytest.approx(1.0)
    assert ph["task_fn"] == pytest.approx(11.0)
    assert job_phases(1.0, 1.5, []) == {"job": pytest.approx(500.0)}


def test_work_is_plan_output_and_commit() -> None:
    assert work_ms({"plan": 10, "output": 20, "commit": 5}) == 35.0
    assert work_ms({"plan": 10, "output": 20}) == 30.0  # the JVM rows have no commit phase
    assert work_ms({"plan": 10, "output": None}) is None


def test_ss_progress_rows_of_idle_and_running_triggers() -> None:
    idle = ss_progress_row({"batchId": 1, "numInputRows": 0,
                            "durationMs": {"latestOffset": 17, "triggerExecution": 18}})
    assert idle["plan"] == 17.0
    assert idle["output"] is None
    assert idle["total"] == idle["work"] == 18.0
    assert idle["other"] == pytest.approx(1.0)
    full = ss_progress_row({"batchId": 0, "numInputRows": 4, "durationMs": {
        "latestOffset": 5, "getBatch": 1, "queryPlanning": 4, "walCommit": 3, "addBatch": 20,
        "commitOffsets": 2, "triggerExecution": 40}})
    assert (full["plan"], full["output"], full["commit"], full["records"]) == (10.0, 20.0, 5.0, 4)
    assert full["other"] == pytest.approx(5.0)


def test_overhead_cap_is_twice_the_planned_length_and_at_least_5_s() -> None:
    from benchmarks.adapter import overhead_cap_seconds

    assert overhead_cap_seconds(0.1, 22) == pytest.approx(5.0)
    assert overhead_cap_seconds(1.0, 7) == pytest.approx(14.0)


def test_overhead_batches_and_workload_kinds() -> None:
    assert overhead_batches(0.1, 2.0, 5) == 20
    assert overhead_batches(1.0, 2.0, 5) == 5
    assert overhead_batches(0.25, 20.0, 20) == 80
    with pytest.raises(ValueError):
        overhead_batches(0, 1.0, 1)
    assert workload_kind("partitions-p16") == "drain"
    assert workload_kind("json") == "json"


def test_partitions_expand_into_sub_workloads() -> None:
    plan = expand_plan(["drain", "partitions", "overhead"], ["dk-rdd", "dk-stream"], [1, 16])
    assert list(plan) == ["drain", "partitions-p1", "partitions-p16", "overhead"]
    assert [c.name for c in plan["partitions-p16"]] == ["dk-rdd"]
    assert [c.name for c in plan["overhead"]] == ["dk-stream"]
    assert partition_counts_of(plan) == [1, 16]
    assert partition_counts_of(["drain", "partitions-px"]) == []


def test_the_exactly_once_workload_offers_the_hbase_store_beside_the_others() -> None:
    args = parse_args(["--workloads", "exactly-once", "--eo-stores", "sqlite,postgres,kafka,hbase",
                       "--out", "/tmp/x"])
    assert args.eo_stores == ["sqlite", "postgres", "kafka", "hbase"]
    assert "hbase" in parse_args(["--out", "/tmp/x"]).eo_stores  # part of the default set


def test_new_options_quick_preset_and_validation() -> None:
    args = parse_args(["--quick", "--workloads", "overhead,exactly-once,partitions", "--out", "/tmp/x"])
    assert args.intervals == [0.1, 0.25, 0.5, 1.0]
    assert args.outputs == ["count", "job"]
    assert args.overhead_seconds == 2.0
    assert args.eo_batches == 20
    assert args.partition_counts == [1, 16]
    assert "postgres-tx" in args.eo_stores
    args = parse_args(["--quick", "--outputs", "job", "--partition-counts", "2,8", "--out", "/tmp/x"])
    assert args.outputs == ["job"]
    assert args.partition_counts == [2, 8]
    for bad in (["--outputs", "nope"], ["--eo-stores", "mysql"], ["--intervals", "0"],
                ["--partition-counts", "x"]):
        with pytest.raises(SystemExit):
            parse_args([*bad, "--out", "/tmp/x"])


def _topic(records: int) -> TopicInfo:
    return TopicInfo(name="t", partitions=4, records=records, value_bytes=100, kind="bytes",
                     end_offsets={0: records})


def test_latency_runs_check_what_each_configuration_read() -> None:
    record = {"workload": "exactly-once", "ok": False}
    result = {"records": 2000, "seconds": 9.0, "cpu_seconds": 3.0, "latency": {
        "sqlite": {"records": 1000, "rows": [{"records": 500, "plan": 1, "output": 2}]},
        "kafka": {"records": 999, "rows": [{"records": 999}]},
        "zookeeper": {"error": "no server"}}}
    out = Runner._finish_latency(record, result, _topic(1000))
    assert out["ok"] is True
    assert out["kind"] == "latency"
    assert "error" not in out["latency"]["sqlite"]
    assert out["latency"]["sqlite"]["rows"][0]["work"] == 3.0
    assert out["latency"]["kafka"]["error"] == "read 999 records, the topic holds 1000"
    idle = Runner._finish_latency({"workload": "overhead", "ok": False}, {"latency": {
        "job@1s": {"rows": [{"records": 3}], "warmup_rows": []}}}, _topic(0))
    assert idle["ok"] is False
    assert "read 3 records" in idle["error"]


def test_store_and_plan_timers_time_one_instance_per_batch() -> None:
    class Store:
        def plan(self, group, batch_time, ranges):
            return "planned"

        def commit(self, group, batch_time, ranges):
            return None

    store = Store()
    timer = _StoreTimer(store)
    assert store.plan("g", 1000, []) == "planned"
    store.commit("g", 1000, [])
    assert set(timer.times[1000]) == {"store_plan", "store_commit"}
    assert not hasattr(Store(), "times")  # the class is untouched

    class Stream:
        def compute(self, batch_time):
            self.latestOffsets()
            return self._make_rdd([])

        def latestOffsets(self):
            return {}

        def _make_rdd(self, ranges):
            return "rdd"

    stream = Stream()
    plan = _PlanTimer(stream)
    assert stream.compute(2000) == "rdd"
    stream.latestOffsets()  # outside a batch: not attributed
    got = plan.pop(2000)
    assert set(got) == {"plan_offsets", "plan_rdd"}
    assert plan.pop(2000) == {}


def test_cache_tracker_shared_by_streams_summarizes_each_from_its_first_batch() -> None:
    tracker = CacheTracker()
    tracker.add_batch([(1, 0, 7, {"creations": 4, "seeks": 4, "polls": 4})])  # stream A
    tracker.add_batch([(1, 0, 7, {"creations": 4, "seeks": 4, "polls": 8})])
    since = len(tracker.per_batch)
    tracker.add_batch([(1, 0, 7, {"creations": 8, "seeks": 8, "polls": 12})])  # stream B: new group
    tracker.add_batch([(1, 0, 7, {"creations": 8, "seeks": 9, "polls": 16})])
    s = tracker.summary(since=since)
    assert s["batches"] == 2
    assert s["first_batch"]["creations"] == 4  # B's own consumers, not A's as well
    assert s["after_first_total"] == {"creations": 0, "seeks": 1, "misses": 0, "hits": 0, "polls": 4,
                                      "prepositions": 0}
    assert s["per_batch"]["seeks"] == [4, 1]
    assert tracker.summary()["batches"] == 4


def test_backlog_marks_queueing_or_late_planning() -> None:
    from benchmarks.report import _backlogged

    def entry(queue: float | None, plan: float) -> dict:
        return {"params": {"interval": 0.1},
                "phases": {"queue": {"p50": queue}, "plan": {"p50": plan}}}

    assert _backlogged(entry(60.0, 10.0)) is True  # queued more than half the interval
    assert _backlogged(entry(None, 150.0)) is True  # Spark's generator planned 150 ms late
    assert _backlogged(entry(10.0, 40.0)) is False
    assert _backlogged({"params": {}, "phases": {}}) is False


def test_exactly_once_table_divides_the_checkpoint_store_by_structured_streaming() -> None:
    dk = _latency_run("dk-stream", "exactly-once", {
        "checkpoint": {"params": {"store": "checkpoint"}, "rows": [{"records": 1000, "store_cost": 12.0}]},
        "sqlite": {"params": {"store": "sqlite"}, "rows": [{"records": 1000, "store_cost": 3.0}]}})
    ss = _latency_run("ss-stream", "exactly-once", {
        "checkpoint": {"params": {"store": "checkpoint"}, "rows": [{"records": 1000, "store_cost": 8.0}]}})
    meta = {"records": 1, "value_bytes": 1, "partitions": 4, "repetitions": 1, "warmup": 0}
    text = markdown_report([dk, ss], meta)
    assert "store_cost x ss-stream" in text
    dk_line = next(x for x in text.splitlines() if x.startswith("| dk-stream | checkpoint |"))
    assert dk_line.endswith("| 1.50 |")
    sqlite_line = next(x for x in text.splitlines() if x.startswith("| dk-stream | sqlite |"))
    assert sqlite_line.endswith("| – |")  # no rival for SQLite
    assert text.index("| dk-stream | checkpoint |") < text.index("| ss-stream | checkpoint |")
