"""Resetting a group's stored offsets: kafka-consumer-groups' ``--reset-offsets`` for every store.

:func:`reset` plans the new offset of each chosen partition from a :class:`Scenario`
(``--to-earliest``, ``--to-latest``, ``--to-current``, ``--to-offset N``, ``--shift-by N``,
``--to-datetime``, ``--by-duration``, ``--from-file``), clamps it into ``[log start, log end]``
and, with ``execute``, writes it through :meth:`~dstream_kafka.stores.base.OffsetStore.reset`:
one audited commit (user, host, old offsets) that the history shows and the next stream start
logs (:meth:`~dstream_kafka.stores.base.OffsetStore.last_reset`). A reset is refused, with nothing written, while a stream holds
the group: members in the Kafka group (a subscribed driver), a planned batch not committed, or
a commit between the plan and the write (the store's compare-and-set).
"""

from __future__ import annotations

import csv
import datetime as _dt
import getpass
import io
import re
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dstream_kafka.errors import ConfigurationError, OffsetFencedError
from dstream_kafka.offsets import TopicPartition
from dstream_kafka.operate.broker import OffsetsBroker, bound_note, brokers_for, check_named_partitions
from dstream_kafka.operate.common import opened_store, render_table
from dstream_kafka.stores.base import OffsetStore

__all__ = ["RESET_COLUMNS", "ResetRow", "Scenario", "format_reset", "parse_datetime", "parse_duration",
           "parse_offsets_file", "reset"]

#: The plan table's columns, in order.
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET", "LOG-START-OFFSET",
                 "LOG-END-OFFSET", "NOTE")

_KINDS = ("to-earliest", "to-latest", "to-current", "to-offset", "shift-by", "to-datetime", "by-duration",
          "from-file")


@dataclass(frozen=True)
class Scenario:
    """How to compute the new offsets (kafka-consumer-groups' reset scenarios).

    Attributes
    ----------
    kind : str
        ``to-earliest``, ``to-latest``, ``to-current``, ``to-offset`` (``value``: the offset),
        ``shift-by`` (``value``: added to the current offset, may be negative), ``to-datetime``
        (``value``: ISO 8601 text; without a zone it is local time, as Kafka's tool reads it),
        ``by-duration`` (``value``: ISO 8601 duration ``PnDTnHnMnS``, back from now) or
        ``from-file`` (``value``: the file's text, Kafka's CSV ``topic,partition,offset`` or
        the offsets JSON ``{"topic":{"0":23}}``).
    value : int or str, optional
    """

    kind: str
    value: Any = None

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ConfigurationError(f"reset scenario must be one of {', '.join(_KINDS)}; got {self.kind!r}")


@dataclass(frozen=True)
class ResetRow:
    """One partition of a reset plan.

    ``current_offset`` is None where the store holds no offset; ``new_offset`` is within
    ``[log_start_offset, log_end_offset]``; ``note`` says when the asked offset was clamped.
    A partition of ``--all-topics`` whose topic the broker deleted is skipped: ``new_offset``
    and the log offsets are None, ``note`` says ``SKIPPED: topic deleted``, and the store keeps
    its offset.
    """

    group: str
    topic: str
    partition: int
    current_offset: int | None
    new_offset: int | None
    log_start_offset: int | None
    log_end_offset: int | None
    note: str = ""

    @property
    def skipped(self) -> bool:
        """Whether the reset leaves this partition as it is (its topic is gone)."""
        return self.new_offset is None

    def cells(self) -> tuple[str, ...]:
        """Return the row's cells in :data:`RESET_COLUMNS` order (``-`` for an unknown value)."""
        return (self.group, self.topic, str(self.partition),
                *("-" if v is None else str(v) for v in (self.current_offset, self.new_offset,
                                                           self.log_start_offset, self.log_end_offset)),
                self.note)


# ------------------------------------------------------------------------------------------
# Parsing the scenario values

_DURATION = re.compile(r"P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?")


