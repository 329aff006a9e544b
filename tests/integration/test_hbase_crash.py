"""SIGKILL crash trials of the HBase store's documented guarantee (idempotent results, offsets last).

A worker process plays a stream without Spark or Kafka (the guarantee is the store's): source
offsets are integers, every batch covers the next few offsets of two topics (so one batch writes
two offsets rows), writes one result row per record under :func:`result_row_key`, then commits
the offsets. The worker is SIGKILLed inside each window of a batch (results written but not
the offsets; the group cell committed but not the offsets rows; everything written), restarted
from the stored offsets each time, and finally runs to the end. Then every offset below the end has exactly one
result row whose value names it, the stored offsets are the end, the history is a gap-free
chain and the guide's newest offsets rows agree with the group cell.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores import OffsetStores
from dstream_kafka.stores.hbase_keys import offsets_row_prefix

pytestmark = pytest.mark.integration

END = 120  # source offsets per partition
STEP = 7   # offsets per partition and batch

WORKER = r"""
import sys, time
import happybase
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import OffsetStores
from dstream_kafka.stores.hbase import result_row_key

port, table, results, group, topics, end, step = sys.argv[1:8]
port, end, step, topics = int(port), int(end), int(step), topics.split(",")
store = OffsetStores.hbase("127.0.0.1", port, table=table)
write_derived = store._write_derived


def slow_derived(*args):
    # Widens the window between the commit point (checkAndPut) and the offsets rows; the first
    # commit of a run also rewrites the previous batch's rows (a repair), before its own check.
    print("committed" if args[2]["batch_ms"] == t else "repair", args[2]["batch_ms"], flush=True)
    time.sleep(0.04)
    write_derived(*args)


store._write_derived = slow_derived
conn = happybase.Connection("127.0.0.1", port)
out = conn.table(results)
stored = store.load(group)
history = store.history(group, limit=1)
t = history[0].batch_time_ms if history else 1_700_000_000_000
print("start", {f"{k.topic}-{k.partition}": v for k, v in stored.items()}, flush=True)
while True:
    ranges = []
    for topic in topics:
        for p in (0, 1):
            start = stored.get(TopicPartition(topic, p), 0)
            ranges.append(OffsetRange(topic, p, start, min(end, start + step)))
    if all(r.fromOffset == end for r in ranges):
        break
    t += 1000
    with out.batch() as b:  # the results, under keys derived from the records
        for r in ranges:
            for off in range(r.fromOffset, r.untilOffset):
                b.put(result_row_key(r.topic, r.partition, off), {b"r:v": f"{r.topic}/{r.partition}/{off}".encode()})
    print("results", t, flush=True)
    time.sleep(0.04)  # widens the window between the results and the offsets
    store.commit(group, t, ranges)  # the offsets, last
    print("derived", t, flush=True)
    time.sleep(0.04)
    stored = {r.topicPartition(): r.untilOffset for r in ranges}
print("done", flush=True)
"""


def _run(args: list[str], kill_at: tuple[str, int] | None) -> list[str]:
    """Run the worker; with ``kill_at=(phase, n)`` SIGKILL it as soon as it prints ``phase`` for
    the n-th time, i.e. inside the 40 ms window that follows that phase. Return its lines."""
    proc = subprocess.Popen([sys.executable, "-c", WORKER, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    lines: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line.strip())
        if kill_at is not None and sum(x.startswith(kill_at[0] + " ") for x in lines) == kill_at[1]:
            proc.send_signal(signal.SIGKILL)
            break
    proc.wait(timeout=300)
    err = proc.stderr.read() if proc.stderr is not None else ""
    if kill_at is None:
        assert proc.returncode == 0, err[-2000:]
    else:
        assert proc.returncode == -signal.SIGKILL, f"the worker ended before the kill: {err[-2000:]}"
    return lines


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_at_random_moments_never_loses_nor_duplicates_results(hbase, unique, seed):
    rng = random.Random(seed)
    group, table, results = unique("g"), unique("offsets").replace("-", "_"), unique("results").replace("-", "_")
    topics = [unique("a"), unique("b")]
    conn = hbase.connection()
    try:
        conn.create_table(results, {"r": dict(max_versions=1)})
        args = [str(hbase.thrift_port), table, results, group, ",".join(topics), str(END), str(STEP)]
        starts: list[str] = []
        kills: list[str] = []
        # One kill in each window: results written but no commit; commit point passed but no
        # offsets rows; offsets rows written (before the next batch).
        for phase in ("results", "committed", "derived"):
            lines = _run(args, kill_at=(phase, rng.randint(1, 4)))
            starts += [line.split(" ", 1)[1] for line in lines if line.startswith("start")]
            kills.append(lines[-1])
        assert _run(args, kill_at=None)[-1] == "done"
        # Every record has exactly one result, whatever the crashes replayed.
        rows = dict(conn.table(results).scan())
        expected = {f"{t}:{p}:{o:020d}".encode(): f"{t}/{p}/{o}".encode()
                    for t in topics for p in (0, 1) for o in range(END)}
        assert {k: v[b"r:v"] for k, v in rows.items()} == expected
        store = OffsetStores.hbase(hbase.host, hbase.thrift_port, table=table)
        try:
            assert store.load(group) == {TopicPartition(t, p): END for t in topics for p in (0, 1)}
            history = store.history(group, limit=1000)
            for newer, older in zip(history, history[1:]):  # a gap-free chain of batches
                assert {r.topicPartition(): r.fromOffset for r in newer.ranges} == older.offsets()
            assert history[-1].ranges[0].fromOffset == 0
            offsets_table = conn.table(table)
            for t in topics:  # the guide's reversed scan agrees with the group cell
                prefix = offsets_row_prefix(t, group)
                [(_, newest)] = offsets_table.scan(row_start=prefix + b"\xff", row_stop=prefix, reverse=True,
                                                   limit=1)
                assert newest == {b"offsets:0": str(END).encode(), b"offsets:1": str(END).encode()}
        finally:
            store.close()
        # Where each SIGKILL landed (the worker's last line) and where each run resumed.
        print(json.dumps({"seed": seed, "killed_after": kills, "resumed_at": starts}))
    finally:
        conn.close()
