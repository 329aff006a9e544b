"""updateStateByKey on the real local Spark.

Batch ``i`` of a queueStream holds input ``i``; the expected states are computed in plain
Python. The inputs and the sorted collect are test_windowed.py's.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest
from pyspark import SparkContext

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.streaming import StreamingContext

from support import wait_until
from test_windowed import BATCH, WORDS, collect

# state needs a checkpoint folder: the ssc fixture sets one
pytestmark = pytest.mark.checkpointed


def running_counts(batches: list[list[str]]) -> list[list[tuple[str, int]]]:
    total: Counter[str] = Counter()
    result = []
    for batch in batches:
        total.update(batch)
        result.append(sorted(total.items()))
    return result


class TestUpdateStateByKey:
    def test_state_accumulates_across_batches(self, ssc: StreamingContext) -> None:
        """The state of each key is carried from batch to batch."""
        stream = ssc.queueStream(WORDS).map(lambda w: (w, 1)).updateStateByKey(
            lambda values, state: sum(values) + (state or 0))
        assert collect(ssc, stream, 4) == running_counts(WORDS)

    def test_returning_none_removes_the_key(self, ssc: StreamingContext) -> None:
        """A key whose update returns None disappears from the state."""
        stream = ssc.queueStream(WORDS).map(lambda w: (w, 1)).updateStateByKey(
            lambda values, state: None if values == [] else sum(values) + (state or 0))
        result = collect(ssc, stream, 3)
        # "a" got no value in batch 1 and was removed, so batch 2 starts it again at 1.
        assert result == [[("a", 2), ("b", 1)], [("b", 2)], [("a", 1), ("c", 1)]]

    def test_update_runs_for_keys_without_new_values(self, ssc: StreamingContext) -> None:
        """Every key with a state is updated each batch, with an empty list of values."""
        stream = ssc.queueStream([["x"], [], []]).map(lambda w: (w, 1)).updateStateByKey(
            lambda values, state: (state or []) + [len(values)])
        assert collect(ssc, stream, 3) == [[("x", [1])], [("x", [1, 0])], [("x", [1, 0, 0])]]

    def test_state_starts_from_the_initial_rdd(self, ssc: StreamingContext,
                                               sc: SparkContext) -> None:
        """initialRDD gives the state before the first batch."""
        stream = ssc.queueStream(WORDS).map(lambda w: (w, 1)).updateStateByKey(
            lambda values, state: sum(values) + (state or 0),
            initialRDD=sc.parallelize([("a", 100), ("z", 7)]))
        expected = [sorted((Counter({"a": 100, "z": 7}) + Counter(dict(c))).items())
                    for c in running_counts(WORDS)]
        assert collect(ssc, stream, 4) == expected

    def test_state_lineage_does_not_grow(self, ssc: StreamingContext) -> None:
        """Each state RDD is locally checkpointed, so its lineage stays the same depth."""
        # Depth = the RDDs the debug string names. Its length in characters is no measure: the
        # cached-blocks line appears only once the block manager has reported the blocks.
        depths: list[int] = []
        stream = ssc.queueStream([["a"]] * 10).map(lambda w: (w, 1)).updateStateByKey(
            lambda values, state: sum(values) + (state or 0))
        stream.foreachRDD(lambda rdd: (rdd.count(), depths.append(
            len(re.findall(r"RDD\[\d+\]", rdd.toDebugString().decode())))))
        ssc.start()
        wait_until(lambda: len(depths) >= 8)
        assert depths[7] <= depths[2], depths

    def test_state_needs_a_checkpoint_directory(self, sc: SparkContext) -> None:
        """updateStateByKey without StreamingContext.checkpoint cannot start."""
        ssc = StreamingContext(sc, BATCH)
        ssc.queueStream(WORDS).map(lambda w: (w, 1)).updateStateByKey(
            lambda values, state: 0).foreachRDD(lambda rdd: None)
        try:
            with pytest.raises(ConfigurationError, match="checkpoint directory has not been"):
                ssc.start()
        finally:
            ssc.stop(stopSparkContext=False)
