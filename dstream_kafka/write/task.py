"""What a write task does on an executor: one producer, one partition's records.

* :func:`write_at_least_once`: an idempotent producer sends every record of the partition
  and flushes; the task ends only when each record is acknowledged by all in-sync replicas,
  so the batch's offsets (committed after its output) never pass an unwritten record.
* :func:`write_exactly_once`: a transactional producer whose ``transactional.id`` belongs to
  the input partition calls ``init_transactions`` (which fences every earlier attempt and
  completes or aborts its transaction), checks that the group's committed offset is where the
  range starts, writes the records, sends the range's ``untilOffset`` for the group with
  ``send_offsets_to_transaction`` and commits: the records and the offset become visible
  together, or neither does.
"""

from __future__ import annotations

import itertools
import json
import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any

from dstream_kafka.errors import OutputFencedError
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.write.producers import open_producer
from dstream_kafka.write.records import message_builder
from dstream_kafka.write.settings import OutputSettings, serializer_for, transactional_id

__all__ = ["write_at_least_once", "write_exactly_once"]

log = logging.getLogger(__name__)


def _builder(settings: OutputSettings) -> Any:
    return message_builder(settings.topic, serializer_for("key", settings.key_serializer),
                           serializer_for("value", settings.value_serializer))


def write_at_least_once(settings: OutputSettings, records: Iterable[Any]) -> Iterator[int]:
    """Send ``records`` with an idempotent producer and flush; yield how many were written."""
    it = iter(records)
    first = next(it, _NOTHING)
    if first is _NOTHING:
        yield 0
        return
    build = _builder(settings)
    producer = open_producer(settings, None)
    count = 0
    try:
        for record in itertools.chain((first,), it):
            producer.send(build(record))
            count += 1
        producer.flush()
    finally:
        producer.close()
    yield count


_NOTHING = object()


def offset_metadata(batch_time_ms: int, from_offset: int) -> str:
    """The metadata committed with an offset, as the Kafka group store writes it."""
    return json.dumps({"dstream_kafka": 1, "batch_time_ms": batch_time_ms, "from": from_offset,
                       "committed_at_ms": int(time.time() * 1000)}, separators=(",", ":"))


def write_exactly_once(settings: OutputSettings, group: str, batch_time_ms: int,
                       offset_range: OffsetRange, records: Iterable[Any]) -> Iterator[int]:
    """Write ``records``, derived from ``offset_range`` alone, in one Kafka transaction that
    also commits ``offset_range.untilOffset`` for ``group``; yield how many were written.

    An empty range with no records writes nothing (there is no position to move).

    A range the group's committed offset has already passed (read after
    ``init_transactions``, so no earlier attempt's transaction is still open) is skipped: an
    earlier attempt wrote it.

    Raises
    ------
    OutputFencedError
        When ``group``'s committed offset is neither absent, nor the range's start, nor past
        its end: records before the range were never written, or part of it was.
    KafkaWriteError
        When a record or the commit failed; the transaction is aborted first.
    """
    it = iter(records)
    first = next(it, _NOTHING)
    r = offset_range
    if first is _NOTHING and r.fromOffset == r.untilOffset:
        yield 0
        return
    build = _builder(settings)
    assert settings.application_id is not None  # set by the output for exactly-once
    producer = open_producer(settings, transactional_id(settings.application_id, r.topic,
                                                        r.partition))
    count = 0
    try:
        producer.init()
        committed = producer.committed(group, r.topic, r.partition)
        if committed is not None and committed >= r.untilOffset and r.count():
            # An earlier attempt (a task that died after its commit, before Spark heard of
            # it) or another run wrote this whole range: its outputs exist, once.
            log.warning("%s-%d [%d, %d) was already written and committed (group %s is at %d); "
                        "skipped", r.topic, r.partition, r.fromOffset, r.untilOffset, group,
                        committed)
            yield 0
            return
        if committed is not None and committed != r.fromOffset:
            raise OutputFencedError(_fenced_message(group, r, committed))
        producer.begin()
        try:
            for record in itertools.chain(() if first is _NOTHING else (first,), it):
                producer.send(build(record))
                count += 1
            producer.send_offsets(r.topic, r.partition, r.untilOffset,
                                  offset_metadata(batch_time_ms, r.fromOffset), group)
            producer.commit()
        except BaseException:
            try:
                producer.abort()
            except Exception as abort_error:  # a fenced or dead producer cannot abort
                log.warning("aborting the transaction of %s-%d failed (%s); the next attempt's "
                            "init_transactions or the transaction timeout aborts it",
                            r.topic, r.partition, type(abort_error).__name__)
            raise
    finally:
        producer.close()
    yield count


def _fenced_message(group: str, r: OffsetRange, committed: int) -> str:
    if committed > r.fromOffset:
        why = ("the group is inside this range: part of its records were written by another "
               "run of this application (two drivers with one applicationId)")
    else:
        why = ("the group is behind this range: records between were never written "
               "(a batch that failed, or starting offsets other than the group's)")
    return (f"exactly-once output refused to write {r.topic}-{r.partition} "
            f"[{r.fromOffset}, {r.untilOffset}): group {group!r} has committed offset "
            f"{committed}; {why}. Exactly-once output resumes only from the group's committed "
            "offsets: stop the other run, or restart the stream (it then starts at the group's "
            "offsets), or move the group's offsets with the offsets CLI")
