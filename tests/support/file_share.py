"""A suite-wide limit on how much of the test time one test file may take.

The suite runs with ``-n 2 --dist loadfile``: each file runs whole on one worker, so one file
that grows past a share of the total becomes the run's tail, where the other worker idles.
``--max-file-share 0.12`` (README's test command) fails the run when any file's setup, call and
teardown time adds up to more than 12% of the whole; split such a file or share its services.
"""

from __future__ import annotations

from collections import defaultdict
from typing import NamedTuple

import pytest


class FileShare(NamedTuple):
    path: str
    seconds: float
    share: float


def oversized_files(seconds_by_file: dict[str, float], max_share: float) -> list[FileShare]:
    """Return the files whose share of the summed time exceeds ``max_share``, largest first."""
    total = sum(seconds_by_file.values())
    if total <= 0:
        return []
    shares = [FileShare(path, seconds, seconds / total) for path, seconds in seconds_by_file.items()]
    return sorted((s for s in shares if s.share > max_share), key=lambda s: -s.share)


class FileSharePlugin:
    """Adds up each file's test time from the reports (on the xdist controller too)."""

    def __init__(self, max_share: float) -> None:
        self.max_share = max_share
        self.seconds: dict[str, float] = defaultdict(float)
        self.oversized: list[FileShare] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.seconds[report.nodeid.split("::", 1)[0]] += report.duration

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput"):
            return  # a worker sees only its own files; the controller judges the whole run
        self.oversized = oversized_files(dict(self.seconds), self.max_share)
        if self.oversized and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.oversized:
            return
        total = sum(self.seconds.values())
        terminalreporter.section("test files over their share of the run")
        for item in self.oversized:
            terminalreporter.line(
                f"{item.path}: {item.seconds:.0f} s, {item.share:.1%} of {total:.0f} s "
                f"(limit {self.max_share:.0%}): split the file or share its services")
