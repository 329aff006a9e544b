"""operate/demo.py's checks before it starts: a broker it cannot reach is one error line within
its timeout, a bad option a usage error, and a real broker passes."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dstream_kafka.cli", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_the_demo_against_an_unreachable_broker_prints_one_error_line_within_its_timeout() -> None:
    started = time.monotonic()
    result = _cli("demo", "--bootstrap-servers", "127.0.0.1:1", "--connect-timeout", "2")
    assert time.monotonic() - started < 60
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dstream-kafka: error:")
    assert "127.0.0.1:1" in lines[0] and "--connect-timeout" in lines[0]


@pytest.mark.parametrize("args", [
    ["--bootstrap-servers", "not:a:host"],
    ["--bootstrap-servers", "not a host:::"],
    ["--rate", "-5"], ["--rate", "0"],
    ["--duration", "-1"], ["--duration", "nan"], ["--duration", "0"],
    ["--batch-seconds", "0"], ["--batch-seconds", "-1"], ["--batch-seconds", "inf"],
    ["--connect-timeout", "-1"],
    ["--topic", "bad topic"], ["--topic", ""], ["--group", ""],
])
def test_a_bad_demo_option_is_a_usage_error_before_anything_starts(args: list[str]) -> None:
    result = _cli("demo", *args, timeout=60)
    assert result.returncode == 2
    assert args[0] in result.stderr and "Traceback" not in result.stderr


def test_the_demo_broker_check_passes_for_a_real_broker(kafka: Any) -> None:
    from dstream_kafka.operate.demo import check_broker

    check_broker(kafka.bootstrap_servers, 10.0)
