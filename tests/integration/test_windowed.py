"""Window operations on the real local Spark.

Batch ``i`` of a queueStream holds input ``i``; a window of ``w`` batches at batch ``i``
covers inputs ``i-w+1 .. i``, and with a slide of ``s`` batches windows exist at the
batches where ``(i + 1) % s == 0``. Expected values are computed in plain Python.
"""

from __future__ import annotations

import functools
import operator
from collections import Counter
from typing import Any

import pytest
from pyspark import SparkContext

from dstream_kafka.errors import ConfigurationError
from dstream_kafka.streaming import StreamingContext
from dstream_kafka.streaming.windowed import ReducedWindowedDStream

import support
from support import wait_until

BATCH = 0.1
DATA = [[1, 2], [3], [4, 5, 6], [7]]
WORDS = [["a", "b", "a"], ["b"], ["c", "a"], []]

# windows with an inverse function need a checkpoint folder: the ssc fixture sets one
pytestmark = pytest.mark.checkpointed
# a window's records come in no fixed order, so each batch is compared sorted
collect = functools.partial(support.collect, sort_each=True)


def windows(data: list[list[Any]], width: int, slide: int, count: int) -> list[list[Any]]:
    """The records of each window, in plain Python."""
    padded = data + [[]] * (count * slide + width)
    return [[x for batch in padded[max(0, i - width + 1):i + 1] for x in batch]
            for i in range(len(padded)) if (i + 1) % slide == 0][:count]


class TestWindow:
    def test_window_unions_the_batches_inside_it(self, ssc: StreamingContext) -> None:
        """window(3 batches) holds the records of the last three batches."""
        result = collect(ssc, ssc.queueStream(DATA).window(BATCH * 3), 6)
        assert result == [sorted(w) for w in windows(DATA, 3, 1, 6)]

    def test_window_with_a_longer_slide_skips_batches(self, ssc: StreamingContext) -> None:
        """A slide of two batches produces a window every second batch."""
        result = collect(ssc, ssc.queueStream(DATA).window(BATCH * 3, BATCH * 2), 3)
        assert result == [sorted(w) for w in windows(DATA, 3, 2, 3)]

    def test_window_duration_must_be_a_multiple_of_the_batch(
            self, ssc: StreamingContext) -> None:
        """A window that is not a whole number of batches is refused (PySpark's message)."""
        with pytest.raises(ConfigurationError, match="windowDuration must be multiple of the "
                                                     "parent dstream's slide"):
            ssc.queueStream(DATA).window(BATCH * 2.5)

    def test_slide_duration_must_be_a_multiple_of_the_batch(
            self, ssc: StreamingContext) -> None:
        """A slide that is not a whole number of batches is refused."""
        with pytest.raises(ConfigurationError, match="slideDuration must be multiple"):
            ssc.queueStream(DATA).window(BATCH * 2, BATCH * 1.5)

    def test_group_by_key_and_window_groups_values_over_the_window(
            self, ssc: StreamingContext) -> None:
        """groupByKeyAndWindow gives each key's values over the window."""
        pairs = [[(w, 1) for w in batch] for batch in WORDS]
        stream = ssc.queueStream(pairs).groupByKeyAndWindow(BATCH * 2, BATCH)
        result = collect(ssc, stream.mapValues(len), 5)
        assert result == [sorted(Counter(k for k, _ in w).items())
                          for w in windows(pairs, 2, 1, 5)]


class TestReduceByWindow:
    def test_reduce_by_window_without_inverse_reduces_each_window(
            self, ssc: StreamingContext) -> None:
        """reduceByWindow without an inverse reduces the window's records."""
        stream = ssc.queueStream(DATA).reduceByWindow(operator.add, None, BATCH * 3, BATCH)
        assert collect(ssc, stream, 6) == [[sum(w)] for w in windows(DATA, 3, 1, 6)]

    def test_reduce_by_window_with_inverse_matches_the_plain_sums(
            self, ssc: StreamingContext) -> None:
        """With an inverse the sums are the same; an emptied window keeps the value 0."""
        stream = ssc.queueStream(DATA).reduceByWindow(operator.add, operator.sub,
                                                      BATCH * 3, BATCH)
        assert collect(ssc, stream, 7) == [[sum(w)] for w in windows(DATA, 3, 1, 7)]

    def test_count_by_window_counts_the_records_of_each_window(
            self, ssc: StreamingContext) -> None:
        """countByWindow counts the records in each window."""
        stream = ssc.queueStream(DATA).countByWindow(BATCH * 3, BATCH)
        assert collect(ssc, stream, 7) == [[len(w)] for w in windows(DATA, 3, 1, 7)]

    def test_count_by_value_and_window_drops_values_that_left(
            self, ssc: StreamingContext) -> None:
        """countByValueAndWindow counts distinct values; values that left disappear."""
        stream = ssc.queueStream(WORDS).countByValueAndWindow(BATCH * 2, BATCH)
        assert collect(ssc, stream, 6) == [sorted(Counter(w).items())
                                           for w in windows(WORDS, 2, 1, 6)]


