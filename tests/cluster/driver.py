"""A driver program on a Spark standalone cluster, run in its own process by the cluster tests.

A Python process holds one SparkContext, and the test session's is on ``local[2]``, so each
cluster scenario runs here and prints one JSON line (``RESULT {...}``) for the test to check::

    python tests/cluster/driver.py SCENARIO CONFIG.json

``CONFIG.json`` has ``master`` (``spark://127.0.0.1:port``), ``bootstrap``, ``topic``,
``partitions`` and ``group``; the scenarios add their own keys.

``placement``  ``createRDD`` over every partition of ``topic`` (filled by the test); reports
               which executor ran each partition's task (Spark's status store) and the
               executors each partition prefers.
``stream``     a direct stream (1 s batches) while a producer thread writes ``per_batch`` records
               a second to every partition for ``seconds``; every batch's output collects the
               values with each task's consumer cache counters (``consumer_cache.stats()``),
               then ``commitAsync``. With ``kill_pid`` it SIGKILLs that process group (a Spark
               worker and its executor) after ``kill_after`` batches with records. It stops once
               the committed offsets reach the end offsets after the producer finished.
               ``locality_wait`` sets ``spark.locality.wait``; with ``min_batches`` the
               producer writes on (60 s at most) until that many batches carried records.
``brokers``    a direct stream (1 s batches) with ``PreferBrokers`` while a producer thread writes
               as ``stream`` does; each batch with records reports, per Kafka partition, the
               host of the executor that ran its task (Spark's status store) and the host the
               stream preferred, and prints ``BATCH <n>`` as it ends, so the test can stop a
               broker mid-run. It stops like ``stream``.
``retry``      ``createRDD`` over ``partitions`` partitions with ``spark.task.maxFailures=4``;
               each partition's first task attempt fails halfway through its range (partition
               0: its Python worker is SIGKILLed; others: an exception, as a dropped broker
               connection raises); reports each partition's successful attempt, the values it
               read and the consumers it created, and the failed tasks Spark counted.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

# run as a script (python tests/cluster/driver.py): the repository root holds tests.support
sys.path.insert(1, str(Path(__file__).resolve().parents[2]))
from tests.support.spark_cluster import wait_for_executors  # noqa: E402


def _context(config: dict[str, Any], extra: dict[str, str] | None = None) -> Any:
    from pyspark import SparkContext

    from dstream_kafka.spark_settings import local_spark_conf

    settings = {
        "spark.executor.memory": "512m",
        "spark.cores.max": str(config.get("executors", 2)),
        "spark.streaming.kafka.consumer.poll.ms": "10000",
        **(extra or {}),
    }
    sc = SparkContext(conf=local_spark_conf(config["master"], "dstream_kafka-cluster", settings))
    sc.setLogLevel("ERROR")
    wait_for_executors(sc, int(config.get("executors", 2)))
    return sc


def _params(config: dict[str, Any]) -> dict[str, Any]:
    return {"bootstrap.servers": config["bootstrap"], "group.id": config["group"],
            "value.deserializer": "org.apache.kafka.common.serialization.StringDeserializer"}


def _whole_partitions(sc: Any, config: dict[str, Any], description: str) -> tuple[Any, str, int]:
    """``createRDD`` over offsets 0..records_per_partition of every partition of ``topic``, its
    jobs in a new job group; returns the RDD, the group and the partition count."""
    from dstream_kafka import KafkaUtils, OffsetRange

    n = int(config["partitions"])
    ranges = [OffsetRange(config["topic"], p, 0, int(config["records_per_partition"]))
              for p in range(n)]
    rdd = KafkaUtils.createRDD(sc, _params(config), ranges)
    group = uuid.uuid4().hex
    sc.setJobGroup(group, description)
    return rdd, group, n


def _stages_of(tracker: Any, group: str) -> list[int]:
    """The stage ids of the job group's jobs (Spark's status tracker)."""
    return [stage for job in tracker.getJobIdsForGroup(group)
            for stage in tracker.getJobInfo(job).stageIds]


def _successful_tasks(sc: Any, group: str, partitions: int) -> dict[int, Any]:
    """``{partition index: TaskData}`` of the job group's successful tasks (the status store)."""
    tracker = sc.statusTracker()
    store = sc._jsc.sc().statusStore()
    deadline = time.monotonic() + 30
    while True:
        found: dict[int, Any] = {}
        for stage in _stages_of(tracker, group):
            tasks = store.taskList(stage, 0, 10_000)
            for i in range(tasks.length()):
                task = tasks.apply(i)
                if str(task.status()) == "SUCCESS":
                    found[int(task.index())] = task
        if len(found) >= partitions or time.monotonic() > deadline:
            return found
        time.sleep(0.2)  # the status store follows the listener bus, a little behind the job


