"""Checkpoints that hold data, not code: recovery with changed application code."""

from __future__ import annotations

import collections
import json
import os
import time
from typing import Any, Callable

import pytest
from pyspark import RDD, SparkContext

from dstream_kafka.errors import ConfigurationError, CorruptCheckpointError
from dstream_kafka.streaming import CheckpointLayout, InputDStream, StreamingContext
from dstream_kafka.checkpoint_fs import HadoopFileSystem, LocalFileSystem
from dstream_kafka.streaming.checkpoint_state import checkpoint_files

from support import wait_until

BATCH = 0.1
STATE_BATCH = 0.5  # stateful batches are slower; a longer interval keeps queues short


@pytest.fixture
def folder(tmp_path: Any) -> str:
    return str(tmp_path / "checkpoint")


class PositionSource(InputDStream[int]):
    """Emits its position per batch; checkpoints it and logs restores and starts."""

    def __init__(self, ssc: StreamingContext, log: list[Any]) -> None:
        super().__init__(ssc)
        self.log = log
        self.position = 0

    def start(self) -> None:
        self.log.append(("start", self.position))

    def compute(self, batch_time: int) -> RDD[int]:
        self.position += 1
        return self._sc.parallelize([self.position], 1)

    def checkpoint_data(self, batch_time: int) -> dict[str, Any]:
        return {"position": self.position, "time": batch_time}

    def restore_checkpoint_data(self, data: Any) -> None:
        self.log.append(("restore", data["position"]))
        self.position = data["position"]


def read_metadata(folder: str) -> dict[str, Any]:
    with open(os.path.join(folder, "metadata"), encoding="utf-8") as handle:
        return json.load(handle)