def parse_duration(text: str) -> _dt.timedelta:
    """Return an ISO 8601 duration ``PnDTnHnMnS`` (Kafka's ``--by-duration``) as a timedelta.

    Raises
    ------
    ConfigurationError
        Naming ``--by-duration`` and the expected form.
    """
    match = _DURATION.fullmatch(text.strip().upper())
    if not match or not any(match.groups()) or text.strip().upper().endswith("T"):
        raise ConfigurationError(
            f"--by-duration: {text!r} is not an ISO 8601 duration; use PnDTnHnMnS, e.g. P1DT2H (1 day 2 hours) "
            "or PT30M (30 minutes)")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return _dt.timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def parse_datetime(text: str) -> int:
    """Return ISO 8601 date-time text as epoch milliseconds (no zone: local time, as Kafka's tool).

    Raises
    ------
    ConfigurationError
        Naming ``--to-datetime`` and the expected form.
    """
    try:
        value = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigurationError(
            f"--to-datetime: {text!r} is not an ISO 8601 date-time; use YYYY-MM-DDTHH:mm:SS[.sss][Z|+HH:MM], "
            "e.g. 2025-11-24T16:00:00Z") from None
    return int(value.timestamp() * 1000)  # naive datetimes are local time here


def parse_offsets_file(text: str) -> dict[TopicPartition, int]:
    """Return the offsets of a ``--from-file`` text: offsets JSON, or Kafka's CSV.

    The CSV is what ``kafka-consumer-groups --reset-offsets --export`` writes: one
    ``topic,partition,offset`` line per partition (``group,topic,partition,offset`` lines of
    ``--all-groups`` exports are accepted too, the group column being ignored). A partition
    given twice is refused (in JSON as in CSV), not taken from the last line.

    Raises
    ------
    ConfigurationError
        Naming ``--from-file`` and the line (or JSON key) at fault.
    """
    from dstream_kafka.offsets_json import partition_offsets_from_json

    if text.lstrip().startswith(("{", "[")):  # JSON (an array is refused as not offsets JSON)
        return partition_offsets_from_json(text, "--from-file", allowed_sentinels=())
    result: dict[TopicPartition, int] = {}
    lines: dict[TopicPartition, int] = {}
    for number, row in enumerate(csv.reader(io.StringIO(text)), 1):
        if not row or not "".join(row).strip():
            continue
        fields = [f.strip() for f in row][-3:]
        if len(row) not in (3, 4) or not fields[1].isdigit() or not fields[2].lstrip("-").isdigit() \
                or int(fields[2]) < 0:
            raise ConfigurationError(
                f"--from-file: line {number} {','.join(row)!r} is not topic,partition,offset with a partition "
                'and offset >= 0; give Kafka\'s CSV (events,0,23) or offsets JSON ({"events":{"0":23}})')
        tp = TopicPartition(fields[0], int(fields[1]))
        if tp in lines:
            raise ConfigurationError(
                f"--from-file: partition {tp.partition} of topic {tp.topic!r} is given twice, on lines {lines[tp]} "
                f"and {number}; keep one line per partition")
        lines[tp] = number
        result[tp] = int(fields[2])
    if not result:
        raise ConfigurationError("--from-file: the file names no partition; give Kafka's CSV "
                                 "(events,0,23) or offsets JSON ({\"events\":{\"0\":23}})")
    return result


def _parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """``t`` -> (t, None); ``t:0,2`` -> (t, [0, 2])."""
    topic, colon, parts = spec.partition(":")
    if not colon:
        return topic, None
    try:
        numbers = sorted({int(p) for p in parts.split(",")})
    except ValueError:
        numbers = []
    if not topic or not numbers or any(p < 0 for p in numbers):
        raise ConfigurationError(f"--topic: {spec!r} is not TOPIC or TOPIC:P,P; e.g. events or events:0,2")
    return topic, numbers


# ------------------------------------------------------------------------------------------
# Planning and writing


