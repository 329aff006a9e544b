"""Where the engine follows Spark's StreamingContext although it did not before: failed
batches of graphs without committed positions, and the SparkContext's checkpoint folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark import RDD

from dstream_kafka.streaming import InputDStream, StreamingContext

from support import wait_until

TIMEOUT = 90.0


def outputs(stream: Any) -> list[list[Any]]:
    """Collect the records of every non-empty batch of ``stream``."""
    batches: list[list[Any]] = []

    def keep(rdd: RDD[Any]) -> None:
        records = rdd.collect()
        if records:
            batches.append(records)

    stream.foreachRDD(keep)
    return batches


def failing_on_one() -> Any:
    """A function failing on 1, defined here so executors get it by value."""

    def fail_on_one(x: int) -> int:
        if x == 1:
            raise ValueError("batch of 1 fails")
        return x

    return fail_on_one


class CommittingSource(InputDStream[int]):
    """A source that commits positions (``failure_stops_context`` left at its default)."""

    def compute(self, batch_time: int) -> RDD[int]:
        return self._sc.parallelize([], 1)


class TestFailedBatches:
    def test_a_failed_output_of_a_queue_stream_is_reported_and_later_batches_run(
            self, ssc: StreamingContext) -> None:
        """As Spark: the batch fails, awaitTermination raises its error at once, the
        context stays active and later batches produce output."""
        results = outputs(ssc.queueStream([[0], [1], [2], [3]]).map(failing_on_one()))
        ssc.start()
        wait_until(lambda: len(results) >= 3, "the batches after the failed one")
        assert results[:3] == [[0], [2], [3]]
        started = time.monotonic()
        with pytest.raises(Exception, match="batch of 1 fails"):  # a Py4JJavaError
            ssc.awaitTerminationOrTimeout(TIMEOUT)
        assert time.monotonic() - started < TIMEOUT / 2
        assert ssc.getState() == "ACTIVE"
        with pytest.raises(Exception, match="batch of 1 fails"):
            ssc.awaitTermination(0.01)  # the error stays reported

    def test_a_failed_batch_generation_is_reported_and_later_batches_run(
            self, ssc: StreamingContext) -> None:
        """A transform function raising on the driver skips that batch only."""

        def check(rdd: RDD[int]) -> RDD[int]:
            if rdd.collect() == [1]:
                raise ValueError("generating the batch of 1 fails")
            return rdd

        results = outputs(ssc.queueStream([[0], [1], [2]]).transform(check))
        ssc.start()
        wait_until(lambda: len(results) >= 2, "the batch after the failed one")
        assert results[:2] == [[0], [2]]
        with pytest.raises(ValueError, match="generating the batch of 1 fails"):
            ssc.awaitTerminationOrTimeout(TIMEOUT)
        assert ssc.getState() == "ACTIVE"

    def test_a_failure_stops_a_context_with_a_source_that_commits_positions(
            self, ssc: StreamingContext) -> None:
        """One input that commits positions (as a Kafka stream) keeps the stopping rule for
        the whole graph: no later batch runs past the failed one."""
        results = outputs(ssc.queueStream([[0], [1], [2], [3]]).map(failing_on_one()))
        CommittingSource(ssc).foreachRDD(lambda rdd: None)
        ssc.start()
        with pytest.raises(Exception, match="batch of 1 fails"):  # a Py4JJavaError
            ssc.awaitTermination(TIMEOUT)
        assert ssc.getState() == "STOPPED"
        assert results == [[0]]


STATEFUL_PROGRAM = textwrap.dedent('''
    import json, operator, sys
    from pyspark import SparkContext
    from dstream_kafka.spark_settings import local_spark_conf
    from dstream_kafka.streaming import StreamingContext

    sc = SparkContext(conf=local_spark_conf("local[1]", "spark-checkpoint-dir"))
    sc.setLogLevel("ERROR")
    sc.setCheckpointDir(sys.argv[1])  # and no StreamingContext.checkpoint
    ssc = StreamingContext(sc, 0.2)
    words = ssc.queueStream([["a"], ["a", "b"], ["b"]])
    pairs = words.map(lambda w: (w, 1))
    results = {"state": [], "count": [], "values": [], "reduced": []}

    def keep(name):
        return lambda rdd: results[name].append(sorted(rdd.collect()))

    pairs.updateStateByKey(lambda vs, s: sum(vs) + (s or 0)).foreachRDD(keep("state"))
    words.countByWindow(0.4, 0.2).foreachRDD(keep("count"))
    words.countByValueAndWindow(0.4, 0.2).foreachRDD(keep("values"))
    pairs.reduceByKeyAndWindow(operator.add, operator.sub, 0.4, 0.2).foreachRDD(keep("reduced"))
    ssc.start()
    while len(results["reduced"]) < 3:
        ssc.awaitTerminationOrTimeout(0.1)
    ssc.stop(stopSparkContext=True, stopGraceFully=False)
    print("RESULT " + json.dumps({k: v[:3] for k, v in results.items()}), flush=True)
''')


def test_stateful_streams_start_with_only_the_spark_contexts_checkpoint_folder(
        tmp_path: Path) -> None:
    """updateStateByKey, countByWindow, countByValueAndWindow and reduceByKeyAndWindow with
    an inverse run when only SparkContext.setCheckpointDir was called (as Spark).

    A program of its own: a SparkContext's checkpoint folder cannot be unset, and other
    tests check the refusal without one on the shared SparkContext."""
    script = tmp_path / "program.py"
    script.write_text(STATEFUL_PROGRAM)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "rdd-checkpoints")],
                          capture_output=True, text=True, timeout=TIMEOUT * 2, cwd=os.getcwd())
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(next(line for line in done.stdout.splitlines()
                             if line.startswith("RESULT "))[len("RESULT "):])
    assert result == {
        "state": [[["a", 1]], [["a", 2], ["b", 1]], [["a", 2], ["b", 2]]],
        "count": [[1], [3], [3]],
        "values": [[["a", 1]], [["a", 2], ["b", 1]], [["a", 1], ["b", 2]]],
        "reduced": [[["a", 1]], [["a", 2], ["b", 1]], [["a", 1], ["b", 2]]],
    }
