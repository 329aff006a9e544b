"""The file format of the checkpoint offset store: a version line, then one JSON document.

Every file the store writes is ``v1\\n{json}\\n`` (UTF-8). A reader refuses anything else with
:class:`~dstream_kafka.errors.CorruptCheckpointError` naming the file and the problem, and
says how to recover; a file of a newer format asks for a newer dstream_kafka. Files hold data
only (ranges and offsets), never pickled code, so they survive code changes.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from dstream_kafka.errors import CorruptCheckpointError
from dstream_kafka.offsets import OffsetRange

__all__ = ["FORMAT_VERSION", "corrupt", "encode", "parse", "ranges_doc"]

#: The version line every file starts with.
FORMAT_VERSION = 1


def encode(doc: Mapping[str, Any]) -> bytes:
    """Return the file content of ``doc``."""
    return f"v{FORMAT_VERSION}\n{json.dumps(doc, separators=(',', ':'), ensure_ascii=False)}\n".encode()


def ranges_doc(ranges: Sequence[OffsetRange]) -> list[dict[str, Any]]:
    """Return ``ranges`` as JSON values (``OffsetRange(**item)`` reads them back)."""
    return [{"topic": r.topic, "partition": r.partition, "fromOffset": r.fromOffset,
             "untilOffset": r.untilOffset} for r in ranges]


def corrupt(path: str, problem: str) -> CorruptCheckpointError:
    """Return the error for a damaged file, with the way to recover."""
    return CorruptCheckpointError(
        f"Checkpoint file {path} is corrupt: {problem}. Offsets are never reset on their own: restore "
        "the file from a backup, or remove it (and every newer file in offsets/ and commits/) to "
        "resume from the batch before it.")


def parse(path: str, data: bytes, required: Collection[str]) -> dict[str, Any]:
    """Parse ``v1\\n{json}``; raise CorruptCheckpointError naming ``path`` on any problem."""
    if not data:
        raise corrupt(path, "the file is empty (truncated)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise corrupt(path, "it is not UTF-8 text") from None
    version, newline, body = text.partition("\n")
    if not (version.startswith("v") and version[1:].isdigit()):
        raise corrupt(path, f"the first line should be the format version v{FORMAT_VERSION}, "
                            f"got {version[:20]!r}" + ("" if newline else " (truncated)"))
    if int(version[1:]) > FORMAT_VERSION:
        raise CorruptCheckpointError(
            f"Checkpoint file {path} was written by a newer dstream_kafka (format {version}; this "
            f"version reads v{FORMAT_VERSION}). Upgrade dstream_kafka to resume from it.")
    if int(version[1:]) < 1:
        raise corrupt(path, f"unknown format version {version!r}")
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise corrupt(path, f"the JSON is invalid or truncated ({exc})") from None
    if not isinstance(doc, dict):
        raise corrupt(path, "the JSON is not an object")
    missing = [k for k in required if k not in doc]
    if missing:
        raise corrupt(path, f"missing keys {missing}")
    return doc
