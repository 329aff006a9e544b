"""The demo's live display on a real terminal: tmux (Debian's package) runs the demo in a
160x50 pane against the session's broker, and the test reads the screen with capture-pane."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import pytest

TMUX = shutil.which("tmux")
ROOT = Path(__file__).resolve().parents[2]
CLI = Path(sys.executable).with_name("dstream-kafka")
ROW = re.compile(r"^\W*(\d\d:\d\d:\d\d)\W+(\d+)\W+(\d+)\W+\d+ ms\W+\d+ ms\W+\d+\W", re.M)

pytestmark = pytest.mark.skipif(TMUX is None, reason="needs Debian's tmux (bash .ci/setup)")


class Pane:
    """A detached tmux session on its own server socket in the test's folder (no other tmux
    server is touched, and nothing is left in /tmp/tmux-*)."""

    def __init__(self, command: str, socket: Path) -> None:
        assert TMUX is not None
        self._tmux = [TMUX, "-S", str(socket)]
        subprocess.run([*self._tmux, "new-session", "-d", "-x", "160", "-y", "50", "-s", "demo",
                        command], check=True, cwd=ROOT)

    def screen(self) -> str:
        done = subprocess.run([*self._tmux, "capture-pane", "-p", "-t", "demo"],
                              capture_output=True, text=True, check=True)
        return done.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run([*self._tmux, "send-keys", "-t", "demo", *keys], check=True)

    def wait_for(self, check: Callable[[str], bool], what: str, timeout: float = 240) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if check(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n{screen}")
            time.sleep(0.5)

    def kill(self) -> None:
        subprocess.run([*self._tmux, "kill-server"], capture_output=True)


@pytest.fixture
def pane(kafka: Any, unique: Any, tmp_path: Path) -> Iterator[Pane]:
    topic, group = unique("demo"), unique("demo-g")
    # Without COLUMNS/LINES from this process, rich sizes the view to the 160x50 pane.
    command = (f"env -u COLUMNS -u LINES {CLI} demo --bootstrap-servers {kafka.bootstrap_servers} --topic {topic} "
               f"--group {group} --batch-seconds 1 --rate 50 --duration 120; sleep 60")
    running = Pane(command, tmp_path / "tmux.sock")
    try:
        yield running
    finally:
        running.kill()


@pytest.mark.slow  # 35 s on an idle 2-core machine, 70-78 s measured under the shared load
def test_the_demo_redraws_one_live_view_of_its_batches_in_a_terminal(pane: Pane) -> None:
    screen = pane.wait_for(lambda s: sum(int(m.group(2)) > 0 for m in ROW.finditer(s)) >= 2,
                           "two batches with records in the live view")
    assert screen.count("dstream-kafka demo") == 1  # redrawn in place, not printed again
    assert "Recent batches" in screen and "word totals:" in screen
    assert re.search(r"Streaming page: http://127\.0\.0\.1:\d+/", screen)
    assert not re.search(r"^batch \d\d:\d\d:\d\d  records", screen, re.M)  # no plain lines
    times = [m.group(1) for m in ROW.finditer(screen)]
    assert times == sorted(times, reverse=True)  # newest first

    pane.keys("C-c")
    final = pane.wait_for(lambda s: "Totals:" in s, "the graceful stop's summary")
    processed = int(re.search(r"Processed (\d+) records this run", final).group(1))
    shown = int(re.findall(r"records (\d+)\s+rate", final)[-1])
    assert processed == shown > 0
