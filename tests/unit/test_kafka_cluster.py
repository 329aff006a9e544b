"""The local Kafka cluster's JVM command lines (dstream_kafka/operate/services/kafka.py)."""
from __future__ import annotations

from pathlib import Path

from dstream_kafka.operate.services.kafka import KafkaCluster, _Node


def _argv(cluster: KafkaCluster, node: _Node | None) -> list[str]:
    cluster._java, cluster._classpath = "/usr/bin/java", "/jars/*"
    return cluster._java_argv("kafka.Kafka", "server.properties", node=node)


def _node(tmp_path: Path) -> _Node:
    return _Node(1, tmp_path, port=9092, controller_port=9093)


def test_a_broker_runs_g1_with_full_compilation_by_default(tmp_path: Path) -> None:
    argv = _argv(KafkaCluster(), _node(tmp_path))
    assert "-XX:+UseG1GC" in argv
    assert not any(a.startswith("-XX:TieredStopAtLevel") for a in argv)


def test_a_quick_jvm_broker_runs_c1_only_with_the_serial_collector(tmp_path: Path) -> None:
    argv = _argv(KafkaCluster(quick_jvm=True), _node(tmp_path))
    assert "-XX:TieredStopAtLevel=1" in argv and "-XX:+UseSerialGC" in argv
    assert "-XX:+UseG1GC" not in argv


def test_the_storage_tool_always_runs_quick() -> None:
    argv = _argv(KafkaCluster(), None)
    assert "-XX:TieredStopAtLevel=1" in argv and "-XX:+UseG1GC" not in argv