def reset(store: OffsetStore | str, group: str, scenario: Scenario, *, topics: Sequence[str] = (),
          all_topics: bool = False, bootstrap_servers: str | None = None, execute: bool = False,
          timeout: float = 10.0) -> list[ResetRow]:
    """Plan a reset of ``group``'s stored offsets and, with ``execute``, write it.

    Parameters
    ----------
    store : OffsetStore or str
        The store or its URI (a store opened from a URI is closed before returning).
    group : str
        The consumer group (the stream's ``group.id``).
    scenario : Scenario
        How the new offsets are computed.
    topics : sequence of str
        ``"events"`` (every partition of the topic) or ``"events:0,2"`` (those partitions).
    all_topics : bool
        Every partition the store holds for the group; those whose topic the broker no longer
        has are skipped (a row noting ``SKIPPED``; their stored offsets stay). Without
        ``topics`` and ``all_topics`` only a ``from-file`` scenario has partitions: the file's.
    bootstrap_servers : str, optional
        The brokers of the topics; default the hosts of a ``kafka://`` store URI.
    execute : bool
        Write the plan (default False: a dry run, nothing is written).
    timeout : float
        Seconds to wait for the store and the broker.

    Returns
    -------
    list of ResetRow
        The plan, sorted by topic and partition; written when ``execute``.

    Raises
    ------
    ConfigurationError
        Bad input (no such store, unknown topic, partition or group, unparsable value, nothing
        chosen, every chosen partition gone from the cluster), or a stream holds the group (Kafka group members, a planned batch not committed). Nothing
        is written.
    OffsetFencedError
        A stream committed between the plan and the write; nothing is written.
    """
    bootstrap_servers = brokers_for(store, bootstrap_servers)
    # Every value is checked before the store or the broker is asked anything.
    from_file = parse_offsets_file(scenario.value) if scenario.kind == "from-file" else {}
    if scenario.kind == "to-datetime":
        parse_datetime(scenario.value)
    if scenario.kind == "by-duration":
        parse_duration(scenario.value)
    for spec in topics:
        _parse_topic(spec)
    opened, owned = opened_store(store, timeout)  # a reset moves a store's offsets: it must exist
    try:
        stored = opened.load(group)
        with OffsetsBroker(bootstrap_servers, timeout) as broker:
            chosen = _choose(broker, group, stored, topics, all_topics, from_file)
            gone = {tp: why for tp, why in broker.existing(chosen).items() if why}
            if gone and len(gone) == len(chosen):
                raise ConfigurationError(
                    f"--all-topics: every partition the store holds for group {group!r} is gone from the cluster "
                    f"({', '.join(f'{tp.topic}-{tp.partition}: {why}' for tp, why in sorted(gone.items()))}); "
                    "nothing to reset")
            rows = _plan(broker, group, scenario, [tp for tp in chosen if tp not in gone], stored, from_file)
            rows = sorted(rows + [ResetRow(group, tp.topic, tp.partition, stored.get(tp), None, None, None,
                                           f"SKIPPED: {why}") for tp, why in gone.items()],
                          key=lambda r: (r.topic, r.partition))
            if execute:
                broker.check_no_members(group)
                _write(opened, group, [r for r in rows if not r.skipped], stored, bootstrap_servers, timeout)
        return rows
    finally:
        if owned:
            opened.close()


def _choose(broker: OffsetsBroker, group: str, stored: Mapping[TopicPartition, int], topics: Sequence[str],
            all_topics: bool, from_file: Mapping[TopicPartition, int]) -> list[TopicPartition]:
    if topics and all_topics:
        raise ConfigurationError("--topic/--all-topics: give one of them, not both")
    chosen: set[TopicPartition] = set()
    if all_topics:
        if not stored:
            raise ConfigurationError(
                f"--all-topics: the store holds no committed offsets for group {group!r}; check --group, "
                "or name the partitions with --topic")
        chosen = set(stored)
    for spec in topics:
        topic, parts = _parse_topic(spec)
        existing = broker.partitions_of(topic)
        for p in parts if parts is not None else sorted(existing):
            if p not in existing:
                raise ConfigurationError(
                    f"--topic: topic {topic!r} has no partition {p} (it has {len(existing)}: "
                    f"{', '.join(map(str, sorted(existing)))}); name existing partitions")
            chosen.add(TopicPartition(topic, p))
    if from_file:
        check_named_partitions(broker, from_file, "--from-file")
        if not topics and not all_topics:
            chosen = set(from_file)
        missing = sorted(tp for tp in chosen if tp not in from_file)
        if missing:
            raise ConfigurationError(
                f"--from-file: the file has no offset for {', '.join(f'{t.topic}-{t.partition}' for t in missing)}; "
                "add them or narrow --topic")
    if not chosen:
        raise ConfigurationError("--topic/--all-topics: name what to reset: --topic T, --topic T:0,2 or "
                                 "--all-topics (or give --from-file)")
    return sorted(chosen)


