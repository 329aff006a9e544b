"""The driver consumer's group membership against a real broker: static membership.

A Subscribe stream's driver joins its group as a static member (``group.instance.id`` derived
from the group, the application and the stream), so a driver restarted after a SIGKILL takes
its dead predecessor's place at once instead of waiting out its ``session.timeout.ms``.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # `tests.crash` from any working directory

from tests.crash.harness import kill_group  # noqa: E402

from subscribe_restart_probe import SESSION_TIMEOUT_MS  # noqa: E402
from support import wait_until  # noqa: E402

PROBE = Path(__file__).with_name("subscribe_restart_probe.py")

# two driver programs, each a fresh JVM: about 30 s to start each on a loaded 2-core machine
pytestmark = pytest.mark.slow


class Probe:
    """One run of the probe driver in its own session; its stdout lines with their times."""

    def __init__(self, args: list[str], log: Path) -> None:
        self._log = log.open("ab")
        self.process = subprocess.Popen([sys.executable, str(PROBE), *args],
                                        stdout=subprocess.PIPE, stderr=self._log,
                                        start_new_session=True)
        self.seen: dict[str, float] = {}  # first word of a line -> when it was first read
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            self.seen.setdefault(raw.decode(errors="replace").strip().split(" ", 1)[0],
                                 time.monotonic())

    def wait_for(self, word: str) -> float:
        wait_until(lambda: word in self.seen or self.process.poll() is not None,
                   what=f"{word} from the driver", timeout=120)
        assert word in self.seen, f"the driver exited with {self.process.returncode}"
        return self.seen[word]

    def kill(self) -> None:
        kill_group(self.process.pid)
        self.process.wait(30)
        self._log.close()


def test_a_subscribe_stream_restarted_after_sigkill_gets_its_first_batch_before_the_session_expires(
        kafka: Any, unique: Any, tmp_path: Path) -> None:
    topic, group = unique("static"), unique("static-g")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [b"x"] * 10)
    args = [kafka.bootstrap_servers, topic, group]

    first = Probe(args, tmp_path / "first.log")
    try:
        first.wait_for("BATCH")
    finally:
        first.kill()  # never leaves the group: its member stays until its session expires
    second = Probe(args, tmp_path / "second.log")
    try:
        started = second.wait_for("STARTING")
        first_batch = second.wait_for("BATCH") - started
    finally:
        second.kill()

    # A dynamic member waits out the dead one's session, counted from the kill: with 45 s, its
    # first batch came 26.7 s after its ssc.start() (its JVM took 20 s to start); with 90 s it
    # would be 50 s or more. The static member takes its place at once.
    assert SESSION_TIMEOUT_MS >= 90_000
    assert first_batch < 20, first_batch


def test_a_stream_whose_params_name_a_group_instance_id_joins_as_that_member_and_reads(
        kafka: Any, unique: Any, make_ssc: Any) -> None:
    from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies

    topic, group, member = unique("own-static"), unique("own-static-g"), unique("member")
    kafka.create_topic(topic, partitions=2)
    kafka.produce(topic, [b"x"] * 6)
    ssc = make_ssc(0.2)
    stream = KafkaUtils.createDirectStream(
        ssc, LocationStrategies.PreferConsistent,
        ConsumerStrategies.Subscribe([topic], {"bootstrap.servers": kafka.bootstrap_servers,
                                               "group.id": group, "group.instance.id": member,
                                               "auto.offset.reset": "earliest"}))
    seen: list[bytes] = []
    stream.foreachRDD(lambda rdd: seen.extend(rdd.map(lambda r: r.value).collect()))
    ssc.start()
    # The executors read without it (they join no group: kafka-python refuses the id alone).
    wait_until(lambda: len(seen) == 6 or ssc.getState() == "STOPPED", what="the 6 records")
    assert seen == [b"x"] * 6
    members = kafka.admin().describe_groups([group])[group].get("members") or []
    assert [m.get("group_instance_id") for m in members] == [member], members
