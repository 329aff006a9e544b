"""Kafka's exactly-once system test, for the exactly-once ``KafkaOutput``, on three brokers.

After apache/kafka ``tests/kafkatest/tests/core/transactions_test.py``: 100,000 seeded records
in an input topic of 2 partitions are copied by a streaming driver (:mod:`tests.crash.driver`,
mode ``kafka-eos``: one output record per input record, value ``[partition, offset, run]``, no
key, so the records of one input partition spread over every output partition) to an output
topic of 3 partitions; both have replication factor 3 on a cluster with
``min.insync.replicas=2``. While the copy runs, at set fractions of the input committed by the
group, the scenario hard-bounces a broker (SIGKILL, then start again), kills the driver's
process group (driver, Spark JVM, Python workers; SIGKILL), or both at once. A driver whose
batch failed (a transaction that could not complete while a broker was down: the streaming
context stops) is started again, as a supervisor would. When the group has committed the
input's end, a ``read_committed`` consumer reads the output and the scenario counts:

* ``lost``: input records with no output record;
* ``duplicated``: output records beyond the first of an input record;
* ``order``: per output partition, for the records that came from one input partition, an
  input offset not greater than the one before it.

Why the order must hold: input partition ``p``'s records are written only by the task of
``p``, in input-offset order, through one producer (idempotent: per output partition the
broker appends its batches in send order, retries included); a transaction of ``p`` commits
``[from, until)`` only when the group's committed offset is ``from`` and commits ``until`` with
the records, so the committed transactions of ``p`` cover consecutive ranges in input order;
the records of aborted transactions (killed or failed attempts) are invisible to
``read_committed``. So the committed records of ``p`` in any output partition appear in
input-offset order. (Across input partitions there is no order to keep.)

``python -m tests.crash.copier --trials 3`` runs trials (alternating backends) on a cluster of
its own and prints one line per trial and a campaign row per backend.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.crash.driver import KAFKA_EOS
from tests.crash.harness import DriverProcess

__all__ = ["CopyResult", "ROUNDS", "run_copy"]

#: What happens when the group has committed a fraction of the input: Kafka's test bounces
#: three times once the copiers are 20% done; here brokers and drivers alternate, the last
#: round both at once.
ROUNDS: tuple[tuple[float, str], ...] = ((0.2, "broker"), (0.45, "driver"), (0.7, "both"))

INPUT_PARTITIONS = 2
OUTPUT_PARTITIONS = 3
#: A copy that commits nothing for this long is stuck: its driver is killed and started again.
STALL_SECONDS = 150.0


@dataclass
class CopyResult:
    """What one copy did and what the output holds."""

    backend: str
    records: int
    kills: int = 0              # driver process groups SIGKILLed by the scenario
    bounces: int = 0            # brokers SIGKILLed and started again
    failed_runs: int = 0        # driver runs that ended on their own (a failed batch)
    stalls: int = 0             # driver runs killed after STALL_SECONDS without progress
    runs: int = 0
    lost: int = 0
    duplicated: int = 0
    order: int = 0
    committed: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (not self.errors and self.lost == 0 and self.duplicated == 0 and self.order == 0
                and self.committed == {p: self.records // INPUT_PARTITIONS
                                       for p in range(INPUT_PARTITIONS)})

    def describe(self) -> str:
        return (f"{self.backend}: runs {self.runs}, kills {self.kills}, bounces {self.bounces}, "
                f"failed runs {self.failed_runs}, stalls {self.stalls}, lost {self.lost}, "
                f"duplicated {self.duplicated}, order {self.order}, committed {self.committed}, "
                f"{self.seconds:.0f} s, errors {self.errors}")


def _committed(cluster: Any, group: str, topic: str) -> dict[int, int]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=group,
                             enable_auto_commit=False, isolation_level="read_committed",
                             request_timeout_ms=15000)
    try:
        out = {}
        for p in range(INPUT_PARTITIONS):
            found = consumer.committed(TopicPartition(topic, p))
            out[p] = int(found) if found is not None else 0
        return out
    finally:
        consumer.close(autocommit=False)


class _Progress(threading.Thread):
    """Polls the group's committed offsets (a broker may be down: errors are retried)."""

    def __init__(self, cluster: Any, group: str, topic: str) -> None:
        super().__init__(name=f"progress-{group}", daemon=True)
        self.cluster, self.group, self.topic = cluster, group, topic
        self.committed: dict[int, int] = {}
        self.changed = time.monotonic()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.5):
            try:
                now = _committed(self.cluster, self.group, self.topic)
            except Exception:
                continue
            if now != self.committed:
                self.committed, self.changed = now, time.monotonic()

    def done(self) -> int:
        return sum(self.committed.values())


