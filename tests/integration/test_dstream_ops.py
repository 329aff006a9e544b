"""Every basic DStream operation, driven by queueStream on the real local Spark.

Expected values are computed in plain Python. Input batch ``i`` of a queueStream is the
stream's batch ``i``, so outputs are compared batch by batch.
"""

from __future__ import annotations

import operator
import os
import time
from datetime import datetime, timedelta
from typing import Any, Callable

import pytest
from pyspark import RDD, SparkContext

from dstream_kafka.errors import ConfigurationError, StreamingStateError
from dstream_kafka.streaming import DStream, StreamingContext
from dstream_kafka.streaming.dstream import takes_time

from support import collect, wait_until

BATCH = 0.1
TIMEOUT = 90.0


def run(ssc: StreamingContext, data: list[list[Any]], op: Callable[[DStream[Any]], DStream[Any]],
        sort: bool = True) -> list[list[Any]]:
    result = collect(ssc, op(ssc.queueStream(data)), len(data))
    return [sorted(batch) for batch in result] if sort else result


DATA = [[1, 2, 3, 4], [5, 6], [7]]
PAIRS = [[("a", 1), ("b", 2), ("a", 3)], [("b", 4), ("c", 5)], [("a", 6)]]


class TestElementwise:
    def test_map_applies_the_function_to_every_record(self, ssc: StreamingContext) -> None:
        """map transforms each record."""
        assert run(ssc, DATA, lambda s: s.map(lambda x: x * 10)) == [
            [x * 10 for x in b] for b in DATA]

    def test_flat_map_flattens_the_results(self, ssc: StreamingContext) -> None:
        """flatMap emits every element of each returned iterable."""
        assert run(ssc, DATA, lambda s: s.flatMap(lambda x: [x, -x])) == [
            sorted(y for x in b for y in (x, -x)) for b in DATA]

    def test_filter_keeps_matching_records(self, ssc: StreamingContext) -> None:
        """filter keeps records for which the predicate is true."""
        assert run(ssc, DATA, lambda s: s.filter(lambda x: x % 2)) == [
            [x for x in b if x % 2] for b in DATA]

    def test_map_partitions_runs_once_per_partition(self, ssc: StreamingContext,
                                                    sc: SparkContext) -> None:
        """mapPartitions sees each partition's records together."""
        data = [sc.parallelize([1, 2, 3, 4], 2)]
        assert run(ssc, data, lambda s: s.mapPartitions(lambda it: [sum(it)])) == [[3, 7]]

    def test_map_partitions_with_index_passes_the_index(self, ssc: StreamingContext,
                                                        sc: SparkContext) -> None:
        """mapPartitionsWithIndex passes the partition index."""
        data = [sc.parallelize(["x", "y"], 2)]
        result = run(ssc, data, lambda s: s.mapPartitionsWithIndex(
            lambda i, it: [(i, v) for v in it]))
        assert result == [[(0, "x"), (1, "y")]]

    def test_map_values_keeps_keys(self, ssc: StreamingContext) -> None:
        """mapValues transforms values only."""
        assert run(ssc, PAIRS, lambda s: s.mapValues(lambda v: v + 100)) == [
            sorted((k, v + 100) for k, v in b) for b in PAIRS]

    def test_flat_map_values_repeats_the_key(self, ssc: StreamingContext) -> None:
        """flatMapValues emits one pair per returned value."""
        assert run(ssc, PAIRS, lambda s: s.flatMapValues(lambda v: range(v % 3))) == [
            sorted((k, x) for k, v in b for x in range(v % 3)) for b in PAIRS]

    def test_glom_turns_partitions_into_lists(self, ssc: StreamingContext,
                                              sc: SparkContext) -> None:
        """glom gives one list per partition."""
        data = [sc.parallelize([1, 2, 3, 4], 2)]
        assert run(ssc, data, lambda s: s.glom()) == [[[1, 2], [3, 4]]]

    def test_repartition_sets_the_number_of_partitions(self, ssc: StreamingContext) -> None:
        """repartition gives each RDD exactly numPartitions partitions."""
        assert run(ssc, DATA, lambda s: s.repartition(3).glom().map(lambda p: 1),
                   sort=False) == [[1, 1, 1]] * 3