def _task_executors(sc: Any, group: str, partitions: int) -> dict[int, tuple[str, str]]:
    """``{partition index: (executor id, locality)}`` of the job group's tasks."""
    return {i: (str(task.executorId()), str(task.taskLocality()))
            for i, task in _successful_tasks(sc, group, partitions).items()}


def placement(config: dict[str, Any]) -> dict[str, Any]:
    sc = _context(config)
    rdd, group, n = _whole_partitions(sc, config, "placement")
    counts = rdd.mapPartitionsWithIndex(lambda i, it: [(i, sum(1 for _ in it))]).collect()
    tasks = _task_executors(sc, group, n)
    result = {
        "executors": wait_for_executors(sc, int(config.get("executors", 2))),
        "preferred": [rdd.preferredLocations(i) for i in range(n)],
        "tasks": {str(i): list(v) for i, v in tasks.items()},
        "counts": dict(counts),
    }
    sc.stop()
    return result


def _produce(config: dict[str, Any], done: threading.Event, sent: list[int],
             enough: Any = None) -> None:
    """Write ``per_batch`` records a second to every partition for ``seconds`` seconds, and on
    (60 s at most) until ``enough()`` is true; ``sent`` = [records, seconds written]."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=config["bootstrap"], linger_ms=5)
    try:
        second = 0
        while second < int(config["seconds"]) or (
                enough is not None and not enough() and second < int(config["seconds"]) + 60):
            started = time.monotonic()
            for p in range(int(config["partitions"])):
                for i in range(int(config["per_batch"])):
                    producer.send(config["topic"], f"{p}-{second}-{i}".encode(), partition=p)
                    sent[0] += 1
            producer.flush()
            second += 1
            sent[1] = second
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    finally:
        producer.close()
        done.set()


def _values_and_stats(records: Any) -> Any:
    from dstream_kafka.read.consumer_cache import stats

    values = [r.value for r in records]
    yield values, stats()


def stream(config: dict[str, Any]) -> dict[str, Any]:
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from dstream_kafka.streaming.context import StreamingContext

    extra = {"spark.task.maxFailures": "4"}
    if config.get("locality_wait"):
        extra["spark.locality.wait"] = str(config["locality_wait"])
    sc = _context(config, extra)
    ssc = StreamingContext(sc, 1.0)
    directs = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([config["topic"]], {**_params(config), "auto.offset.reset": "earliest"}))
    batches: list[dict[str, Any]] = []
    values: list[str] = []
    last: dict[int, dict[str, int]] = {}
    killed = threading.Event()

    def output(rdd: Any) -> None:
        ranges = rdd.offsetRanges()
        if sum(r.count() for r in ranges):
            parts = rdd.mapPartitions(_values_and_stats).collect()
            delta = {"creations": 0, "seeks": 0}
            for part_values, st in parts:
                values.extend(part_values)
                before = last.get(st["pid"], {})
                for key in delta:
                    delta[key] += st[key] - before.get(key, 0)
                last[st["pid"]] = st
            batches.append({**delta, "records": sum(r.count() for r in ranges),
                            "workers": sorted({st["pid"] for _, st in parts}),
                            "after_kill": killed.is_set()})
            if config.get("kill_pid") and len(batches) == int(config["kill_after"]):
                os.killpg(int(config["kill_pid"]), signal.SIGKILL)
                killed.set()
        directs.commitAsync(ranges)

    directs.foreachRDD(output)
    # min_batches: on a loaded machine batches grow; produce on until enough carried records
    enough = lambda: len(batches) >= int(config.get("min_batches", 0))  # noqa: E731
    sent, seconds = _produce_until_committed(ssc, config, enough)
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
    return {"batches": batches, "values": values, "sent": sent, "seconds": seconds}


def _produce_until_committed(ssc: Any, config: dict[str, Any],
                             enough: Any = None) -> tuple[int, int]:
    """Start ``ssc`` and the producer thread; return the records sent and the seconds written
    once the group has committed the log ends after the producer finished (or the deadline
    passed)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTP

    done, sent = threading.Event(), [0, 0]
    producer = threading.Thread(target=_produce, args=(config, done, sent, enough), daemon=True)
    ssc.start()
    producer.start()
    checker = KafkaConsumer(bootstrap_servers=config["bootstrap"], group_id=config["group"],
                            enable_auto_commit=False)
    tps = [KTP(config["topic"], p) for p in range(int(config["partitions"]))]
    deadline = time.monotonic() + float(config["seconds"]) + 180
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if done.is_set():
            ends = checker.end_offsets(tps)
            if all((checker.committed(tp) or 0) >= ends[tp] for tp in tps):
                break
    checker.close()
    return sent[0], sent[1]


