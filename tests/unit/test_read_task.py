"""The executor task of a Kafka RDD loads on an executor without the driver-side modules."""

from __future__ import annotations

import json
import subprocess
import sys

from pyspark.accumulators import Accumulator
from pyspark.serializers import CloudPickleSerializer

from dstream_kafka.read.counters import COUNTERS, CacheCountersParam
from dstream_kafka.read.task import LostRanges, RangeTask, ReadSettings, partition_reader

# What an executor's Python worker does with a task's function: unpickle it in a fresh
# interpreter, then report which of the package's modules that imported.
_LOAD = ("import json, pickle, sys\n"
         "pickle.loads(sys.stdin.buffer.read())\n"
         "print(json.dumps(sorted(m for m in sys.modules if m.startswith('dstream_kafka'))))\n")


def _modules_loaded_by(function: object) -> list[str]:
    data = CloudPickleSerializer().dumps(function)
    done = subprocess.run([sys.executable, "-c", _LOAD], input=data, capture_output=True,
                          check=True)
    return list(json.loads(done.stdout))


def _reader() -> object:
    settings = ReadSettings(groupId="g", pollTimeoutMs=1000, failOnDataLoss=False)
    cache_counters = Accumulator(1, dict.fromkeys(COUNTERS, 0), CacheCountersParam())
    losses = Accumulator(2, [], LostRanges())
    return partition_reader({}, settings, [RangeTask(0, "t", 0, 0, 5)], cache_counters, losses)


def test_a_pickled_partition_reader_loads_without_the_driver_side_rdd_module():
    loaded = _modules_loaded_by(_reader())
    assert "dstream_kafka.read.task" in loaded
    assert "dstream_kafka.read.kafka_rdd" not in loaded


def test_a_pickled_partition_reader_loads_without_the_ui_package():
    loaded = _modules_loaded_by(_reader())
    assert "dstream_kafka.read.counters" in loaded
    assert [m for m in loaded if m.startswith("dstream_kafka.ui")] == []


def test_a_range_task_names_its_fields_and_unpacks_as_the_five_tuple():
    task = RangeTask(3, "t", 1, 10, 20)
    assert (task.split, task.topic, task.partition, task.fromOffset, task.untilOffset) == (
        3, "t", 1, 10, 20)
    index, topic, partition, start, until = task
    assert (index, topic, partition, start, until) == (3, "t", 1, 10, 20)
