"""The foreground loop behind ``dstream-kafka kafka|hbase start``."""

from __future__ import annotations

import io

import pytest

from dstream_kafka.operate.services.foreground import CommandLineService


def _service() -> CommandLineService:
    return CommandLineService(name="thing", noun="Thing", article="a", address_key="address",
                              address_label="address", child_pids_key="pids")


def test_a_start_that_fails_does_not_say_the_service_stopped(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DSTREAM_KAFKA_RUN_DIR", str(tmp_path))
    out, stopped = io.StringIO(), []

    def start() -> dict[str, str]:
        raise RuntimeError("not ready within 120s")

    with pytest.raises(RuntimeError, match="not ready"):
        _service().serve(start, lambda: "", lambda: None, lambda: stopped.append(True), out=out)
    assert out.getvalue() == "" and stopped == [True]
    assert not (tmp_path / "thing.json").exists()


def test_a_started_service_that_dies_prints_its_address_the_reason_and_that_it_stopped(
        tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DSTREAM_KAFKA_RUN_DIR", str(tmp_path))
    out = io.StringIO()
    code = _service().serve(lambda: {"address": "127.0.0.1:9"}, lambda: "ready\n",
                            lambda: "it died\n", lambda: None, out=out)
    assert code == 1
    assert out.getvalue() == "127.0.0.1:9\nready\nit died\nThing stopped.\n"