def brokers(config: dict[str, Any]) -> dict[str, Any]:
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies
    from dstream_kafka.streaming.context import StreamingContext

    extra = {"spark.task.maxFailures": "4", "spark.locality.wait": str(config["locality_wait"])}
    sc = _context(config, extra)
    ssc = StreamingContext(sc, 1.0)
    directs = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferBrokers,
        ConsumerStrategies.Subscribe([config["topic"]], {**_params(config), "auto.offset.reset": "earliest"}))
    batches: list[dict[str, Any]] = []

    def output(batch_time: Any, rdd: Any) -> None:
        ranges = rdd.offsetRanges()
        if sum(r.count() for r in ranges):
            started = time.time()
            group = uuid.uuid4().hex
            sc.setJobGroup(group, "brokers")
            rdd.map(lambda r: r.value).count()
            hosts = {i: str(task.host())
                     for i, task in _successful_tasks(sc, group, len(ranges)).items()}
            # executor_<host>_<id>: the executor the stream preferred for each range
            preferred = [rdd.preferredLocations(i) for i in range(len(ranges))]
            batches.append({
                "started": started, "batch_time": batch_time.timestamp(),
                "ran": {str(r.partition): hosts.get(i) for i, r in enumerate(ranges)},
                "preferred": {str(r.partition): (locs[0].split("_")[1] if locs else None)
                              for r, locs in zip(ranges, preferred)},
            })
            print(f"BATCH {len(batches)}", flush=True)
        directs.commitAsync(ranges)

    directs.foreachRDD(output)
    _produce_until_committed(ssc, config)
    from dstream_kafka.read.placement import executor_locations

    executor_hosts = sorted({e.host for e in executor_locations(sc)})
    ssc.stop(stopSparkContext=True, stopGraceFully=True)
    return {"batches": batches, "executor_hosts": executor_hosts}


def _fail_first_attempt(index: int, records: Any) -> Any:
    """Read a partition; its first attempt fails halfway: partition 0's Python worker is
    SIGKILLed, partition 1 raises as a dropped broker connection would."""
    from pyspark import TaskContext

    from dstream_kafka.read.consumer_cache import stats

    context = TaskContext.get()
    attempt = context.attemptNumber() if context is not None else -1
    created = stats()["creations"]
    values = []
    for i, record in enumerate(records):
        values.append(record.value)
        if attempt == 0 and i == 10:
            if index == 0:
                os.kill(os.getpid(), signal.SIGKILL)
            raise ConnectionResetError("broker connection dropped (simulated by the test)")
    yield index, attempt, values, stats()["creations"] - created


def retry(config: dict[str, Any]) -> dict[str, Any]:
    sc = _context(config, {"spark.task.maxFailures": "4"})
    rdd, group, n = _whole_partitions(sc, config, "retry")
    parts = rdd.mapPartitionsWithIndex(_fail_first_attempt).collect()
    tracker = sc.statusTracker()

    def failed_tasks() -> int:
        infos = [tracker.getStageInfo(stage) for stage in _stages_of(tracker, group)]
        return sum(info.numFailedTasks for info in infos if info is not None)

    deadline = time.monotonic() + 30
    while failed_tasks() < n and time.monotonic() < deadline:
        time.sleep(0.2)  # the status store follows the listener bus, a little behind the job
    failed = failed_tasks()
    sc.stop()
    return {"parts": {str(i): {"attempt": a, "values": v, "creations": c}
                      for i, a, v, c in parts},
            "failed_tasks": failed}


SCENARIOS = {"placement": placement, "stream": stream, "brokers": brokers, "retry": retry}

if __name__ == "__main__":
    scenario, config_path = sys.argv[1], sys.argv[2]
    with open(config_path) as fh:
        cfg = json.load(fh)
    print("RESULT " + json.dumps(SCENARIOS[scenario](cfg)), flush=True)