def _produce(cluster: Any, topic: str, records: int) -> None:
    per = records // INPUT_PARTITIONS
    for p in range(INPUT_PARTITIONS):
        for start in range(0, per, 10000):
            cluster.produce(topic, [f"{p}-{i}" for i in range(start, min(per, start + 10000))],
                            partition=p)


def _read_output(cluster: Any, topic: str) -> list[tuple[int, list[tuple[int, int]]]]:
    """Per output partition, the ``(input partition, input offset)`` of each committed record
    in output order."""
    from kafka import KafkaConsumer, TopicPartition

    out = []
    for q in range(OUTPUT_PARTITIONS):
        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap_servers, group_id=None,
                                 enable_auto_commit=False, isolation_level="read_committed",
                                 auto_offset_reset="earliest", request_timeout_ms=30000)
        tp = TopicPartition(topic, q)
        rows: list[tuple[int, int]] = []
        try:
            consumer.assign([tp])
            stable = consumer.end_offsets([tp])[tp]  # the last stable offset
            deadline = time.monotonic() + 180
            while consumer.position(tp) < stable:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{topic}-{q} was not read up to {stable} in 180 s")
                for records in consumer.poll(timeout_ms=500).values():
                    rows.extend(tuple(json.loads(r.value)[:2]) for r in records)  # type: ignore
        finally:
            consumer.close(autocommit=False)
        out.append((q, rows))
    return out


def _check(result: CopyResult, output: list[tuple[int, list[tuple[int, int]]]]) -> None:
    per = result.records // INPUT_PARTITIONS
    counts: collections.Counter[tuple[int, int]] = collections.Counter()
    for _, rows in output:
        last: dict[int, int] = {}
        for p, o in rows:
            counts[(p, o)] += 1
            if o <= last.get(p, -1):
                result.order += 1
            last[p] = o
    expected = {(p, o) for p in range(INPUT_PARTITIONS) for o in range(per)}
    result.lost = len(expected - set(counts))
    result.duplicated = sum(n - 1 for n in counts.values() if n > 1)
    stray = set(counts) - expected
    if stray:
        result.errors.append(f"{len(stray)} output records of no input record")


