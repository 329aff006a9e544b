"""Conventions every module of the package keeps, read from the source."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dstream_kafka"


def test_every_module_logger_is_named_log() -> None:
    other = sorted(
        f"{path.relative_to(PACKAGE.parent)}: {match.group(1)}"
        for path in PACKAGE.rglob("*.py")
        for match in re.finditer(r"^(\w+) = logging\.getLogger\(", path.read_text(), re.M)
        if match.group(1) != "log")
    assert other == []


def test_every_module_opens_with_a_docstring() -> None:
    missing = sorted(str(path.relative_to(PACKAGE.parent)) for path in PACKAGE.rglob("*.py")
                     if not path.read_text().lstrip().startswith(('"""', 'r"""')))
    assert missing == []
