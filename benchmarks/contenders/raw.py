"""Raw client loops: kafka-python and confluent-kafka, in as many processes as Spark has task slots.

These are the "no framework" lines: each reader process ``assign``s its share of the partitions
(partition ``p`` goes to process ``p % processes``), seeks to the first offset and polls until
it has passed the end offset of every partition it owns. The timed region starts when every
process has imported its client and ends when the last one has finished; consumer creation is
inside it, as it is for the Spark contenders.

Work per record: ``drain`` counts records and value bytes; ``json`` runs ``json.loads`` on the
value and adds up the fields ``a`` and ``b`` (the same function the Spark contenders apply).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import time
from typing import Any

from benchmarks.monitor import tree_cpu_seconds

__all__ = ["run_raw"]

#: kafka-python settings of the raw loop: defaults, except large polls (fewer Python round trips).
KAFKA_PYTHON_CONFIG = {"max_poll_records": 10000, "enable_auto_commit": False, "group_id": None,
                       "max_partition_fetch_bytes": 4 * 2**20}
#: confluent-kafka settings of the raw loop.
CONFLUENT_CONFIG = {"enable.auto.commit": False, "group.id": "bench-raw-confluent",
                    "max.partition.fetch.bytes": 4 * 2**20, "fetch.max.bytes": 64 * 2**20}


def _work(workload: str):
    if workload == "json":
        def fn(value: bytes) -> tuple[int, int]:
            doc = json.loads(value)
            return 1, doc["a"] + doc["b"]
    else:
        def fn(value: bytes) -> tuple[int, int]:
            return 1, len(value)
    return fn


def _kafka_python_reader(bootstrap: str, topic: str, ranges: dict[int, tuple[int, int]],
                         workload: str) -> tuple[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    fn = _work(workload)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, **KAFKA_PYTHON_CONFIG)
    tps = {p: TopicPartition(topic, p) for p in ranges}
    consumer.assign(list(tps.values()))
    for p, (start, _) in ranges.items():
        consumer.seek(tps[p], start)
    pending = {tps[p]: end for p, (start, end) in ranges.items() if end > start}
    count = total = 0
    while pending:
        for tp, records in consumer.poll(timeout_ms=1000, max_records=10000).items():
            end = pending.get(tp)
            for rec in records:
                if end is None or rec.offset >= end:
                    break
                n, s = fn(rec.value)
                count += n
                total += s
            if end is not None and records and records[-1].offset >= end - 1:
                del pending[tp]
    consumer.close()
    return count, total


def _confluent_reader(bootstrap: str, topic: str, ranges: dict[int, tuple[int, int]],
                      workload: str) -> tuple[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    fn = _work(workload)
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONFLUENT_CONFIG})
    consumer.assign([TopicPartition(topic, p, start) for p, (start, end) in ranges.items()])
    pending = {p: end for p, (start, end) in ranges.items() if end > start}
    count = total = 0
    while pending:
        for msg in consumer.consume(num_messages=10000, timeout=1.0):
            if msg.error():
                continue
            p = msg.partition()
            end = pending.get(p)
            if end is None:
                continue
            off = msg.offset()
            if off < end:
                n, s = fn(msg.value())
                count += n
                total += s
            if off >= end - 1:
                del pending[p]
                consumer.pause([TopicPartition(topic, p)])  # stop prefetching past the range
    consumer.close()
    return count, total


_READERS = {"raw-kafka-python": _kafka_python_reader, "raw-confluent": _confluent_reader}


def _process(reader_name: str, args: tuple, ready: Any, go: Any, done: Any, results: Any) -> None:
    reader = _READERS[reader_name]
    # Import the client before the clock starts, as a Spark worker has it imported already.
    if reader_name == "raw-confluent":
        import confluent_kafka  # noqa: F401
    else:
        import kafka  # noqa: F401
    ready.release()
    go.wait()
    results.put(reader(*args))
    done.wait()  # stay alive so the parent can read this process's CPU time


def run_raw(spec: dict[str, Any]) -> dict[str, Any]:
    """Run one raw loop contender described by ``spec`` (see :mod:`benchmarks.runner`)."""
    topic = spec["topic"]
    processes = int(spec.get("processes", 2))
    ends = {int(p): int(e) for p, e in topic["end_offsets"].items()}
    shares: list[dict[int, tuple[int, int]]] = [{} for _ in range(processes)]
    for p, end in ends.items():
        shares[p % processes][p] = (0, end)
    ctx = mp.get_context("fork")
    ready, go, done, results = ctx.Semaphore(0), ctx.Event(), ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_process, daemon=True,
                         args=(spec["contender"], (spec["bootstrap"], topic["name"], share,
                                                   spec.get("kind", spec["workload"])), ready, go,
                               done, results))
             for share in shares if share]
    for proc in procs:
        proc.start()
    for _ in procs:
        ready.acquire()
    cpu0, t0 = tree_cpu_seconds(), time.perf_counter()
    go.set()
    parts = [results.get(timeout=1800) for _ in procs]
    seconds = time.perf_counter() - t0
    cpu = tree_cpu_seconds() - cpu0
    done.set()
    for proc in procs:
        proc.join(timeout=30)
    config = CONFLUENT_CONFIG if spec["contender"] == "raw-confluent" else KAFKA_PYTHON_CONFIG
    return {"records": sum(c for c, _ in parts), "checksum": sum(s for _, s in parts),
            "seconds": seconds, "cpu_seconds": cpu,
            "extra": {"processes": len(procs), "client_config": config}}