class TestAggregations:
    def test_reduce_gives_one_record_per_non_empty_batch(self, ssc: StreamingContext) -> None:
        """reduce folds each batch into one record."""
        assert run(ssc, DATA + [[]], lambda s: s.reduce(operator.add)) == [
            [sum(b)] for b in DATA] + [[]]

    def test_count_counts_records_and_gives_zero_for_an_empty_batch(
            self, ssc: StreamingContext) -> None:
        """count emits one number per batch, 0 for an empty batch (Spark's count)."""
        assert run(ssc, DATA + [[]], lambda s: s.count()) == [[len(b)] for b in DATA] + [[0]]

    def test_reduce_by_key_merges_values_per_key(self, ssc: StreamingContext) -> None:
        """reduceByKey merges the values of each key within a batch."""
        def expected(batch: list[tuple[str, int]]) -> list[tuple[str, int]]:
            out: dict[str, int] = {}
            for k, v in batch:
                out[k] = out.get(k, 0) + v
            return sorted(out.items())
        assert run(ssc, PAIRS, lambda s: s.reduceByKey(operator.add)) == [
            expected(b) for b in PAIRS]

    def test_combine_by_key_builds_combiners(self, ssc: StreamingContext) -> None:
        """combineByKey creates, merges and combines per-key combiners."""
        result = run(ssc, PAIRS, lambda s: s.combineByKey(
            lambda v: [v], lambda c, v: c + [v], lambda a, b: a + b).mapValues(sorted))
        assert result == [
            sorted({k: sorted(v for kk, v in b if kk == k) for k, _ in b}.items())
            for b in PAIRS]

    def test_group_by_key_groups_values(self, ssc: StreamingContext) -> None:
        """groupByKey gives every value of a key."""
        result = run(ssc, PAIRS, lambda s: s.groupByKey().mapValues(sorted))
        assert result == [
            sorted({k: sorted(v for kk, v in b if kk == k) for k, _ in b}.items())
            for b in PAIRS]

    def test_count_by_value_counts_distinct_records(self, ssc: StreamingContext) -> None:
        """countByValue counts each distinct record per batch."""
        data = [["a", "b", "a"], ["c"]]
        assert run(ssc, data, lambda s: s.countByValue()) == [[("a", 2), ("b", 1)], [("c", 1)]]

    def test_partition_by_places_keys_by_the_partition_function(
            self, ssc: StreamingContext) -> None:
        """partitionBy puts key k into partition partitionFunc(k) % numPartitions."""
        data = [[(0, "a"), (1, "b"), (2, "c"), (3, "d")]]
        result = run(ssc, data, lambda s: s.partitionBy(2, lambda k: k).glom(), sort=False)
        assert [sorted(p) for p in result[0]] == [[(0, "a"), (2, "c")], [(1, "b"), (3, "d")]]


