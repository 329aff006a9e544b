"""The test folders have no ``__init__.py``, so pytest imports test modules by basename."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_no_two_test_modules_share_a_basename() -> None:
    """Two ``test_x.py`` in different folders make collection fail with "import file mismatch"."""
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
