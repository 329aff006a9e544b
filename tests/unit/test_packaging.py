"""The package metadata in setup.cfg: one version, the licence file, the supported PySpark range."""

from __future__ import annotations

import configparser
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

import dstream_kafka

ROOT = Path(__file__).resolve().parents[2]


def _metadata() -> configparser.SectionProxy:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    return parser["metadata"]


def _requirement(name: str) -> Requirement:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = parser["options"]["install_requires"].splitlines()
    found = [Requirement(line) for line in lines if line.strip() and not line.strip().startswith("#")]
    return next(r for r in found if r.name == name)


def test_the_version_is_written_only_in_the_package() -> None:
    assert _metadata()["version"].strip() == "attr: dstream_kafka.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+", dstream_kafka.__version__)


def test_an_installed_distribution_reports_the_packages_version() -> None:
    try:
        installed = version("dstream_kafka")
    except PackageNotFoundError:  # pragma: no cover - a bare source tree on PYTHONPATH
        pytest.skip("dstream_kafka is not installed in this interpreter")
    assert installed == dstream_kafka.__version__


def test_the_license_file_is_the_apache_license_2_0_and_ships_with_the_package() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text
    metadata = _metadata()
    assert metadata["license_expression"].strip() == "Apache-2.0"
    assert metadata["license_files"].strip() == "LICENSE"


def test_pyspark_4_0_through_4_3_are_accepted_and_3_5_and_4_4_are_not() -> None:
    pyspark = _requirement("pyspark")
    for accepted in ("4.0.0", "4.0.5", "4.1.4", "4.2.1", "4.3.0"):
        assert pyspark.specifier.contains(accepted), accepted
    for refused in ("3.5.9", "4.4.0"):
        assert not pyspark.specifier.contains(refused), refused


def test_the_installed_pyspark_is_in_the_supported_range() -> None:
    import pyspark

    assert _requirement("pyspark").specifier.contains(Version(pyspark.__version__).base_version)