class TestReduceByKeyAndWindow:
    PAIRS = [[(w, len(w) + i) for w in batch] for i, batch in enumerate(WORDS)]

    def expected(self, width: int, slide: int, count: int) -> list[list[tuple[str, int]]]:
        result = []
        for window in windows(self.PAIRS, width, slide, count):
            sums: Counter[str] = Counter()
            for k, v in window:
                sums[k] += v
            result.append(sorted(sums.items()))
        return result

    def test_without_inverse_each_window_is_reduced(self, ssc: StreamingContext) -> None:
        """Without invFunc each window's values per key are reduced."""
        stream = ssc.queueStream(self.PAIRS).reduceByKeyAndWindow(
            operator.add, None, BATCH * 2, BATCH)
        assert collect(ssc, stream, 5) == self.expected(2, 1, 5)

    def test_with_inverse_windows_are_computed_incrementally(
            self, ssc: StreamingContext, monkeypatch: pytest.MonkeyPatch) -> None:
        """With invFunc each window derives from the previous one and gives the same sums."""
        merges: list[int] = []
        original = ReducedWindowedDStream._merge

        def counting_merge(self: Any, *args: Any) -> Any:
            merges.append(1)
            return original(self, *args)

        monkeypatch.setattr(ReducedWindowedDStream, "_merge", counting_merge)
        stream = ssc.queueStream(self.PAIRS).reduceByKeyAndWindow(
            operator.add, operator.sub, BATCH * 3, BATCH,
            filterFunc=lambda kv: kv[1] != 0)
        assert collect(ssc, stream, 7) == self.expected(3, 1, 7)
        assert len(merges) >= 5

    def test_with_inverse_keys_reduced_to_zero_stay_without_filter(
            self, ssc: StreamingContext) -> None:
        """Without filterFunc a key whose values all left stays with the inverse's result."""
        stream = ssc.queueStream([[("k", 5)]]).reduceByKeyAndWindow(
            operator.add, operator.sub, BATCH * 2, BATCH)
        assert collect(ssc, stream, 3) == [[("k", 5)], [("k", 5)], [("k", 0)]]

    def test_with_a_longer_slide(self, ssc: StreamingContext) -> None:
        """A slide of two batches combines the previous window with two new batches."""
        stream = ssc.queueStream(self.PAIRS).reduceByKeyAndWindow(
            operator.add, operator.sub, BATCH * 4, BATCH * 2, filterFunc=lambda kv: kv[1] > 0)
        assert collect(ssc, stream, 4) == self.expected(4, 2, 4)

    def test_window_rdds_are_cached_and_locally_checkpointed(
            self, ssc: StreamingContext) -> None:
        """Each window RDD is cached and marked for local checkpointing."""
        marks: list[tuple[bool, bool]] = []
        stream = ssc.queueStream(self.PAIRS).reduceByKeyAndWindow(
            operator.add, operator.sub, BATCH * 2, BATCH)
        stream.foreachRDD(lambda rdd: marks.append(
            (rdd.is_cached, rdd.isLocallyCheckpointed())))
        ssc.start()
        wait_until(lambda: len(marks) >= 3)
        assert marks[:3] == [(True, True)] * 3

    def test_with_inverse_needs_a_checkpoint_directory(self, sc: SparkContext) -> None:
        """Starting without StreamingContext.checkpoint is refused (Spark's message)."""
        ssc = StreamingContext(sc, BATCH)
        ssc.queueStream(self.PAIRS).reduceByKeyAndWindow(
            operator.add, operator.sub, BATCH * 2).foreachRDD(lambda rdd: None)
        try:
            with pytest.raises(ConfigurationError, match="The checkpoint directory has not "
                                                         "been set"):
                ssc.start()
        finally:
            ssc.stop(stopSparkContext=False)
