"""A machine without Java, Maven or a Debian package gets one clear instruction, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dstream_kafka.errors import MissingDependencyError


def _run_cli(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dstream_kafka.cli", *args], env=env,
                          capture_output=True, text=True, timeout=120)


def test_missing_java_names_the_package_to_install(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "DSTREAM_KAFKA_RUN_DIR": str(tmp_path / "run")}
    result = _run_cli(["broker", "start"], env)
    assert result.returncode == 1
    assert "java is required" in result.stderr
    assert "apt-get install -y openjdk-17-jre-headless" in result.stderr
    assert "Traceback" not in result.stderr


def test_hbase_start_without_java_names_the_package_to_install_in_one_line(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "DSTREAM_KAFKA_RUN_DIR": str(tmp_path / "run")}
    result = _run_cli(["hbase", "start"], env)
    assert result.returncode == 1
    assert "java is required" in result.stderr
    assert "apt-get install -y openjdk-17-jre-headless" in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "run" / "hbase.json").exists()


def test_missing_maven_names_the_package_to_install_when_jars_are_not_cached(tmp_path):
    java = Path(subprocess.run(["sh", "-c", "command -v java"], capture_output=True,
                               text=True).stdout.strip())
    only_java = tmp_path / "bin"
    only_java.mkdir()
    (only_java / "java").symlink_to(java.resolve())
    env = {**os.environ, "PATH": str(only_java), "DSTREAM_KAFKA_CACHE": str(tmp_path / "cache")}
    result = _run_cli(["setup"], env)
    assert result.returncode == 1
    assert "mvn is required" in result.stderr
    assert "apt-get install -y maven" in result.stderr
    assert "Traceback" not in result.stderr


def test_missing_postgresql_server_names_the_debian_package(tmp_path):
    from tests.support.postgres import postgres_bin_dir

    with pytest.raises(MissingDependencyError, match=r"apt-get install -y postgresql"):
        postgres_bin_dir(tmp_path)


def test_missing_zookeeper_names_the_debian_package(tmp_path, monkeypatch):
    from tests.support import zookeeper

    monkeypatch.setattr(zookeeper, "_JAR", tmp_path / "zookeeper.jar")
    with pytest.raises(MissingDependencyError, match=r"apt-get install -y zookeeper"):
        zookeeper.ZooKeeperServer().start()


def test_cache_dir_honours_the_environment_variable(tmp_path, monkeypatch):
    from dstream_kafka.operate.services.environment import cache_dir

    monkeypatch.setenv("DSTREAM_KAFKA_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c"
    assert (tmp_path / "c").is_dir()


def _fake_package(root, with_setup_cfg: bool):
    """Lay out ``root/dstream_kafka/operate/services/environment.py`` as a checkout or a wheel."""
    module = root / "dstream_kafka" / "operate" / "services" / "environment.py"
    module.parent.mkdir(parents=True)
    module.write_text("")
    if with_setup_cfg:
        (root / "setup.cfg").write_text("[metadata]\n")
    return module


def test_in_a_source_checkout_the_cache_is_the_checkouts_cache_folder(tmp_path, monkeypatch):
    from dstream_kafka.operate.services import environment

    # a fake layout, so the test holds whether the suite runs from a checkout or a wheel
    module = _fake_package(tmp_path / "checkout", with_setup_cfg=True)
    monkeypatch.delenv("DSTREAM_KAFKA_CACHE", raising=False)
    monkeypatch.setattr(environment, "__file__", str(module))
    assert environment.cache_dir() == tmp_path / "checkout" / ".cache"


def test_an_installed_package_caches_under_the_users_home(tmp_path, monkeypatch):
    from dstream_kafka.operate.services import environment

    module = _fake_package(tmp_path / "site-packages", with_setup_cfg=False)
    monkeypatch.delenv("DSTREAM_KAFKA_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(environment, "__file__", str(module))
    assert environment.cache_dir() == tmp_path / "home" / ".cache" / "dstream_kafka"
