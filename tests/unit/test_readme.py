"""README.rst opens with the two commands, and CI runs exactly the README's test command."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.rst").read_text()
    return re.findall(r"^    (bash \.ci/setup && .+)$", text, flags=re.M)


def test_readme_opens_with_a_demo_command_and_a_test_command():
    commands = _readme_commands()
    assert len(commands) >= 2
    assert commands[0].endswith("dstream-kafka demo")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command_verbatim():
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert _readme_commands()[1] in ci
