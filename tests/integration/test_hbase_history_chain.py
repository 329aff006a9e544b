"""HBase store: the group cell's offsets must be where its last batch left them, and that batch
must continue the history row before it; a hand-edited cell is refused at load, not taken."""

from __future__ import annotations

import json
from typing import Any, Callable, Iterator

import pytest

from dstream_kafka.errors import OffsetStoreError
from dstream_kafka.offsets import OffsetRange, TopicPartition
from dstream_kafka.stores import OffsetStores
from dstream_kafka.stores.hbase_keys import group_row_key

T0 = 1_700_000_000_000  # epoch ms: 13 digits, as the history row keys hold them


class _Group:
    """A group that committed 0-12 (batch T0) and 12-20 (batch T0+1000) in its own table."""

    def __init__(self, hbase: Any, table: str, group: str, topic: str) -> None:
        self.hbase, self.table, self.group, self.topic = hbase, table, group, topic
        self.tp = TopicPartition(topic, 0)

    def r(self, a: int, b: int) -> OffsetRange:
        return OffsetRange(self.topic, 0, a, b)

    def store(self) -> Any:
        return OffsetStores.hbase(self.hbase.host, self.hbase.thrift_port, table=self.table,
                                  also_commit_to_kafka_group=False)

    def edit_cell(self, change: Callable[[dict[str, Any]], None]) -> None:
        conn = self.hbase.connection()
        try:
            table = conn.table(self.table)
            doc = json.loads(table.row(group_row_key(self.group))[b"meta:commit"])
            change(doc)
            table.put(group_row_key(self.group), {b"meta:commit": json.dumps(doc).encode()})
        finally:
            conn.close()


@pytest.fixture
def group(hbase: Any, unique: Callable[[str], str]) -> Iterator[_Group]:
    g = _Group(hbase, unique("offsets").replace("-", "_"), unique("g"), unique("t"))
    with g.store() as store:
        store.commit(g.group, T0, [g.r(0, 12)])
        store.commit(g.group, T0 + 1000, [g.r(12, 20)])
    yield g


def _offsets_28(doc: dict[str, Any]) -> None:  # the offsets the next batch starts at
    doc["offsets"] = {k: {"0": 28} for k in doc["offsets"]}


def test_a_group_cell_whose_offsets_were_moved_by_hand_is_refused_at_load(group: _Group) -> None:
    group.edit_cell(_offsets_28)
    with group.store() as store, pytest.raises(
            OffsetStoreError, match=rf"group '{group.group}': topic {group.topic} partition 0: the cell stores "
                                    r"offset 28, but its last batch .* give 20.*offsets history"):
        store.load(group.group)


def test_a_group_cell_whose_last_batch_skips_past_the_batch_before_it_is_refused_at_load(group: _Group) -> None:
    def skip(doc: dict[str, Any]) -> None:
        _offsets_28(doc)
        doc["ranges"] = [{"topic": group.topic, "partition": 0, "fromOffset": 20, "untilOffset": 28}]

    group.edit_cell(skip)
    with group.store() as store, pytest.raises(
            OffsetStoreError, match=rf"its range starts at 20, but the batch before it \({T0}\) ended at 12"):
        store.load(group.group)


def test_a_recorded_data_loss_and_a_reset_continue_the_hbase_history(group: _Group) -> None:
    from support import check_loss_and_reset_continue_history

    with group.store() as store:
        check_loss_and_reset_continue_history(store, group.group, group.tp, T0)
