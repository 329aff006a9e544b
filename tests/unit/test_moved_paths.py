"""0.1.0's module paths keep importing after the role layout, as the very same modules."""

from __future__ import annotations

import importlib
import pickle
import subprocess
import sys

import pytest

from dstream_kafka._moved import MOVED, new_name


@pytest.mark.parametrize("old", sorted(MOVED))
def test_every_moved_path_imports_the_same_module_object_as_its_new_path(old: str) -> None:
    with pytest.warns(DeprecationWarning, match=MOVED[old]):
        moved = importlib.import_module(old) if old not in sys.modules else _fresh(old)
    assert moved is importlib.import_module(MOVED[old])


def _fresh(old: str) -> object:
    del sys.modules[old]
    return importlib.import_module(old)


def test_a_module_below_a_moved_package_maps_to_the_same_module_below_the_new_package() -> None:
    assert new_name("dstream_kafka.backends.confluent") == "dstream_kafka.read.backends.confluent"
    assert new_name("dstream_kafka.services.kafka") == "dstream_kafka.operate.services.kafka"
    assert new_name("dstream_kafka.servicesx") is None
    assert new_name("dstream_kafka.offsets") is None


def test_an_old_path_import_in_a_fresh_interpreter_gives_one_class_not_two() -> None:
    code = ("import warnings; warnings.simplefilter('ignore')\n"
            "from dstream_kafka.backends.kafka_python import KafkaPythonBackend as Old\n"
            "from dstream_kafka.read.backends.kafka_python import KafkaPythonBackend as New\n"
            "assert Old is New, (Old, New)\n"
            "import dstream_kafka.read.kafka_rdd as n, dstream_kafka.kafka_rdd as o\n"
            "assert n is o and not hasattr(n, '__path__')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_an_object_pickled_under_an_old_module_path_loads_as_the_moved_class() -> None:
    from dstream_kafka.plan.backpressure import PIDRateEstimator

    # protocol 0 names classes as text lines, so the module path can be swapped in place
    data = pickle.dumps(PIDRateEstimator(1000, 1.0, 0.2, 0.0, 100.0), protocol=0)
    old = data.replace(b"dstream_kafka.plan.backpressure\n", b"dstream_kafka.backpressure\n")
    assert old != data
    loaded = pickle.loads(old)
    assert type(loaded) is PIDRateEstimator


def test_the_changelog_lists_every_moved_module_with_its_new_path() -> None:
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "changelog.rst").read_text()
    rows = {(o.removeprefix("dstream_kafka."), n.removeprefix("dstream_kafka."))
            for o, n in MOVED.items()}
    missing = sorted(r for r in rows if f"``{r[0]}``, ``{r[1]}``" not in text)
    assert missing == []
