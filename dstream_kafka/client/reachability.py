"""Whether a broker is up: a TCP probe of the bootstrap servers, for the driver and executors.

The driver asks before waiting on a client that would block without a bound (kafka-python's
metadata calls), and before leaving a group; executors ask whether a read that got nothing
faces an outage or a broker that sends nothing. A connection that opens is enough: the probe
says nothing of the protocol, only that waiting on the client can end.
"""

from __future__ import annotations

import socket

__all__ = ["REACHABLE_TIMEOUT_S", "any_reachable"]

#: How long the check that a broker is up waits for a TCP connection to each bootstrap server.
REACHABLE_TIMEOUT_S = 1.0


def any_reachable(servers: str, timeout_s: float = REACHABLE_TIMEOUT_S) -> bool:
    """Return whether any ``host:port`` of the comma-separated ``servers`` accepts a TCP
    connection within ``timeout_s`` (unparsable entries count as unreachable)."""
    for server in servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return True
        except (OSError, ValueError):
            continue
    return False
