"""client/reachability.py: the TCP probe of the bootstrap servers."""

from __future__ import annotations

import socket

from dstream_kafka.client.reachability import any_reachable


def test_a_closed_port_is_not_reachable() -> None:
    assert any_reachable("127.0.0.1:1, not a host:::", timeout_s=0.5) is False


def test_a_listening_port_among_the_servers_is_reachable() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert any_reachable(f"127.0.0.1:1,127.0.0.1:{port}", timeout_s=0.5) is True
