"""``dstream-kafka hbase start|stop|status`` tried as a user would, in real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import happybase
import pytest
from support import process_alive

pytestmark = pytest.mark.integration


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "dstream_kafka.cli", "hbase", *args]


def test_hbase_start_prints_the_gateway_refuses_a_second_start_and_stops(tmp_path: Path) -> None:
    env = {**os.environ, "DSTREAM_KAFKA_RUN_DIR": str(tmp_path / "run")}
    first = subprocess.Popen(_cli("start"), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout is not None and first.stderr is not None
        address = first.stdout.readline().strip()
        if not address.startswith("127.0.0.1:"):  # a failed start: its reason is on stderr
            first.wait(timeout=120)
            pytest.fail(f"hbase start printed {address!r}, exit {first.returncode}: {first.stderr.read()}")
        host, port = address.split(":")
        conn = happybase.Connection(host, int(port), timeout=30000)
        try:
            assert isinstance(conn.tables(), list)
        finally:
            conn.close()
        state = json.loads((tmp_path / "run" / "hbase.json").read_text())
        jvm_pids, data_dir = state["jvm_pids"], Path(state["data_dir"])
        assert jvm_pids and all(process_alive(p) for p in jvm_pids) and data_dir.is_dir()

        second = subprocess.run(_cli("start"), env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 1
        assert "already running" in second.stderr and address in second.stderr
        assert "dstream-kafka hbase stop" in second.stderr
        assert "Traceback" not in second.stderr
        assert len(second.stderr.strip().splitlines()) == 1, second.stderr

        status = subprocess.run(_cli("status"), env=env, capture_output=True, text=True, timeout=60)
        assert status.returncode == 0 and status.stdout.strip() == address

        stop = subprocess.run(_cli("stop"), env=env, capture_output=True, text=True, timeout=120)
        assert stop.returncode == 0, stop.stderr
        assert first.wait(timeout=60) == 0
        assert not (tmp_path / "run" / "hbase.json").exists()
        assert not any(process_alive(p) for p in jvm_pids) and not data_dir.exists()

        after = subprocess.run(_cli("status"), env=env, capture_output=True, text=True, timeout=60)
        assert after.returncode == 1 and "No HBase" in after.stdout
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_hbase_start_with_a_malformed_heap_fails_with_one_usage_line(tmp_path: Path) -> None:
    env = {**os.environ, "DSTREAM_KAFKA_RUN_DIR": str(tmp_path / "run")}
    bad = subprocess.run(_cli("start", "--heap", "lots"), env=env, capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "dstream-kafka: error: --heap must be a JVM size such as 256m or 1g, got 'lots'")
    assert not (tmp_path / "run" / "hbase.json").exists()


def test_hbase_stop_and_status_with_none_running_say_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "DSTREAM_KAFKA_RUN_DIR": str(tmp_path / "run")}
    stop = subprocess.run(_cli("stop"), env=env, capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0 and stop.stderr == ""
    assert stop.stdout == "No HBase started by `dstream-kafka hbase start` is running.\n"
    status = subprocess.run(_cli("status"), env=env, capture_output=True, text=True, timeout=60)
    assert status.returncode == 1
    assert status.stdout == "No HBase started by `dstream-kafka hbase start` is running.\n"
