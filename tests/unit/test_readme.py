"""README.rst opens with the two commands, and CI runs exactly the README's test command.

The configuration table (docs/reference/configuration.rst) matches config.DEFAULTS both ways, and
the layout map (docs/development/architecture.rst) names every module and package.
"""

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
    text = (ROOT / "docs" / "reference" / "configuration.rst").read_text()
    rows = re.findall(r"^``(spark\.[\w.]+)``\s+(\S+)", text, flags=re.M)
    return dict(rows)


def test_the_readme_is_at_most_200_lines():
    assert len((ROOT / "README.rst").read_text().splitlines()) <= 200


def test_every_spark_key_the_package_reads_is_in_the_configuration_table():
    from dstream_kafka import config

    documented = _configuration_table()
    assert sorted(set(config.DEFAULTS) - set(documented)) == []


def test_the_configuration_table_names_no_key_the_package_does_not_read():
    from dstream_kafka import config

    assert sorted(set(_configuration_table()) - set(config.DEFAULTS)) == []


def test_the_layout_map_names_every_module_and_package_of_dstream_kafka():
    text = (ROOT / "docs" / "development" / "architecture.rst").read_text()
    layout = text.split("\nLayout\n------\n", 1)[1]
    package = ROOT / "dstream_kafka"
    names = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    for init in sorted(package.rglob("__init__.py")):
        folder = init.parent
        if folder == package:
            continue
        names.append(f"{folder.name}/")
        # inside a package's line a module may be named without its .py
        names += [p.stem for p in folder.glob("*.py") if p.name != "__init__.py"]
    missing = sorted(n for n in names if not re.search(rf"(?<![\w.]){re.escape(n)}", layout))
    assert missing == []


def test_the_readme_is_valid_restructuredtext_for_the_package_page() -> None:
    # README.rst is the wheel's long_description: a broken table or link would show as raw text
    import docutils.core
    import docutils.utils

    try:
        docutils.core.publish_string((ROOT / "README.rst").read_text(), writer_name="null",
                                     settings_overrides={"halt_level": 2, "report_level": 5})
    except docutils.utils.SystemMessage as error:
        raise AssertionError(f"README.rst: {error}") from None
