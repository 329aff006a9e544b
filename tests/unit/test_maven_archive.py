"""resolve_archive: a distribution archive fetched once, checked against its published SHA-1."""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from dstream_kafka.operate.services.errors import ServiceError
from dstream_kafka.operate.services import maven

COORD = "org.example:dist:1.0:tar.gz:all"


def _publish(repo: Path, sha1: str | None = None) -> Path:
    folder = repo / "org" / "example" / "dist" / "1.0"
    folder.mkdir(parents=True)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = b"runner"
        info = tarfile.TarInfo("app/runner.jar")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    path = folder / "dist-1.0-all.tar.gz"
    path.write_bytes(buffer.getvalue())
    (folder / "dist-1.0-all.tar.gz.sha1").write_text(
        (sha1 or hashlib.sha1(buffer.getvalue()).hexdigest()) + "  dist-1.0-all.tar.gz\n")
    return path


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DSTREAM_KAFKA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(maven, "MAVEN_CENTRAL", (tmp_path / "repo").as_uri())
    return tmp_path / "repo"


def test_an_archive_is_unpacked_once_and_reused_without_the_network(repo):
    published = _publish(repo)
    home = maven.resolve_archive("dist", COORD)
    published.unlink()  # a second call must not download

    assert maven.resolve_archive("dist", COORD) == home
    assert (home / "app" / "runner.jar").read_bytes() == b"runner"


def test_a_checksum_mismatch_is_refused_and_leaves_nothing_that_looks_resolved(repo):
    _publish(repo, sha1="0" * 40)

    with pytest.raises(ServiceError, match="SHA-1"):
        maven.resolve_archive("dist", COORD)

    assert not (maven.cache_dir() / "maven" / "dist" / "unpacked").exists()


def test_a_coordinate_that_is_not_a_tar_gz_archive_is_refused():
    with pytest.raises(ValueError, match="tar.gz"):
        maven.resolve_archive("dist", "org.example:dist:1.0")


def test_the_tests_registry_is_apicurios_runnable_distribution():
    assert maven.apicurio_archive("3.0.9") == "io.apicurio:apicurio-registry-app:3.0.9:tar.gz:all"