class TestTwoStreams:
    LEFT = [[("a", 1), ("b", 2)], [("c", 3)]]
    RIGHT = [[("a", "x"), ("d", "y")], [("c", "z"), ("c", "w")]]

    def both(self, ssc: StreamingContext,
             op: Callable[[DStream[Any], DStream[Any]], DStream[Any]]) -> list[list[Any]]:
        stream = op(ssc.queueStream(self.LEFT), ssc.queueStream(self.RIGHT))
        return [sorted(b) for b in collect(ssc, stream, 2)]

    def test_union_merges_two_streams(self, ssc: StreamingContext) -> None:
        """union gives the records of both streams per batch."""
        result = self.both(ssc, lambda a, b: a.union(b).map(repr))
        assert result == [sorted(map(repr, x + y)) for x, y in zip(self.LEFT, self.RIGHT)]

    def test_join_pairs_matching_keys(self, ssc: StreamingContext) -> None:
        """join keeps keys present on both sides."""
        assert self.both(ssc, lambda a, b: a.join(b)) == [
            [("a", (1, "x"))], [("c", (3, "w")), ("c", (3, "z"))]]

    def test_left_outer_join_keeps_every_left_key(self, ssc: StreamingContext) -> None:
        """leftOuterJoin pairs missing right values with None."""
        assert self.both(ssc, lambda a, b: a.leftOuterJoin(b)) == [
            [("a", (1, "x")), ("b", (2, None))], [("c", (3, "w")), ("c", (3, "z"))]]

    def test_right_outer_join_keeps_every_right_key(self, ssc: StreamingContext) -> None:
        """rightOuterJoin pairs missing left values with None."""
        assert self.both(ssc, lambda a, b: a.rightOuterJoin(b)) == [
            [("a", (1, "x")), ("d", (None, "y"))], [("c", (3, "w")), ("c", (3, "z"))]]

    def test_full_outer_join_keeps_every_key(self, ssc: StreamingContext) -> None:
        """fullOuterJoin keeps keys of both sides."""
        result = self.both(ssc, lambda a, b: a.fullOuterJoin(b))
        assert result == [[("a", (1, "x")), ("b", (2, None)), ("d", (None, "y"))],
                          [("c", (3, "w")), ("c", (3, "z"))]]

    def test_cogroup_groups_both_sides(self, ssc: StreamingContext) -> None:
        """cogroup gives both sides' values per key."""
        result = self.both(ssc, lambda a, b: a.cogroup(b).mapValues(
            lambda vs: (sorted(vs[0]), sorted(vs[1]))))
        assert result == [[("a", ([1], ["x"])), ("b", ([2], [])), ("d", ([], ["y"]))],
                          [("c", ([3], ["w", "z"]))]]

    def test_transform_with_combines_the_rdds_of_both_streams(
            self, ssc: StreamingContext) -> None:
        """transformWith gets the two RDDs of each batch."""
        assert self.both(ssc, lambda a, b: a.transformWith(
            lambda x, y: x.keys().union(y.keys()), b)) == [["a", "a", "b", "d"], ["c", "c", "c"]]

    def test_transform_with_may_take_the_time(self, ssc: StreamingContext) -> None:
        """A three-argument transformWith function gets the batch time first."""
        seen: list[datetime] = []

        def func(t: datetime, x: RDD[Any], y: RDD[Any]) -> RDD[Any]:
            seen.append(t)
            return x.union(y).keys()

        assert self.both(ssc, lambda a, b: a.transformWith(func, b))[0] == ["a", "a", "b", "d"]
        assert isinstance(seen[0], datetime)

    def test_context_union_merges_several_streams(self, ssc: StreamingContext) -> None:
        """StreamingContext.union merges any number of streams."""
        streams = [ssc.queueStream([[i]]) for i in range(3)]
        assert [sorted(b) for b in collect(ssc, ssc.union(*streams), 1)] == [[0, 1, 2]]

    def test_context_transform_gets_the_list_of_rdds(self, ssc: StreamingContext) -> None:
        """StreamingContext.transform passes the RDDs of all streams as a list."""
        streams = [ssc.queueStream([[1, 2]]), ssc.queueStream([[10]])]
        stream = ssc.transform(streams, lambda rdds: rdds[0].cartesian(rdds[1]))
        assert [sorted(b) for b in collect(ssc, stream, 1)] == [[(1, 10), (2, 10)]]

    def test_streams_with_different_slides_cannot_be_combined(
            self, ssc: StreamingContext) -> None:
        """union of streams with different slide durations is refused."""
        a = ssc.queueStream([[1]])
        with pytest.raises(ConfigurationError, match="same slide duration"):
            a.union(a.window(BATCH * 2, BATCH * 2))


