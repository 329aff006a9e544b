"""stores/checkpoint.py refusing what it cannot trust (issue #18, items 2 and 9; issue #37, item 2):
a checkpoint folder it cannot write (a real read-only bind mount, a full tmpfs) and commit or plan
files edited by hand that contradict themselves, their predecessor or the offsets log.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka.errors import CorruptCheckpointError, OffsetStoreError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.stores import OffsetStores

from support import G, r


# -- item 9: checkpoint folders the store cannot write ---------------------------------------------


def test_a_checkpoint_store_on_a_read_only_file_system_raises_offset_store_error(read_only):
    store = OffsetStores.checkpoint(read_only / "checkpoint")
    with pytest.raises(OffsetStoreError, match=r"(?s)ro/checkpoint.*read-only"):
        store.load(G)


def test_a_checkpoint_store_in_an_existing_read_only_folder_raises_offset_store_error(read_only):
    store = OffsetStores.checkpoint(read_only / "existing")
    with pytest.raises(OffsetStoreError, match=r"(?s)ro/existing.*read-only"):
        store.load(G)


def test_a_checkpoint_store_under_a_regular_file_raises_offset_store_error(tmp_path):
    (tmp_path / "file").write_text("x")
    store = OffsetStores.checkpoint(tmp_path / "file" / "checkpoint")
    with pytest.raises(OffsetStoreError, match=r"(?s)file/checkpoint.*not a directory"):
        store.load(G)


def test_a_checkpoint_store_at_a_regular_file_raises_offset_store_error(tmp_path):
    (tmp_path / "file").write_text("x")
    store = OffsetStores.checkpoint(tmp_path / "file")
    with pytest.raises(OffsetStoreError, match="not a directory"):
        store.load(G)


def test_a_checkpoint_store_whose_commits_folder_is_a_file_raises_offset_store_error(tmp_path):
    (tmp_path / "cp").mkdir()
    (tmp_path / "cp" / "commits").write_text("x")
    store = OffsetStores.checkpoint(tmp_path / "cp")
    with pytest.raises(OffsetStoreError, match="commits"):
        store.load(G)


def test_a_full_file_system_fails_the_commit_with_offset_store_error_and_keeps_the_last_commit(tiny_fs):
    store = OffsetStores.checkpoint(tiny_fs / "checkpoint")
    store.commit(G, 1000, [r(0, 5)])
    filler = tiny_fs / "filler"
    with pytest.raises(OSError):  # fill the file system to the last block
        with open(filler, "wb") as f:
            while True:
                f.write(b"x" * 4096)
                f.flush()
    ranges = [r(5, 9, partition=p, topic="t" * 200) for p in range(64)] + [r(5, 9)]
    with pytest.raises(OffsetStoreError, match="No space left"):
        store.commit(G, 2000, ranges)
    filler.unlink()
    assert OffsetStores.checkpoint(tiny_fs / "checkpoint").load(G) == {TopicPartition("events", 0): 5}


# -- item 2: a commit file that contradicts itself, its predecessor or the offsets log -------------

def _edit(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Hand-edit a checkpoint store file: version line, then the JSON document."""
    version, _, body = path.read_text().partition("\n")
    doc = json.loads(body)
    change(doc)
    path.write_text(f"{version}\n{json.dumps(doc)}\n")


@pytest.fixture
def committed(tmp_path: Path) -> Path:
    """A checkpoint directory whose stream planned and committed batches 1000 and 2000 over
    events-0 [0, 10) then [10, 20), with events-1 at 7 since batch 1000."""
    folder = tmp_path / "checkpoint"
    store = OffsetStores.checkpoint(folder)
    for t, ranges in ((1000, [r(0, 10), r(0, 7, partition=1)]), (2000, [r(10, 20)])):
        store.plan(G, t, ranges)
        store.commit(G, t, ranges)
    store.close()
    return folder


@pytest.mark.parametrize("offset", [28, 5], ids=["ahead-skips-records", "behind-re-reads-records"])
def test_a_commit_file_whose_offsets_contradict_its_own_ranges_is_refused(committed, offset):
    _edit(committed / "commits" / "2000", lambda doc: doc["offsets"]["events"].update({"0": offset}))
    with pytest.raises(CorruptCheckpointError,
                       match=r"(?s)commits/2000.*topic events partition 0.*own range ends at 20"):
        OffsetStores.checkpoint(committed).load(G)


