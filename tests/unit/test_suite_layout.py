"""The suite's layout: unique test module basenames, and test files named after what they test.

The test folders have no ``__init__.py``, so pytest imports test modules by basename. A test
file is named after the module it tests (``test_positions.py`` tests ``plan/positions.py``,
``test_<module>_<aspect>.py`` one aspect of it), so "where is X tested" has one answer.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent

# Test files that test no one module, each for a reason; keep this list short.
CROSS_CUTTING = {
    # crash campaigns: real drivers SIGKILLed and restarted over every store (tests/crash)
    "test_crash_recovery.py", "test_crash_kafka_eos.py",
    "test_crash_rules.py", "test_crash_rules_kafka_eos.py",
    # the package on a Spark standalone cluster (tests/cluster)
    "test_cluster.py",
    # no secret in anything the package writes or shows, across every module
    "test_secrets.py",
    # the docs and README: built, their examples run, their commands and tables true
    "test_docs_build.py", "test_docs_examples.py", "test_readme.py",
    # the package as a whole: imports, conventions, privates, public names, types, metadata
    "test_import_cycles.py", "test_module_conventions.py", "test_private_access.py",
    "test_public_api.py", "test_typing.py", "test_packaging.py",
    # the suite itself
    "test_suite_layout.py",
}


def _names(folder: Path) -> set[str]:
    """The module names under ``folder`` (a leading underscore dropped) and its package names."""
    return {path.parent.name if path.name == "__init__.py" else path.stem.lstrip("_")
            for path in folder.rglob("*.py")}


PACKAGE_NAMES = _names(ROOT / "dstream_kafka") - {"dstream_kafka"}
SUPPORT_NAMES = _names(TESTS / "support") - {"support"}  # the suite's own tools
BENCHMARK_NAMES = _names(ROOT / "benchmarks") - {"benchmarks"}


def names_a_module(file_name: str) -> bool:
    """Whether ``test_<name>.py`` names a module or package of dstream_kafka (or of the suite's
    support), alone or with an aspect after it; ``test_benchmark_<name>.py`` a benchmarks module
    (``soak`` for ``adapter_soak.py`` too)."""
    name = file_name.removeprefix("test_").removesuffix(".py")
    if name.startswith("benchmark_"):
        rest = name.removeprefix("benchmark_")
        return any(rest == m or rest.startswith(m + "_") or m.endswith("_" + rest)
                   for m in BENCHMARK_NAMES)
    return any(name == m or name.startswith(m + "_") for m in PACKAGE_NAMES | SUPPORT_NAMES)


def _test_files() -> list[Path]:
    return sorted([*(TESTS / "unit").glob("test_*.py"), *(TESTS / "integration").glob("test_*.py")])


def test_no_two_test_modules_share_a_basename() -> None:
    """Two ``test_x.py`` in different folders make collection fail with "import file mismatch"."""
    names = Counter(path.name for path in TESTS.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []


def test_every_test_file_is_named_after_a_module_it_tests() -> None:
    unnamed = [str(path.relative_to(TESTS)) for path in _test_files()
               if path.name not in CROSS_CUTTING and not names_a_module(path.name)]
    assert unnamed == [], ("name these test files test_<module>.py or test_<module>_<aspect>.py "
                           "after the dstream_kafka module they test (or move their tests there)")


def test_the_cross_cutting_list_holds_only_existing_files_that_name_no_module() -> None:
    existing = {path.name for path in _test_files()}
    assert sorted(CROSS_CUTTING - existing) == []
    assert sorted(name for name in CROSS_CUTTING if names_a_module(name)) == []


def test_a_name_matches_a_module_alone_or_with_an_aspect_and_nothing_else() -> None:
    assert names_a_module("test_positions.py")  # plan/positions.py
    assert names_a_module("test_stream_options_start.py")  # plan/stream_options.py, one aspect
    assert names_a_module("test_stores_contract.py")  # the stores package
    assert names_a_module("test_spark_internals.py")  # _spark_internals.py
    assert names_a_module("test_benchmark_soak.py")  # benchmarks/adapter_soak.py
    assert not names_a_module("test_resume.py")
    assert not names_a_module("test_hardening_stream.py")
    assert not names_a_module("test_positionsx.py")
