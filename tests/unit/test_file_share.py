"""The suite's per-file time limit (tests/support/file_share.py)."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.support.file_share import oversized_files


def test_a_file_over_the_share_is_named_with_its_seconds_and_share() -> None:
    found = oversized_files({"a.py": 30.0, "b.py": 50.0, "c.py": 20.0}, 0.4)
    assert [(f.path, f.seconds, round(f.share, 2)) for f in found] == [("b.py", 50.0, 0.5)]


def test_files_at_or_under_the_share_pass() -> None:
    assert oversized_files({"a.py": 25.0, "b.py": 25.0, "c.py": 50.0}, 0.5) == []


def test_an_empty_or_zero_time_run_names_no_file() -> None:
    assert oversized_files({}, 0.1) == []
    assert oversized_files({"a.py": 0.0}, 0.1) == []


@given(st.dictionaries(st.text(min_size=1, max_size=5), st.floats(0, 1e4), min_size=1),
       st.floats(0.01, 0.99))
def test_exactly_the_files_over_the_share_are_named_largest_first(
        seconds: dict[str, float], limit: float) -> None:
    found = oversized_files(seconds, limit)
    total = sum(seconds.values())
    expected = {p for p, s in seconds.items() if total > 0 and s / total > limit}
    assert {f.path for f in found} == expected
    assert [f.share for f in found] == sorted((f.share for f in found), reverse=True)