def test_a_commit_file_whose_ranges_and_offsets_agree_but_contradict_the_offsets_log_is_refused(committed):
    def change(doc: dict[str, Any]) -> None:
        doc["ranges"][0]["untilOffset"] = 28
        doc["offsets"]["events"]["0"] = 28

    _edit(committed / "commits" / "2000", change)
    with pytest.raises(CorruptCheckpointError, match=r"(?s)commits/2000.*offsets/2000"):
        OffsetStores.checkpoint(committed).load(G)


def test_a_commit_file_that_changes_a_partition_outside_its_batch_is_refused(committed):
    _edit(committed / "commits" / "2000", lambda doc: doc["offsets"]["events"].update({"1": 2}))
    with pytest.raises(CorruptCheckpointError, match=r"(?s)commits/2000.*topic events partition 1.*commits/1000"):
        OffsetStores.checkpoint(committed).load(G)


def test_a_commit_file_that_drops_a_partition_of_its_predecessor_is_refused(committed):
    _edit(committed / "commits" / "2000", lambda doc: doc["offsets"]["events"].pop("1"))
    with pytest.raises(CorruptCheckpointError, match=r"(?s)commits/2000.*topic events partition 1"):
        OffsetStores.checkpoint(committed).load(G)


def test_deleting_every_commit_file_while_the_offsets_log_remains_is_refused(committed):
    for path in (committed / "commits").iterdir():
        path.unlink()
    store = OffsetStores.checkpoint(committed)
    with pytest.raises(CorruptCheckpointError, match=r"(?s)checkpoint/commits.*offsets/2000.*never reset"):
        store.load(G)
    with pytest.raises(CorruptCheckpointError):
        store.pending(G)


def test_deleting_a_commit_file_a_later_plan_follows_is_refused(committed):
    OffsetStores.checkpoint(committed).plan(G, 3000, [r(20, 25)])
    (committed / "commits" / "2000").unlink()
    with pytest.raises(CorruptCheckpointError, match=r"(?s)offsets/3000.*batch 2000.*commits/1000"):
        OffsetStores.checkpoint(committed).load(G)


def test_deleting_only_the_newest_commit_file_re_runs_its_batch_from_the_offsets_log(committed):
    # Indistinguishable from a crash between the plan and the commit: at-least-once re-run.
    (committed / "commits" / "2000").unlink()
    store = OffsetStores.checkpoint(committed)
    assert store.load(G) == {TopicPartition("events", 0): 10, TopicPartition("events", 1): 7}
    assert store.pending(G).ranges == (r(10, 20),)


def test_a_first_batch_planned_but_never_committed_is_still_pending(tmp_path):
    store = OffsetStores.checkpoint(tmp_path / "checkpoint")
    store.plan(G, 1000, [r(0, 10)])
    restarted = OffsetStores.checkpoint(tmp_path / "checkpoint")
    assert restarted.load(G) == {}
    assert restarted.pending(G).ranges == (r(0, 10),)


def test_a_batch_planned_before_the_previous_commit_is_still_pending_after_a_crash(tmp_path):
    store = OffsetStores.checkpoint(tmp_path / "checkpoint")
    store.plan(G, 1000, [r(0, 10)])
    store.plan(G, 2000, [r(10, 15)])  # generated while batch 1000 ran
    store.commit(G, 1000, [r(0, 10)])
    restarted = OffsetStores.checkpoint(tmp_path / "checkpoint")
    assert restarted.load(G) == {TopicPartition("events", 0): 10}
    assert restarted.pending(G).ranges == (r(10, 15),)


def test_a_commit_after_a_recorded_data_loss_passes_the_cross_check(tmp_path):
    store = OffsetStores.checkpoint(tmp_path / "checkpoint")
    store.commit(G, 1000, [r(0, 10)])
    store.record_data_loss(G, TopicPartition("events", 0), 10, 40, batch_time_ms=2000)
    store.plan(G, 2000, [r(40, 45)])
    store.commit(G, 2000, [r(40, 45)])
    assert OffsetStores.checkpoint(tmp_path / "checkpoint").load(G) == {TopicPartition("events", 0): 45}


# -- issue #37 item 2: the checkpoint store applies the chain rule of the other stores -------------

def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def empty_newest(committed: Path) -> Path:
    """``committed`` plus an empty batch 3000, events-0 [20, 20), planned and committed."""
    store = OffsetStores.checkpoint(committed)
    store.plan(G, 3000, [r(20, 20)])
    store.commit(G, 3000, [r(20, 20)])
    store.close()
    return committed