class TestOutputOperations:
    def test_foreach_rdd_accepts_a_function_of_the_rdd(self, ssc: StreamingContext) -> None:
        """A one-argument foreachRDD function gets the RDD."""
        seen: list[Any] = []
        ssc.queueStream([[1, 2]]).foreachRDD(lambda rdd: seen.append(rdd.collect()))
        ssc.start()
        wait_until(lambda: len(seen) >= 1)
        assert sorted(seen[0]) == [1, 2]

    def test_foreach_rdd_passes_the_batch_time_as_a_datetime(
            self, ssc: StreamingContext) -> None:
        """A two-argument function gets consecutive batch times as local datetimes."""
        times: list[datetime] = []
        ssc.queueStream([[1]]).foreachRDD(lambda t, rdd: times.append(t))
        ssc.start()
        wait_until(lambda: len(times) >= 3)
        assert all(isinstance(t, datetime) for t in times)
        assert times[1] - times[0] == timedelta(seconds=BATCH) == times[2] - times[1]
        assert times[0].microsecond % 100_000 == 0

    def test_foreach_rdd_runs_on_empty_batches(self, ssc: StreamingContext) -> None:
        """Output operations run for empty batches too."""
        sizes: list[int] = []
        ssc.queueStream([]).foreachRDD(lambda rdd: sizes.append(rdd.count()))
        ssc.start()
        wait_until(lambda: len(sizes) >= 2)
        assert sizes[:2] == [0, 0]

    def test_pprint_prints_in_pyspark_format(self, ssc: StreamingContext,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        """pprint prints dashes, the time, up to num records and '...' when there are more."""
        times: list[datetime] = []
        stream = ssc.queueStream([list(range(12)), []])
        stream.foreachRDD(lambda t, rdd: times.append(t))
        stream.pprint(10)
        ssc.start()
        wait_until(lambda: len(times) >= 3)
        ssc.stop(stopSparkContext=False)
        dashes = "-" * 43
        expected = [dashes, f"Time: {times[0]}", dashes, *map(str, range(10)), "...", "",
                    dashes, f"Time: {times[1]}", dashes, ""]
        assert capsys.readouterr().out.splitlines()[:len(expected)] == expected

    def test_save_as_text_files_writes_a_folder_per_batch(
            self, ssc: StreamingContext, tmp_path: Any) -> None:
        """saveAsTextFiles writes prefix-<batch ms>.suffix per batch."""
        times: list[datetime] = []
        stream = ssc.queueStream([["a", "b"], ["c"]])
        stream.saveAsTextFiles(str(tmp_path / "out"), "txt")
        stream.foreachRDD(lambda t, rdd: times.append(t))
        ssc.start()
        wait_until(lambda: len(times) >= 2)
        ssc.stop(stopSparkContext=False)
        ms = int(round(times[0].timestamp() * 1000))
        folder = tmp_path / f"out-{ms}.txt"
        lines = sorted(line for name in os.listdir(folder) if name.startswith("part-")
                       for line in (folder / name).read_text().splitlines())
        assert lines == ["a", "b"]

    def test_transform_applies_an_rdd_function(self, ssc: StreamingContext) -> None:
        """transform applies a function of the RDD per batch."""
        assert run(ssc, DATA, lambda s: s.transform(lambda rdd: rdd.map(lambda x: -x))) == [
            sorted(-x for x in b) for b in DATA]

    def test_transform_may_take_the_time(self, ssc: StreamingContext) -> None:
        """A two-argument transform function gets the batch time first."""
        result = run(ssc, DATA[:1], lambda s: s.transform(
            lambda t, rdd: rdd.map(lambda x: (x, t.year))))
        assert result == [[(x, datetime.now().year) for x in DATA[0]]]

    def test_transform_returning_a_non_rdd_fails_the_batch(
            self, ssc: StreamingContext) -> None:
        """A transform function must return an RDD or None."""
        ssc.queueStream([[1]]).transform(lambda rdd: [1]).foreachRDD(lambda rdd: None)
        ssc.start()
        with pytest.raises(TypeError, match="should return an RDD"):
            ssc.awaitTerminationOrTimeout(TIMEOUT)


class TestPersistence:
    def test_cache_persists_generated_rdds(self, ssc: StreamingContext) -> None:
        """A cached stream's RDDs are persisted at MEMORY_ONLY."""
        levels: list[Any] = []
        stream = ssc.queueStream([[1]]).map(lambda x: x).cache()
        stream.foreachRDD(lambda rdd: levels.append(rdd.getStorageLevel()))
        ssc.start()
        wait_until(lambda: len(levels) >= 1)
        assert levels[0].useMemory and not levels[0].useDisk

    def test_checkpoint_interval_must_be_a_multiple_of_the_slide(
            self, ssc: StreamingContext) -> None:
        """A checkpoint interval that is not a multiple of the slide is refused."""
        with pytest.raises(ConfigurationError, match="not a multiple of its slide time"):
            ssc.queueStream([[1]]).checkpoint(BATCH * 1.5)

    def test_checkpoint_truncates_the_lineage_at_the_interval(
            self, ssc: StreamingContext) -> None:
        """Every RDD at the checkpoint interval is marked for local checkpointing."""
        marks: list[bool] = []
        stream = ssc.queueStream([[1]]).map(lambda x: x).checkpoint(BATCH)
        stream.foreachRDD(lambda rdd: marks.append(rdd.isLocallyCheckpointed()))
        ssc.start()
        wait_until(lambda: len(marks) >= 2)
        assert marks[:2] == [True, True]

    def test_persist_after_start_is_refused(self, ssc: StreamingContext) -> None:
        """The storage level cannot change once the context runs."""
        stream = ssc.queueStream([[1]])
        stream.foreachRDD(lambda rdd: None)
        ssc.start()
        with pytest.raises(StreamingStateError):
            stream.cache()

    def test_slice_returns_the_remembered_rdds(self, ssc: StreamingContext) -> None:
        """slice returns the RDDs generated between two times, within remember."""
        times: list[datetime] = []
        stream = ssc.queueStream([[1], [2], [3]])
        stream.foreachRDD(lambda t, rdd: times.append(t))
        ssc.remember(10)
        ssc.start()
        wait_until(lambda: len(times) >= 3)
        rdds = stream.slice(times[0], times[2])
        assert [rdd.collect() for rdd in rdds] == [[1], [2], [3]]

    def test_slice_before_start_is_refused(self, ssc: StreamingContext) -> None:
        """slice needs a started context."""
        with pytest.raises(StreamingStateError, match="has not been initialized"):
            ssc.queueStream([[1]]).slice(0, 1)


class TestFunctionForms:
    def test_one_argument_functions_do_not_take_the_time(self) -> None:
        """A function of one argument is called with the RDD only."""
        assert takes_time(lambda rdd: None, 1, "f") is False

    def test_two_argument_functions_take_the_time(self) -> None:
        """A function of two arguments is called with the time and the RDD."""
        assert takes_time(lambda t, rdd: None, 1, "f") is True

    def test_defaults_and_star_args_follow_pyspark(self) -> None:
        """With defaults or *args the declared positional count decides, as in PySpark."""
        assert takes_time(lambda rdd, extra=None: None, 1, "f") is True
        assert takes_time(lambda *args: None, 1, "f") is True
        assert takes_time(lambda rdd, *args: None, 1, "f") is False

    def test_methods_and_callables_are_inspected(self) -> None:
        """Bound methods and callable objects are inspected without self."""
        class Sink:
            def __call__(self, t: Any, rdd: Any) -> None:
                pass

            def one(self, rdd: Any) -> None:
                pass

        assert takes_time(Sink(), 1, "f") is True
        assert takes_time(Sink().one, 1, "f") is False

    def test_functions_of_the_wrong_arity_are_refused(self) -> None:
        """A function that takes neither form raises TypeError."""
        with pytest.raises(TypeError, match="should take 1 or 2 arguments"):
            takes_time(lambda a, b, c: None, 1, "foreachRDD function")
