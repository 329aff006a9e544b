"""Runs bounded ``createDataFrameStream`` runs and reports what their ``foreachBatch`` saw.

Usage: python dataframe_stream_probe.py <runs.json>   (``SPARK_REMOTE`` names the server)

In a child process for Spark Connect (test_dataframe_stream_connect.py); the classic tests call
:func:`run_all` in-process with a classic session. ``runs.json`` holds ``{"bootstrap": ...,
"runs": [{"topic", "group", "store", "maxOffsetsPerTrigger", "fail", "transaction",
"stopAfter"}, ...]}``
(``store`` a store URI); the runs go one after the other. For each it reports: per batch, the
``batch_id``, its rows (partition, offset, value) and what the store held while ``func`` ran;
the store's offsets after the run; its progress records (JSON); the error that stopped it (class and message), if any; with
``transaction``, the rows func wrote to the SQLite store's database in ``stream.transaction``.
Runs are bounded (``endingOffsets=latest``) except with ``stopAfter``: unbounded, func stops the
stream once that many records were seen.
Prints one JSON list.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any


def run_stream(spark: Any, bootstrap: str, run: dict[str, Any]) -> dict[str, Any]:
    from dstream_kafka import ConsumerStrategies
    from dstream_kafka.sql import createDataFrameStream
    from dstream_kafka.stores.uri import open_store

    params = {"bootstrap.servers": bootstrap, "group.id": run["group"],
              "auto.offset.reset": "earliest"}
    topic = run["topic"]
    batches: list[dict[str, Any]] = []
    stop_after = run.get("stopAfter")  # an unbounded stream, stopped from func at that count
    stream = createDataFrameStream(
        spark, ConsumerStrategies.Subscribe([topic], params), 0.2,
        offsetStore=open_store(run["store"]),
        maxOffsetsPerTrigger=run.get("maxOffsetsPerTrigger"),
        options=None if stop_after else {"endingOffsets": "latest"})

    def func(df: Any, batch_id: int) -> None:
        rows = [[r.partition, r.offset, bytes(r.value).decode()]
                for r in df.select("partition", "offset", "value").collect()]
        batches.append({"batch_id": batch_id, "rows": sorted(rows), "stored": _stored(run)})
        if run.get("transaction"):
            with stream.transaction(batch_id) as tx:
                tx.execute("CREATE TABLE IF NOT EXISTS seen (p INTEGER, o INTEGER, v TEXT)")
                tx.executemany("INSERT INTO seen VALUES (?, ?, ?)", rows)
        if run.get("fail") and rows:
            raise RuntimeError("func failed on purpose")
        if stop_after and sum(len(b["rows"]) for b in batches) >= stop_after:
            stream.stop()

    stream.foreachBatch(func).start()
    error = None
    try:
        finished = stream.awaitTermination(300)
    except Exception as exc:  # the point: which error stopped the stream
        finished, error = True, [type(exc).__name__, str(exc)]
    stream.stop()
    out = {"batches": batches, "stored": _stored(run), "error": error, "finished": finished,
           "progress": [json.loads(p.json()) for p in stream.recentProgress]}
    if run.get("transaction"):
        import sqlite3

        with sqlite3.connect(run["store"][len("sqlite:///"):]) as db:
            out["written"] = [list(r) for r in db.execute("SELECT p, o, v FROM seen ORDER BY p, o")]
    return out


def _stored(run: dict[str, Any]) -> dict[str, int]:
    """What ``run``'s store holds now, read through a store of its own."""
    from dstream_kafka.stores.uri import open_store

    with open_store(run["store"]) as look:
        return {str(tp.partition): o for tp, o in look.load(run["group"], [run["topic"]]).items()}


def run_all(spark: Any, spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [run_stream(spark, spec["bootstrap"], run) for run in spec["runs"]]


def main() -> None:
    from pyspark.sql import SparkSession

    spec = json.loads(open(sys.argv[1]).read())
    spark = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
    out = run_all(spark, spec)
    for result in out:
        result["session"] = type(spark).__module__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
