"""The checkpoint store's files: write-ahead log, corrupt files, retention, fencing by claims.

Every test runs on a local path and on a ``file://`` URI through Spark's Hadoop FileSystem.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dstream_kafka.errors import CorruptCheckpointError, OffsetFencedError, OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import CheckpointOffsetStore, OffsetStores

G = "group-1"


def r(partition: int, start: int, end: int) -> OffsetRange:
    return OffsetRange("events", partition, start, end)


@pytest.fixture(params=["local", "hadoop"])
def cp(request: pytest.FixtureRequest, tmp_path) -> Any:
    """``(make_store, folder)``: stores over one checkpoint directory and its local folder."""
    folder = tmp_path / "checkpoint"
    stores: list[CheckpointOffsetStore] = []
    if request.param == "local":
        location: str = str(folder)
        extra: dict[str, Any] = {}
    else:
        location, extra = folder.as_uri(), {"spark_context": request.getfixturevalue("sc")}

    def make(**kwargs: Any) -> CheckpointOffsetStore:
        store = OffsetStores.checkpoint(location, **extra, **kwargs)
        stores.append(store)
        return store

    yield make, folder
    for store in stores:
        store.close()


def names(folder: Path, sub: str) -> list[str]:
    return sorted(n for n in os.listdir(folder / sub) if not n.startswith("."))


def damage_file(path: Path, data: bytes) -> None:
    """Replace a file behind the store's back; drop Hadoop's checksum so the parser sees it."""
    path.write_bytes(data)
    (path.parent / f".{path.name}.crc").unlink(missing_ok=True)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_write_ahead_log_gives_back_the_planned_batch_until_it_is_committed(cp):
    make, folder = cp
    store = make()
    store.commit(G, 1_000, [r(0, 0, 10), r(1, 0, 5)])
    planned = [r(1, 5, 9), r(0, 10, 20), r(2, 0, 0)]  # RDD partition order is kept as is
    store.plan(G, 2_000, planned)
    assert names(folder, "offsets") == ["1000", "2000"]  # a commit made unplanned writes its own
    assert (folder / "offsets" / "2000").read_text().startswith("v1\n{")
    # The driver dies before the output; a new driver finds the batch to re-run.
    restarted = make()
    assert restarted.load(G) == {TopicPartition("events", 0): 10, TopicPartition("events", 1): 5}
    pending = restarted.pending(G)
    assert pending is not None and pending.batch_time_ms == 2_000
    assert list(pending.ranges) == planned
    restarted.plan(G, 2_000, planned)  # re-planning the same batch is fine
    restarted.plan(G, 2_000, planned + [r(3, 7, 7)])  # ... also with a new empty partition
    with pytest.raises(OffsetFencedError, match="already holds other ranges"):
        restarted.plan(G, 2_000, [r(1, 5, 9), r(0, 10, 21)])
    restarted.commit(G, 2_000, planned)
    assert restarted.pending(G) is None and make().pending(G) is None


def test_the_oldest_uncommitted_batch_is_pending_first(cp):
    make, _ = cp
    store = make()
    store.plan(G, 1_000, [r(0, 0, 10)])
    store.plan(G, 2_000, [r(0, 10, 20)])
    assert make().pending(G).batch_time_ms == 1_000
    store.commit(G, 1_000, [r(0, 0, 10)])
    assert make().pending(G).batch_time_ms == 2_000


CORRUPTIONS = {
    "truncated": (lambda data: data[: len(data) // 2], "invalid or truncated"),
    "empty": (lambda data: b"", "empty (truncated)"),
    "invalid-json": (lambda data: b"v1\n{\"group_id\": nope}\n", "invalid or truncated"),
    "not-an-object": (lambda data: b"v1\n[1, 2]\n", "not an object"),
    "no-version": (lambda data: data.split(b"\n", 1)[1], "format version v1"),
    "binary": (lambda data: b"\xff\xfe\x00garbage", "not UTF-8"),
    "missing-keys": (lambda data: b"v1\n{\"group_id\": \"group-1\"}\n", "missing keys"),
    "newer-version": (lambda data: b"v2" + data[2:], "written by a newer dstream_kafka"),
}


@pytest.mark.parametrize("kind", sorted(CORRUPTIONS))
def test_a_corrupt_commit_file_is_named_and_nothing_is_reset(cp, kind):
    make, folder = cp
    store = make()
    store.commit(G, 1_000, [r(0, 0, 10)])
    store.commit(G, 2_000, [r(0, 10, 20)])
    damage, expected = CORRUPTIONS[kind]
    target = folder / "commits" / "2000"
    damage_file(target, damage(target.read_bytes()))
    before = snapshot(folder)
    restarted = make()
    for call in (lambda: restarted.load(G), lambda: restarted.commit(G, 3_000, [r(0, 20, 30)]),
                 lambda: restarted.pending(G), lambda: restarted.history(G)):
        with pytest.raises(CorruptCheckpointError) as caught:
            call()
        message = str(caught.value)
        assert "commits/2000" in message and expected in message
        if kind != "newer-version":
            assert "restore the file" in message and "remove it" in message
    assert snapshot(folder) == before  # nothing was rewritten, reset or "repaired"


@pytest.mark.parametrize("kind", ["truncated", "invalid-json", "newer-version"])
def test_a_corrupt_write_ahead_file_is_named(cp, kind):
    make, folder = cp
    store = make()
    store.plan(G, 1_000, [r(0, 0, 10)])
    damage, expected = CORRUPTIONS[kind]
    target = folder / "offsets" / "1000"
    damage_file(target, damage(target.read_bytes()))
    with pytest.raises(CorruptCheckpointError, match=expected) as caught:
        make().pending(G)
    assert "offsets/1000" in str(caught.value)


def test_a_corrupt_data_loss_record_is_named(cp):
    make, folder = cp
    store = make()
    store.commit(G, 1_000, [r(0, 0, 10)])
    store.record_data_loss(G, TopicPartition("events", 0), 10, 20, None)
    [name] = names(folder, "data_loss")
    damage_file(folder / "data_loss" / name, b"v1\n{\"trunc")
    with pytest.raises(CorruptCheckpointError, match=f"data_loss/{name}"):
        make().load(G)


def test_a_file_changed_behind_hadoops_checksum_is_reported_as_corrupt(request, tmp_path):
    folder = tmp_path / "checkpoint"
    store = OffsetStores.checkpoint(folder.as_uri(), spark_context=request.getfixturevalue("sc"))
    store.commit(G, 1_000, [r(0, 0, 10)])
    target = folder / "commits" / "1000"
    target.write_bytes(target.read_bytes().replace(b'"untilOffset":10', b'"untilOffset":99'))
    with pytest.raises(CorruptCheckpointError, match="commits/1000 is corrupt: .*Hadoop checksum"):
        OffsetStores.checkpoint(folder.as_uri()).load(G)


def test_retention_keeps_the_newest_batches_and_never_the_uncommitted_ones(cp):
    make, folder = cp
    store = make(keep_batches=5)
    for i in range(1, 31):
        store.plan(G, i * 1_000, [r(0, i - 1, i)])
        store.commit(G, i * 1_000, [r(0, i - 1, i)])
    store.plan(G, 31_000, [r(0, 30, 31)])
    commits = [int(n) for n in names(folder, "commits") if n.isdigit()]
    assert 5 <= len(commits) <= 15 and max(commits) == 30_000
    assert commits == sorted(commits)[-len(commits):] and min(commits) >= 16_000
    offsets = [int(n) for n in names(folder, "offsets")]
    assert 31_000 in offsets and min(offsets) >= min(commits)
    restarted = make(keep_batches=5)
    assert restarted.load(G) == {TopicPartition("events", 0): 30}
    assert restarted.pending(G).batch_time_ms == 31_000
    assert [h.batch_time_ms for h in restarted.history(G, limit=3)] == [30_000, 29_000, 28_000]


def test_a_second_driver_is_fenced_by_the_commit_claim(cp):
    make, folder = cp
    first, second = make(), make()
    first.commit(G, 1_000, [r(0, 0, 10)])
    assert second.load(G) == {TopicPartition("events", 0): 10}
    first.commit(G, 2_000, [r(0, 10, 20)])
    # The second driver's clock differs and its view is stale; the claim on "after 1000" fences it.
    with pytest.raises(OffsetFencedError, match="stored offset 20, batch expects 10"):
        second.commit(G, 2_500, [r(0, 10, 15)])
    assert names(folder, "commits") == ["1000", "1000.next", "2000", "start.next"]
    # Batch times must move forward.
    with pytest.raises(OffsetFencedError, match="already committed batch 2000"):
        first.commit(G, 1_500, [r(0, 20, 30)])


def test_a_crash_between_claim_and_commit_file_is_resumed_by_the_same_batch(cp):
    make, folder = cp
    store = make()
    store.commit(G, 1_000, [r(0, 0, 10)])
    store.commit(G, 2_000, [r(0, 10, 20)])
    (folder / "commits" / "2000").unlink()  # as if the driver died right after claiming
    restarted = make()
    assert restarted.load(G) == {TopicPartition("events", 0): 10}
    restarted.commit(G, 2_000, [r(0, 10, 20)])  # the re-run of the same batch goes through
    assert make().load(G) == {TopicPartition("events", 0): 20}
    other = make()
    (folder / "commits" / "2000").unlink()
    with pytest.raises(OffsetFencedError, match="already claimed"):
        other.commit(G, 2_001, [r(0, 10, 20)])


def test_a_checkpoint_directory_belongs_to_one_group(cp):
    make, _ = cp
    make().commit(G, 1_000, [r(0, 0, 10)])
    with pytest.raises(OffsetStoreError, match="holds the offsets of group 'group-1', not 'other'"):
        make().load("other")


def test_streaming_checkpoint_files_in_the_same_directory_are_left_alone(cp):
    make, folder = cp
    folder.mkdir(parents=True)
    (folder / "metadata").write_text('{"id": "x"}')
    (folder / "state").mkdir()
    (folder / "state" / "0").write_text("s")
    store = make(keep_batches=1)
    for i in range(1, 15):
        store.commit(G, i, [r(0, i - 1, i)])
    assert (folder / "metadata").read_text() == '{"id": "x"}' and (folder / "state" / "0").read_text() == "s"
