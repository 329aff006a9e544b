"""Row keys of the HBase offset store (pure functions, no client library).

The offsets rows follow the layout of Cloudera's offset-management guide,
``<topic>:<group>:<batchTimeMillis>``, with two precisions that make the keys unambiguous:

* The batch time is **zero-padded to 13 digits**. HBase orders row keys as bytes, so unpadded
  millis of different lengths sort wrongly (``b"999" > b"1000"``) and a reversed scan would
  return an older batch as the newest. Every epoch time in milliseconds from 2001-09-09 to
  2286-11-20 has exactly 13 digits, so rows written by the guide's code for real batch times
  already have this form; only small test times get leading zeros.
* The group id is percent-escaped for ``%`` and ``:`` only (``a:b`` becomes ``a%3Ab``), so a
  group id holding ``:`` cannot make one group's rows fall under another group's prefix.
  Kafka topic names cannot hold ``:`` (legal characters are ``[A-Za-z0-9._-]``), so they are
  written as they are.

The store's own rows start with ``#``, which no topic name can, so a reversed scan bounded to
a ``<topic>:<group>:`` prefix never meets them.
"""

from __future__ import annotations

import re

from dstream_kafka.errors import ConfigurationError

__all__ = [
    "MS_DIGITS",
    "batch_row_key",
    "decode_group",
    "encode_group",
    "group_row_key",
    "offsets_row_key",
    "offsets_row_prefix",
    "parse_offsets_row_key",
]

#: Digits of the zero-padded batch time in every row key.
MS_DIGITS = 13
_MAX_MS = 10 ** MS_DIGITS - 1
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_MS = re.compile(rf"[0-9]{{{MS_DIGITS}}}")


def encode_group(group_id: str) -> str:
    """Return ``group_id`` with ``%`` and ``:`` percent-escaped (the rest is kept as is)."""
    if not isinstance(group_id, str) or not group_id:
        raise ConfigurationError(f"group_id must be a non-empty string, got {group_id!r}")
    return group_id.replace("%", "%25").replace(":", "%3A")


def decode_group(text: str) -> str:
    """Invert :func:`encode_group`.

    Raises
    ------
    ValueError
        If ``text`` holds a ``:`` or a ``%`` that does not start ``%25`` or ``%3A``.
    """
    if ":" in text or not text:
        raise ValueError(f"{text!r} is not an encoded group id")
    out, i = [], 0
    while i < len(text):
        if text[i] == "%":
            code = text[i + 1:i + 3].upper()
            if code not in ("25", "3A"):
                raise ValueError(f"{text!r} holds a bad escape at position {i}")
            out.append("%" if code == "25" else ":")
            i += 3
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _check_topic(topic: str) -> str:
    if not isinstance(topic, str) or not _TOPIC.fullmatch(topic):
        raise ConfigurationError(
            f"topic {topic!r} is not a Kafka topic name ([A-Za-z0-9._-], 1 to 249 characters)")
    return topic


def _check_ms(batch_time_ms: int) -> int:
    if isinstance(batch_time_ms, bool) or not isinstance(batch_time_ms, int) or not 0 <= batch_time_ms <= _MAX_MS:
        raise ConfigurationError(
            f"batch time {batch_time_ms!r} must be epoch milliseconds between 0 and {_MAX_MS}")
    return batch_time_ms


def offsets_row_prefix(topic: str, group_id: str) -> bytes:
    """Return ``b"<topic>:<group>:"``, the prefix of every offsets row of one topic and group."""
    return f"{_check_topic(topic)}:{encode_group(group_id)}:".encode()


def offsets_row_key(topic: str, group_id: str, batch_time_ms: int) -> bytes:
    """Return ``b"<topic>:<group>:<batchTimeMillis, 13 digits>"``."""
    return offsets_row_prefix(topic, group_id) + f"{_check_ms(batch_time_ms):0{MS_DIGITS}d}".encode()


def parse_offsets_row_key(key: bytes) -> tuple[str, str, int]:
    """Return ``(topic, group_id, batch_time_ms)`` of an offsets row key.

    Raises
    ------
    ValueError
        If ``key`` is not ``<topic>:<group>:<13 digits>`` (the message says which part is wrong).
    """
    try:
        text = key.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"row key {key!r} is not UTF-8") from None
    parts = text.split(":")
    if len(parts) != 3:
        raise ValueError(f"row key {key!r} does not have the form <topic>:<group>:<batchTimeMillis>")
    topic, group, ms = parts
    if not _TOPIC.fullmatch(topic):
        raise ValueError(f"row key {key!r}: {topic!r} is not a Kafka topic name")
    if not _MS.fullmatch(ms):
        raise ValueError(f"row key {key!r}: the batch time {ms!r} is not {MS_DIGITS} digits "
                         "(epoch milliseconds, zero-padded)")
    return topic, decode_group(group), int(ms)


def group_row_key(group_id: str) -> bytes:
    """Return the key of the group's commit row (the cell every commit compares and sets)."""
    return f"#group:{encode_group(group_id)}".encode()


def batch_row_prefix(group_id: str) -> bytes:
    """Return the prefix of the group's history rows."""
    return f"#batch:{encode_group(group_id)}:".encode()


def batch_row_key(group_id: str, batch_time_ms: int) -> bytes:
    """Return the key of the history row of one committed batch of the group."""
    return batch_row_prefix(group_id) + f"{_check_ms(batch_time_ms):0{MS_DIGITS}d}".encode()
