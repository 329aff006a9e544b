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


def _configuration_table() -> dict[str, str]:
    text = (ROOT / "README.rst").read_text()
    section = text.split("\nConfiguration\n-------------\n", 1)[1].split("\nLayout\n------\n", 1)[0]
    rows = re.findall(r"^``(spark\.[\w.]+)``\s+(\S+)", section, flags=re.M)
    return dict(rows)


def test_every_spark_key_the_package_reads_is_in_the_readme_configuration_table():
    from dstream_kafka import config

    documented = _configuration_table()
    assert sorted(set(config.DEFAULTS) - set(documented)) == []


def test_the_readme_configuration_table_names_no_key_the_package_does_not_read():
    from dstream_kafka import config

    assert sorted(set(_configuration_table()) - set(config.DEFAULTS)) == []


def test_the_readme_layout_map_names_every_module_and_package_of_dstream_kafka():
    text = (ROOT / "README.rst").read_text()
    layout = text.split("\nLayout\n------\n", 1)[1]
    package = ROOT / "dstream_kafka"
    names = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    names += [f"{p.name}/" for p in package.iterdir() if (p / "__init__.py").is_file()]
    for sub in package.rglob("__init__.py"):
        # inside a package's line a module may be named without its .py
        names += [p.stem for p in sub.parent.glob("*.py") if p.name != "__init__.py"]
        names += [f"{p.parent.name}/" for p in sub.parent.glob("*/__init__.py")]
    missing = sorted(n for n in names if not re.search(rf"(?<![\w.]){re.escape(n)}", layout))
    assert missing == []
