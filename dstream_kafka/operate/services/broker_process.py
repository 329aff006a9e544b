"""The ``dstream-kafka broker start|stop|status`` commands: one CLI-started cluster per machine user.

``start`` runs in the foreground and records its pid, the bootstrap servers and the broker pids
in ``<run dir>/broker.json``; ``stop`` signals that process, which stops the brokers cleanly.
A second ``start`` while the first runs is refused with a message saying how to stop it. The
life cycle is :class:`~dstream_kafka.operate.services.foreground.CommandLineService`'s.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO

from dstream_kafka.operate.services.foreground import CommandLineService, pid_alive, run_dir
from dstream_kafka.operate.services.kafka import KafkaCluster

__all__ = ["BROKER", "run_dir", "read_state", "start_broker_foreground", "stop_broker",
           "broker_status"]

#: The command-line broker's record: ``<run dir>/broker.json``.
BROKER = CommandLineService(name="broker", noun="Kafka broker", article="a",
                            address_key="bootstrap_servers", address_label="bootstrap servers",
                            child_pids_key="broker_pids")


def read_state() -> dict[str, Any] | None:
    """Return the recorded state of a running CLI broker, cleaning up a stale record."""
    return BROKER.read_state()


def start_broker_foreground(brokers: int = 1, data_dir: str | None = None,
                            out: TextIO = sys.stdout) -> int:
    """Start a cluster, print its bootstrap servers and block until SIGINT/SIGTERM or ``stop``."""
    BROKER.refuse_second_start()  # before the cluster object picks ports and folders
    cluster = KafkaCluster(brokers=brokers, data_dir=data_dir)

    def start() -> dict[str, Any]:
        cluster.start()
        return {"bootstrap_servers": cluster.bootstrap_servers, "brokers": brokers,
                "data_dir": str(cluster.data_dir),
                "broker_pids": [p for p in cluster.broker_pids().values() if p]}

    def banner() -> str:
        return (f"Kafka {cluster.version} is running in KRaft mode with {brokers} broker(s); "
                f"data in {cluster.data_dir}.\n"
                "Stop it with Ctrl-C or `dstream-kafka broker stop`.\n")

    def died() -> str | None:
        dead = [n for n, p in cluster.broker_pids().items() if p and not pid_alive(p)]
        return f"Kafka node(s) {dead} exited; stopping.\n" if dead else None

    return BROKER.serve(start, banner, died, cluster.stop, out)


def stop_broker(timeout: float = 60.0, out: TextIO = sys.stdout) -> int:
    """Stop the broker started by ``dstream-kafka broker start``; returns an exit code."""
    return BROKER.stop(timeout, out)


def broker_status(out: TextIO = sys.stdout) -> int:
    """Print the bootstrap servers of the running CLI broker; exit code 1 when none runs."""
    return BROKER.status(out)
