"""Run in a subprocess by test_frame_spark_connect.py: a Spark Connect client of the tests' Connect server.

Usage: python connect_probe.py <cases.json>   (``SPARK_REMOTE`` names the server)

A child process: a Connect session in the suite's own process could switch PySpark to Connect
mode for the classic SparkContext the suite shares. ``cases.json`` holds ``{"bootstrap": ...,
"topic": ..., "ranges": [[topic, partition, from, until], ...]}``; prints one JSON object:

* ``ours`` / ``spark``: schema and rows of ``KafkaUtils.createDataFrame`` and of Spark's own
  ``spark.read.format("kafka")`` (the server has the connector jars) on those ranges, and the
  number of Spark partitions of ours;
* ``options``: rows of ``createDataFrameFromOptions(subscribe, includeHeaders)``;
* ``refused``: for each RDD-only call given the Connect session, the error's class and message.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

from kafka_dataframe_probe import _rows, _spark_read


def _refusal(call: Callable[[], Any]) -> list[str]:
    try:
        call()
    except Exception as exc:  # the point: which error, with which message
        return [type(exc).__name__, str(exc)]
    return ["no error", ""]


def main() -> None:
    from pyspark.sql import SparkSession
    from pyspark.sql.functions import spark_partition_id

    from dstream_kafka import KafkaUtils, OffsetRange
    from dstream_kafka.sql import offsetRanges
    from dstream_kafka.streaming import StreamingContext

    spec = json.loads(open(sys.argv[1]).read())
    spark = SparkSession.builder.remote(os.environ["SPARK_REMOTE"]).getOrCreate()
    params = {"bootstrap.servers": spec["bootstrap"], "group.id": "connect-probe"}
    ranges = [OffsetRange(*r) for r in spec["ranges"]]
    out: dict[str, Any] = {"session": type(spark).__module__}

    theirs = _spark_read(spark, spec["bootstrap"], {"ranges": spec["ranges"],
                                                    "includeHeaders": True, "params": {}})
    out["spark"] = {"schema": theirs.schema.json(), "rows": _rows(theirs)}
    ours = KafkaUtils.createDataFrame(spark, params, ranges, includeHeaders=True)
    out["ours"] = {"schema": ours.schema.json(), "rows": _rows(ours),
                   "partitions": ours.select(spark_partition_id()).distinct().count(),
                   "offsetRanges": [[r.topic, r.partition, r.fromOffset, r.untilOffset]
                                    for r in offsetRanges(ours)]}
    by_options = KafkaUtils.createDataFrameFromOptions(
        spark, params, subscribe=spec["topic"], includeHeaders="true")
    out["options"] = {"rows": _rows(by_options.orderBy("partition", "offset"))}

    out["refused"] = {
        "createRDD": _refusal(lambda: KafkaUtils.createRDD(spark, params, ranges)),
        "createRDDFromOptions": _refusal(
            lambda: KafkaUtils.createRDDFromOptions(spark, params, subscribe=spec["topic"])),
        "StreamingContext": _refusal(lambda: StreamingContext(spark, 1)),
        "createDirectStream": _refusal(lambda: KafkaUtils.createDirectStream(spark, None, None)),
    }
    print(json.dumps(out))
    spark.stop()


if __name__ == "__main__":
    main()