def _plan(broker: OffsetsBroker, group: str, scenario: Scenario, chosen: list[TopicPartition],
          stored: Mapping[TopicPartition, int], from_file: Mapping[TopicPartition, int]) -> list[ResetRow]:
    start, end = broker.log_offsets(chosen)
    kind, value = scenario.kind, scenario.value
    if kind in ("to-datetime", "by-duration"):
        at = (parse_datetime(value) if kind == "to-datetime"
              else int((time.time() - parse_duration(value).total_seconds()) * 1000))
        found = broker.for_times({tp: max(at, 0) for tp in chosen})
        asked = {tp: end[tp] for tp in chosen}  # Kafka's tool: no record that late -> the log end
        asked.update({tp: o for tp, o in found.items() if o is not None})
    elif kind in ("to-offset", "shift-by"):
        if isinstance(value, bool) or not isinstance(value, int) or (kind == "to-offset" and value < 0):
            raise ConfigurationError(f"--{kind}: expected a whole number{' >= 0' if kind == 'to-offset' else ''}, "
                                     f"got {value!r}")
        if kind == "shift-by":
            without = [f"{tp.topic}-{tp.partition}" for tp in chosen if tp not in stored]
            if without:
                raise ConfigurationError(
                    f"--shift-by: the store holds no offset for {', '.join(without)} to shift; use --to-offset, "
                    "--to-earliest or --to-latest for them")
        asked = {tp: value if kind == "to-offset" else stored[tp] + value for tp in chosen}
    else:
        asked = {tp: {"to-earliest": start[tp], "to-latest": end[tp], "from-file": from_file.get(tp, 0),
                      "to-current": stored.get(tp, end[tp])}[kind] for tp in chosen}
    rows = []
    for tp in chosen:
        new = min(max(asked[tp], start[tp]), end[tp])
        why = bound_note(asked[tp], start[tp], end[tp])
        note = f"CLAMPED: {why}" if why else ""
        rows.append(ResetRow(group, tp.topic, tp.partition, stored.get(tp), new, start[tp], end[tp], note))
    return rows


def _write(store: OffsetStore, group: str, rows: Sequence[ResetRow], stored: Mapping[TopicPartition, int],
           servers: str, timeout: float) -> None:
    from dstream_kafka.stores.mirror import copy_reset_to_group

    offsets = {TopicPartition(r.topic, r.partition): r.new_offset for r in rows if r.new_offset is not None}
    try:
        store.reset(group, offsets, expected={tp: stored[tp] for tp in offsets if tp in stored},
                    user=getpass.getuser(), host=socket.gethostname())
    except OffsetFencedError as exc:
        raise OffsetFencedError(f"--store: {exc}") from None
    copy_reset_to_group(store, group, offsets, servers, timeout)


def format_reset(rows: Sequence[ResetRow], *, executed: bool, terminal: bool = False) -> str:
    """Render a reset plan: the before/after table, then what was (or would be) written."""
    table = render_table(RESET_COLUMNS, [(r.cells(), bool(r.note)) for r in rows], terminal=terminal)
    skipped = sum(1 for r in rows if r.skipped)
    clamped = sum(1 for r in rows if r.note and not r.skipped)
    tail = f"; {clamped} clamped into [log start, log end]" if clamped else ""
    if skipped:
        tail += f"; {skipped} skipped (topic gone from the cluster, the store keeps its offset)"
    if executed:
        return table + f"\nRESET: {len(rows) - skipped} partitions written{tail}"
    return (table + f"\nDRY RUN: {len(rows) - skipped} partitions planned{tail}; nothing written "
            "(add --execute to write)")

