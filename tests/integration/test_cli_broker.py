"""``dstream-kafka broker start|stop`` tried as a user would, in real subprocesses."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from kafka import KafkaAdminClient


def _cli(*args: str, env: dict) -> list[str]:
    return [sys.executable, "-m", "dstream_kafka.cli", *args]


def test_broker_start_prints_bootstrap_servers_refuses_a_second_start_and_stops(tmp_path):
    env = {**os.environ, "DSTREAM_KAFKA_RUN_DIR": str(tmp_path / "run")}
    first = subprocess.Popen(_cli("broker", "start", env=env), env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        bootstrap = first.stdout.readline().strip()
        assert bootstrap.startswith("127.0.0.1:"), first.stderr.read() if first.poll() else bootstrap
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        assert len(admin.describe_cluster()["brokers"]) == 1
        admin.close()

        second = subprocess.run(_cli("broker", "start", env=env), env=env, capture_output=True,
                                text=True, timeout=120)
        assert second.returncode == 1
        assert "already running" in second.stderr
        assert bootstrap in second.stderr
        assert "dstream-kafka broker stop" in second.stderr
        assert "Traceback" not in second.stderr

        status = subprocess.run(_cli("broker", "status", env=env), env=env, capture_output=True,
                                text=True, timeout=60)
        assert status.stdout.strip() == bootstrap

        stop = subprocess.run(_cli("broker", "stop", env=env), env=env, capture_output=True,
                              text=True, timeout=120)
        assert stop.returncode == 0, stop.stderr
        assert first.wait(timeout=60) == 0
        assert not (tmp_path / "run" / "broker.json").exists()
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()


def test_broker_start_with_a_data_dir_keeps_records_across_restarts(tmp_path):
    from dstream_kafka.operate.services.kafka import KafkaCluster

    data = tmp_path / "kafka-data"
    with KafkaCluster(data_dir=data) as first:
        first.create_topic("kept", partitions=1)
        first.produce("kept", ["a", "b", "c"])
    assert (data / "cluster.json").is_file()
    with KafkaCluster(data_dir=data) as second:
        deadline = time.monotonic() + 30
        while second.end_offsets("kept") != {0: 3} and time.monotonic() < deadline:
            time.sleep(0.5)
        assert second.end_offsets("kept") == {0: 3}