def run_copy(cluster: Any, backend: str, workdir: Path, seed: int = 0,
             records: int = 100_000, rounds: tuple[tuple[float, str], ...] = ROUNDS,
             max_per_batch: int = 1500, batch_seconds: float = 0.5,
             timeout: float = 1200.0) -> CopyResult:
    """Run the scenario once on ``cluster`` (three brokers) and return what it found.

    The broker bounced in round ``i`` is ``node_ids[(seed + i) % 3]``. Every broker is
    running again when this returns.
    """
    started = time.monotonic()
    workdir.mkdir(parents=True, exist_ok=True)
    result = CopyResult(backend, records)
    name = f"copier-{uuid.uuid4().hex[:10]}"
    source, target = name, f"{name}-out"
    cluster.create_topic(source, partitions=INPUT_PARTITIONS, replication_factor=3)
    cluster.create_topic(target, partitions=OUTPUT_PARTITIONS, replication_factor=3)
    _produce(cluster, source, records)
    end_file = workdir / "end_offsets.json"
    end_file.write_text(json.dumps({str(p): records // INPUT_PARTITIONS
                                    for p in range(INPUT_PARTITIONS)}))
    config = {
        "store": KAFKA_EOS, "bootstrap": cluster.bootstrap_servers, "topic": source,
        "group": name, "end_file": str(end_file), "batch_seconds": batch_seconds,
        "max_per_batch": max_per_batch, "backend": backend, "output_topic": target,
        # A transaction step that cannot complete (kafka-python, its coordinator's broker
        # killed) fails after 20 s rather than the default 60 s.
        "output_params": {"transaction.timeout.ms": 20000, "request.timeout.ms": 10000},
    }
    config_path = workdir / "config.json"
    config_path.write_text(json.dumps(config, indent=1))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("CRASH_AT", None)
    progress = _Progress(cluster, name, source)
    progress.start()
    pending = list(rounds)
    driver: DriverProcess | None = None
    restarting: threading.Thread | None = None
    try:
        while True:
            if time.monotonic() - started > timeout:
                result.errors.append(f"the copy did not finish in {timeout:.0f} s "
                                     f"(committed {progress.committed})")
                break
            if driver is None:
                result.runs += 1
                env["CRASH_INCARNATION"] = str(result.runs)
                driver = DriverProcess(config_path, workdir / f"run-{result.runs}.log", env)
                progress.changed = time.monotonic()
            code = driver.wait(0.2)
            if code is not None:
                finished = code == 0 and "DONE" in driver.lines
                driver.close()
                driver = None
                if finished:
                    break
                result.failed_runs += 1  # a failed batch stopped it: start it again
                continue
            # A round that bounces a broker waits for the one bounced before to be back (one
            # down at most); a driver kill does not wait.
            if (pending and progress.done() >= pending[0][0] * records
                    and (pending[0][1] == "driver" or restarting is None
                         or not restarting.is_alive())):
                _, action = pending.pop(0)
                round_no = len(rounds) - len(pending) - 1
                if action in ("driver", "both"):
                    driver.close()  # SIGKILL of its process group
                    driver = None
                    result.kills += 1
                if action in ("broker", "both"):
                    victim = cluster.node_ids[(seed + round_no) % len(cluster.node_ids)]
                    cluster.stop_broker(victim, kill=True)
                    result.bounces += 1
                    # Started again in the background: the copy goes on meanwhile.
                    restarting = threading.Thread(target=cluster.start_broker, args=(victim,),
                                                  kwargs={"timeout": 180}, daemon=True)
                    restarting.start()
            elif driver is not None and time.monotonic() - progress.changed > STALL_SECONDS:
                driver.close()
                driver = None
                result.stalls += 1
    finally:
        if driver is not None:
            driver.close()
        progress.stop.set()
        if restarting is not None:
            restarting.join(timeout=200)
        for node_id in cluster.node_ids:
            cluster.start_broker(node_id, timeout=180)
    try:
        result.committed = _committed(cluster, name, source)
        _check(result, _read_output(cluster, target))
    except Exception as exc:
        result.errors.append(f"checking failed: {type(exc).__name__}: {exc}")
    result.seconds = time.monotonic() - started
    if result.ok:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="kafka-python,confluent-kafka",
                        help="comma-separated; the trials alternate between them")
    parser.add_argument("--trials", type=int, default=3, help="per backend")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--max-minutes", type=float, default=60.0)
    args = parser.parse_args(argv)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    from dstream_kafka.operate.services.kafka import KafkaCluster

    cluster = KafkaCluster(brokers=3, heap="384m", own_hosts=True, broker_config={
        "min.insync.replicas": 2, "broker.session.timeout.ms": 3000,
        "broker.heartbeat.interval.ms": 500})
    cluster.start()
    root = Path(tempfile.mkdtemp(prefix="copier-"))
    started = time.monotonic()
    results: dict[str, list[CopyResult]] = {b: [] for b in backends}
    try:
        for trial in range(args.trials):
            for backend in backends:
                if time.monotonic() - started > args.max_minutes * 60:
                    break
                result = run_copy(cluster, backend, root / f"{backend}-{trial}",
                                  seed=args.seed + trial, records=args.records)
                results[backend].append(result)
                print(f"trial {backend}-{trial}: {'ok' if result.ok else 'FAILED'} "
                      f"{result.describe()}", flush=True)
    finally:
        cluster.stop()
    print(f"{(time.monotonic() - started) / 60:.1f} minutes; trials kept in {root} when failed")
    print("backend          trials  runs  kills  bounces  failed runs  records  lost  "
          "duplicated  order  failed  minutes")
    for backend, done in results.items():
        print(f"{backend:<15}  {len(done):>6}  {sum(r.runs for r in done):>4}  "
              f"{sum(r.kills for r in done):>5}  {sum(r.bounces for r in done):>7}  "
              f"{sum(r.failed_runs for r in done):>11}  {sum(r.records for r in done):>7}  "
              f"{sum(r.lost for r in done):>4}  {sum(r.duplicated for r in done):>10}  "
              f"{sum(r.order for r in done):>5}  {sum(not r.ok for r in done):>6}  "
              f"{sum(r.seconds for r in done) / 60:>7.1f}", flush=True)
    return 0 if all(r.ok for done in results.values() for r in done) else 1


if __name__ == "__main__":
    sys.exit(main())
