"""Spark Connect edges, run in a child process (a Connect session in the test process could
switch PySpark's ``is_remote`` for the classic SparkContext the suite shares).

Usage: python connect_edge_probe.py <spec.json>   (``SPARK_REMOTE`` names the server)

``{"case": "unreachable"}``: every entry point that takes a session, on the session of
``SPARK_REMOTE`` (where nothing listens); reports per call the error's class, message and
seconds. ``{"case": "dies-in-func", "bootstrap", "topic", "store", "killed"}``: a
``createDataFrameStream`` of 0.5 s batches whose func, on the first batch with records, prints
``in-func``, waits for the file ``killed`` (the test kills the server meanwhile) and counts the
DataFrame; the main thread then calls ``stop()`` and reports how long it took and what the
store holds. Prints one JSON object as its last line, then ends the process at once (PySpark
would retry releasing an unreachable session at exit for minutes).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable


def _timed(call: Callable[[], Any]) -> dict[str, Any]:
    began = time.monotonic()
    try:
        call()
        error: list[str] | None = None
    except Exception as exc:  # the point: which error, how fast
        error = [type(exc).__name__, str(exc)]
    return {"error": error, "seconds": time.monotonic() - began}


def unreachable(spark: Any) -> dict[str, Any]:
    from dstream_kafka import ConsumerStrategies, KafkaUtils, OffsetRange
    from dstream_kafka.sql import createDataFrameStream

    params = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}
    return {
        "createDataFrame": _timed(lambda: KafkaUtils.createDataFrame(
            spark, params, [OffsetRange("t", 0, 0, 1)])),
        "createDataFrameFromOptions": _timed(lambda: KafkaUtils.createDataFrameFromOptions(
            spark, {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"})),
        "createDataFrameStream": _timed(lambda: createDataFrameStream(
            spark, ConsumerStrategies.Subscribe(["t"], params), 1.0)),
    }


def dies_in_func(spark: Any, spec: dict[str, Any]) -> dict[str, Any]:
    from dstream_kafka import ConsumerStrategies
    from dstream_kafka.sql import createDataFrameStream, offsetRanges
    from dstream_kafka.stores.uri import open_store

    topic, group = spec["topic"], f"{spec['topic']}-g"
    params = {"bootstrap.servers": spec["bootstrap"], "group.id": group,
              "auto.offset.reset": "earliest"}
    stream = createDataFrameStream(spark, ConsumerStrategies.Subscribe([topic], params), 0.5,
                                   offsetStore=open_store(spec["store"]))
    inside = threading.Event()

    def func(df: Any, batch_id: int) -> None:
        if not any(r.count() for r in offsetRanges(df)):
            return
        inside.set()
        print("in-func", flush=True)
        while not Path(spec["killed"]).exists():
            time.sleep(0.05)
        df.count()  # the server is gone: PySpark retries for minutes

    stream.foreachBatch(func).start()
    assert inside.wait(300), "no batch with records"
    while not Path(spec["killed"]).exists():
        time.sleep(0.05)
    result = _timed(stream.stop)
    result["stopTimeout"] = stream.stopTimeout
    result["stored"] = {str(tp.partition): o for tp, o in
                        open_store(spec["store"]).load(group, [topic]).items()}
    return result


def main() -> None:
    from pyspark.sql import SparkSession

    spec = json.loads(Path(sys.argv[1]).read_text())
    spark = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
    result = unreachable(spark) if spec["case"] == "unreachable" else dies_in_func(spark, spec)
    print(json.dumps(result), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
