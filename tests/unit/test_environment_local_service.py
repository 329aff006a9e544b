"""LocalService: the with-statement starts a server and stops it, also when the block fails."""

from __future__ import annotations

import pytest

from dstream_kafka.operate.services.environment import LocalService


class Recorder(LocalService):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def start(self) -> Recorder:
        self.calls.append("start")
        return self

    def stop(self) -> None:
        self.calls.append("stop")


def test_with_starts_gives_the_started_server_and_stops_it() -> None:
    server = Recorder()
    with server as running:
        assert running is server
        assert server.calls == ["start"]
    assert server.calls == ["start", "stop"]


def test_with_stops_the_server_when_the_block_raises() -> None:
    server = Recorder()
    with pytest.raises(RuntimeError):
        with server:
            raise RuntimeError("boom")
    assert server.calls == ["start", "stop"]


def test_a_server_must_say_how_it_starts_and_stops() -> None:
    with pytest.raises(TypeError):
        LocalService()  # type: ignore[abstract]