def _skip_to_28(doc: dict[str, Any]) -> None:
    doc["ranges"][0].update(fromOffset=28, untilOffset=28)
    if "offsets" in doc:
        doc["offsets"]["events"]["0"] = 28


@pytest.mark.parametrize("files", [["commits"], ["commits", "offsets"]], ids=["commit", "commit-and-plan"])
def test_an_empty_newest_commit_edited_to_skip_records_is_refused_and_nothing_changes(empty_newest, files):
    for folder in files:
        _edit(empty_newest / folder / "3000", _skip_to_28)
    before = _snapshot(empty_newest)
    store = OffsetStores.checkpoint(empty_newest)
    for call in (lambda: store.load(G), lambda: store.pending(G), lambda: store.commit(G, 4000, [r(28, 30)])):
        with pytest.raises(CorruptCheckpointError) as caught:
            call()
        message = str(caught.value)
        assert re.search(r"commits/3000 is corrupt: topic events partition 0: its range starts at 28, but "
                         r"\S*commits/2000 ended at 20", message), message
        assert f"dstream-kafka offsets history --store checkpoint:{empty_newest} --group {G}" in message
        assert "restore the file" in message and "no offset was reset" in message
    assert _snapshot(empty_newest) == before
    # The command it names shows the commits as stored.
    assert [(h.batch_time_ms, h.ranges) for h in store.history(G, 2)] == [(3000, (r(28, 28),)),
                                                                        (2000, (r(10, 20),))]


def test_a_plan_file_edited_away_from_its_commit_is_refused(empty_newest):
    _edit(empty_newest / "offsets" / "3000", _skip_to_28)
    with pytest.raises(CorruptCheckpointError,
                       match=r"(?s)commits/3000 is corrupt: its ranges are not those planned in \S*offsets/3000 "
                             r"\(topic events partition 0: planned \[28, 28\), committed \[20, 20\)\)"):
        OffsetStores.checkpoint(empty_newest).load(G)


def test_a_newest_commit_whose_write_ahead_file_is_missing_is_refused(committed):
    (committed / "offsets" / "2000").unlink()
    before = _snapshot(committed)
    with pytest.raises(CorruptCheckpointError,
                       match=r"(?s)commits/2000 is corrupt: its write-ahead file \S*offsets/2000 is missing.*"
                             r"offsets history"):
        OffsetStores.checkpoint(committed).load(G)
    assert _snapshot(committed) == before


def test_a_commit_made_without_a_plan_writes_its_own_write_ahead_file(tmp_path):
    # Imports, resets and commits through the API plan nothing; the store plans them itself.
    folder = tmp_path / "checkpoint"
    store = OffsetStores.checkpoint(folder)
    store.commit(G, 1000, [r(0, 10)])
    store.reset(G, {TopicPartition("events", 0): 4}, expected={TopicPartition("events", 0): 10},
                user="u", host="h", batch_time_ms=2000)
    assert sorted(os.listdir(folder / "offsets")) == ["1000", "2000"]
    assert OffsetStores.checkpoint(folder).load(G) == {TopicPartition("events", 0): 4}


def test_an_import_that_stopped_before_its_commit_file_is_never_re_run_as_a_batch(committed):
    # The import wrote its write-ahead file, then died: a stream restart must not read the
    # records it meant to skip as a batch (a stream's own plan would be re-run).
    store = OffsetStores.checkpoint(committed)
    store.commit(G, 3000, [r(20, 28)])
    store.close()
    for name in ("3000", "2000.next"):
        (committed / "commits" / name).unlink()
    restarted = OffsetStores.checkpoint(committed)
    assert restarted.load(G) == {TopicPartition("events", 0): 20, TopicPartition("events", 1): 7}
    assert restarted.pending(G) is None


def test_a_newest_commit_of_0_1_0_without_a_write_ahead_file_is_still_read(committed):
    # 0.1.0 wrote no write-ahead file for imports and resets, and no "planned" key.
    _edit(committed / "commits" / "2000", lambda doc: doc.pop("planned"))
    (committed / "offsets" / "2000").unlink()
    assert OffsetStores.checkpoint(committed).load(G) == {TopicPartition("events", 0): 20,
                                                          TopicPartition("events", 1): 7}