class TestGetOrCreate:
    def test_without_a_checkpoint_setup_runs_and_the_folder_is_set(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """getOrCreate calls setupFunc once and checkpoints into the folder."""
        calls: list[int] = []

        def setup() -> StreamingContext:
            calls.append(1)
            contexts.append(StreamingContext(sc, BATCH))
            return contexts[-1]

        ssc = StreamingContext.getOrCreate(folder, setup)
        assert calls == [1] and ssc.checkpoint_dir == folder
        assert not os.path.exists(os.path.join(folder, "metadata"))

    def test_setup_must_return_a_streaming_context(self, folder: str) -> None:
        """A setupFunc that returns something else is refused."""
        with pytest.raises(TypeError, match="should return a StreamingContext"):
            StreamingContext.getOrCreate(folder, lambda: None)  # type: ignore[arg-type,return-value]

    def test_a_stateless_graph_checkpoints_input_positions_every_batch(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """Without state, metadata is rewritten after each batch with the inputs' data."""
        ssc = StreamingContext(sc, BATCH)
        contexts.append(ssc)
        ssc.checkpoint(folder)
        source = PositionSource(ssc, [])
        source.foreachRDD(lambda rdd: None)
        ssc.start()
        wait_until(lambda: len(ssc.completed_batches) >= 3)
        ssc.stop(stopSparkContext=False)
        metadata = read_metadata(folder)
        last = ssc.completed_batches[-1].batch_time
        assert metadata["version"] == 1 and metadata["batch_duration_ms"] == 100
        assert metadata["checkpoint_time_ms"] == last
        assert metadata["next_batch_time_ms"] == last + 100
        assert metadata["inputs"][str(source.id)]["time"] == last
        assert metadata["streams"]["0"] == {"kind": "PositionSource", "slide_ms": 100}
        assert metadata["rdds"] == {} and (last - metadata["zero_time_ms"]) % 100 == 0

    def test_input_data_is_restored_before_the_input_starts(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """restore_checkpoint_data gets the last checkpointed data before start()."""
        log: list[Any] = []

        def setup() -> StreamingContext:
            ssc = StreamingContext(sc, BATCH)
            contexts.append(ssc)
            PositionSource(ssc, log).foreachRDD(lambda rdd: None)
            return ssc

        first = StreamingContext.getOrCreate(folder, setup)
        first.start()
        wait_until(lambda: len(first.completed_batches) >= 2)
        first.stop(stopSparkContext=False)
        saved = read_metadata(folder)["inputs"]["0"]["position"]
        log.clear()
        StreamingContext.getOrCreate(folder, setup).start()
        assert log[:2] == [("restore", saved), ("start", saved)]


def state_setup(sc: SparkContext, contexts: list[StreamingContext], data: list[list[str]],
                weight: int, states: list[dict[str, int]]) -> Callable[[], StreamingContext]:
    def setup() -> StreamingContext:
        ssc = StreamingContext(sc, STATE_BATCH)
        contexts.append(ssc)
        words = ssc.queueStream(collections.deque(data))
        counts = words.map(lambda w: (w, weight)).updateStateByKey(
            lambda values, state: sum(values) + (state or 0))
        counts.foreachRDD(lambda rdd: states.append(dict(rdd.collect())))
        return ssc
    return setup


class TestStateRecovery:
    def test_update_state_by_key_survives_a_restart_with_changed_code(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """The state after a graceful stop is restored into a graph built by new code."""
        states: list[dict[str, int]] = []
        first = StreamingContext.getOrCreate(
            folder, state_setup(sc, contexts, [["a", "b"], ["a"]], 1, states))
        first.start()
        wait_until(lambda: {"a": 2, "b": 1} in states)
        first.stop(stopSparkContext=False, stopGraceFully=True)

        states.clear()
        second = StreamingContext.getOrCreate(
            folder, state_setup(sc, contexts, [["a", "c"]], 10, states))
        second.start()
        wait_until(lambda: any("c" in s for s in states))
        assert next(s for s in states if "c" in s) == {"a": 12, "b": 1, "c": 10}

    def test_reduce_by_key_and_window_survives_a_restart(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """An incremental window keeps the values of batches from before the restart."""
        windows: list[dict[str, int]] = []

        def setup(data: list[list[str]]) -> Callable[[], StreamingContext]:
            def build() -> StreamingContext:
                ssc = StreamingContext(sc, 0.5)
                contexts.append(ssc)
                pairs = ssc.queueStream(collections.deque(data)).map(lambda w: (w, 1))
                pairs.reduceByKeyAndWindow(lambda a, b: a + b, lambda a, b: a - b, 60).foreachRDD(
                    lambda rdd: windows.append(dict(rdd.collect())))
                return ssc
            return build

        first = StreamingContext.getOrCreate(folder, setup([["a", "b"], ["a"]]))
        first.start()
        wait_until(lambda: {"a": 2, "b": 1} in windows)
        first.stop(stopSparkContext=False, stopGraceFully=True)

        windows.clear()
        StreamingContext.getOrCreate(folder, setup([["b"]])).start()
        wait_until(lambda: bool(windows))
        assert windows[0] == {"a": 2, "b": 2}

    def test_window_contents_survive_a_restart_with_changed_code(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """A window's earlier batches are restored; new batches use the new function."""
        windows: list[list[int]] = []

        def setup(data: list[list[int]], factor: int) -> Callable[[], StreamingContext]:
            def build() -> StreamingContext:
                ssc = StreamingContext(sc, 0.5)
                contexts.append(ssc)
                stream = ssc.queueStream(collections.deque(data)).map(lambda x: x * factor)
                stream.window(60).foreachRDD(lambda rdd: windows.append(sorted(rdd.collect())))
                return ssc
            return build

        first = StreamingContext.getOrCreate(folder, setup([[1, 2], [3]], 1))
        first.start()
        wait_until(lambda: [1, 2, 3] in windows)
        first.stop(stopSparkContext=False, stopGraceFully=True)

        windows.clear()
        StreamingContext.getOrCreate(folder, setup([[4]], 100)).start()
        wait_until(lambda: bool(windows))
        assert windows[0] == [1, 2, 3, 400]


class TestCheckpointSchedule:
    def test_state_is_saved_at_the_interval_not_every_batch(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """With state and the default ~10 s interval, short runs write no checkpoint
        until a graceful stop writes the final one."""
        states: list[dict[str, int]] = []
        ssc = StreamingContext.getOrCreate(folder, state_setup(sc, contexts, [["a"]], 1, states))
        ssc.start()
        wait_until(lambda: len(states) >= 3)
        assert not os.path.exists(os.path.join(folder, "metadata"))
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
        metadata = read_metadata(folder)
        assert metadata["checkpoint_time_ms"] == ssc.completed_batches[-1].batch_time
        assert list(metadata["rdds"]) == ["2"]

    def test_the_final_checkpoint_holds_the_inputs_data_of_the_last_batch(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """checkpoint_data runs before on_batch_completed, also for a graceful stop's final
        checkpoint, so a source may drop per-batch data in its completion hook."""
        class PerBatchSource(InputDStream[int]):
            def __init__(self, ssc: StreamingContext) -> None:
                super().__init__(ssc)
                self.until: dict[int, int] = {}

            def compute(self, batch_time: int) -> RDD[int]:
                self.until[batch_time] = len(self.until) + 1
                return self._sc.parallelize([1], 1)

            def checkpoint_data(self, batch_time: int) -> dict[str, int]:
                return {"until": self.until[batch_time], "time": batch_time}

            def on_batch_completed(self, batch_time: int, batch_info: Any) -> None:
                del self.until[batch_time]

        ssc = StreamingContext(sc, STATE_BATCH)
        contexts.append(ssc)
        ssc.checkpoint(folder)
        source = PerBatchSource(ssc)
        source.map(lambda x: (x, x)).updateStateByKey(
            lambda values, state: sum(values) + (state or 0)).foreachRDD(lambda rdd: None)
        ssc.start()
        wait_until(lambda: len(ssc.completed_batches) >= 2)
        ssc.stop(stopSparkContext=False, stopGraceFully=True)
        last = ssc.completed_batches[-1].batch_time
        assert read_metadata(folder)["inputs"][str(source.id)]["time"] == last

    def test_only_the_two_newest_checkpoints_keep_state_folders(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """Older state folders are deleted after each checkpoint."""
        ssc = StreamingContext(sc, BATCH)
        contexts.append(ssc)
        ssc.checkpoint(folder)
        state = ssc.queueStream([["a"]] * 10).map(lambda w: (w, 1)).updateStateByKey(
            lambda values, state: sum(values) + (state or 0)).checkpoint(BATCH)
        state.foreachRDD(lambda rdd: rdd.count())
        ssc.start()
        wait_until(lambda: len(ssc.completed_batches) >= 6)
        ssc.stop(stopSparkContext=False)
        layout = CheckpointLayout(folder)
        kept = sorted(int(name) for name in os.listdir(layout.state_path(state.id, 0)[:-2]))
        assert len(kept) == 2
        assert read_metadata(folder)["checkpoint_time_ms"] == kept[-1]


class TestRefusedRecoveries:
    def checkpoint_a_state_graph(self, sc: SparkContext, folder: str,
                                 contexts: list[StreamingContext]) -> None:
        states: list[dict[str, int]] = []
        ssc = StreamingContext.getOrCreate(folder, state_setup(sc, contexts, [["a"]], 1, states))
        ssc.start()
        wait_until(lambda: bool(states))
        ssc.stop(stopSparkContext=False, stopGraceFully=True)

    def test_a_changed_batch_duration_is_refused(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """A checkpoint cannot be recovered with another batch duration."""
        self.checkpoint_a_state_graph(sc, folder, contexts)
        with pytest.raises(ConfigurationError, match="batch duration of 500 ms"):
            StreamingContext.getOrCreate(folder, lambda: StreamingContext(sc, BATCH))

    def test_a_changed_graph_shape_is_refused(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """State goes back only into a stream of the same kind at the same position."""
        self.checkpoint_a_state_graph(sc, folder, contexts)

        def other_shape() -> StreamingContext:
            ssc = StreamingContext(sc, STATE_BATCH)
            contexts.append(ssc)
            ssc.queueStream([["a"]]).map(str).map(lambda w: (w, 1)).foreachRDD(lambda r: None)
            return ssc

        with pytest.raises(ConfigurationError, match="does not match the streaming graph"):
            StreamingContext.getOrCreate(folder, other_shape)

    def test_unreadable_metadata_is_a_corrupt_checkpoint(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """Truncated metadata raises CorruptCheckpointError."""
        os.makedirs(folder)
        with open(os.path.join(folder, "metadata"), "w", encoding="utf-8") as handle:
            handle.write('{"version": 1, "batch_dur')
        with pytest.raises(CorruptCheckpointError, match="not a valid streaming checkpoint"):
            StreamingContext.getOrCreate(folder, lambda: StreamingContext(sc, BATCH))

    def test_a_missing_state_folder_is_a_corrupt_checkpoint(
            self, sc: SparkContext, folder: str, contexts: list[StreamingContext]) -> None:
        """Metadata that references deleted state raises CorruptCheckpointError."""
        self.checkpoint_a_state_graph(sc, folder, contexts)
        checkpoint_files(sc, folder).delete(os.path.join(folder, "state"))
        with pytest.raises(CorruptCheckpointError, match="missing or incomplete"):
            StreamingContext.getOrCreate(
                folder, state_setup(sc, contexts, [["a"]], 1, []))


class TestCheckpointFiles:
    def test_the_layout_reserves_offsets_and_commits_folders(self) -> None:
        """Input streams find their log folders next to metadata and state."""
        layout = CheckpointLayout("hdfs://nn/app/")
        assert layout.metadata_path == "hdfs://nn/app/metadata"
        assert layout.offsets_dir == "hdfs://nn/app/offsets"
        assert layout.commits_dir == "hdfs://nn/app/commits"
        assert layout.state_path(3, 1500) == "hdfs://nn/app/state/3/1500"

    @pytest.mark.parametrize("through_hadoop", [False, True])
    def test_files_are_replaced_atomically_and_listed(
            self, sc: SparkContext, tmp_path: Any, through_hadoop: bool) -> None:
        """Local and Hadoop file access write, replace, list and delete alike."""
        files = (HadoopFileSystem(f"file://{tmp_path}", sc) if through_hadoop
                 else LocalFileSystem(f"file://{tmp_path}"))
        root = f"file://{tmp_path}/cp"
        files.write_text_atomic(f"{root}/metadata", "old")
        files.write_text_atomic(f"{root}/metadata", "new")
        files.mkdirs(f"{root}/state/1")
        assert files.read_text(f"{root}/metadata") == "new"
        assert [n for n in files.list_dir(root) if not n.startswith(".")] == ["metadata", "state"]
        files.delete(f"{root}/state")
        assert not files.exists(f"{root}/state") and files.read_text(f"{root}/nothing") is None
