"""Complete PySpark 2.4 streaming programs, with only their imports changed, on the real broker.

Each program in ``tests/legacy_programs`` runs as its own process exactly as a user would
start it (``python program.py <args>``, its own SparkContext, ``ssc.awaitTermination()``
forever). The master comes from ``PYSPARK_SUBMIT_ARGS``, as ``spark-submit --master`` gave it
before. The test reads the ``pprint`` blocks from the program's stdout, stops it with
SIGTERM (which stops a streaming context gracefully) and checks the output and the exit.
"""

from __future__ import annotations

import ast
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import pytest

from dstream_kafka.spark_settings import LOW_OVERHEAD_SETTINGS

PROGRAMS = Path(__file__).resolve().parent.parent / "legacy_programs"
TIMEOUT = 120.0  # generous: a process starts its own JVM and Python workers
DASHES = "-" * 43


def _environment() -> dict[str, str]:
    # SIGTERM stops these programs gracefully, as the test expects, only with this key.
    settings = {**LOW_OVERHEAD_SETTINGS, "spark.streaming.stopGracefullyOnShutdown": "true"}
    conf = " ".join(f"--conf {key}={value}" for key, value in settings.items())
    return {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
            "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONUNBUFFERED": "1",
            "PYSPARK_SUBMIT_ARGS": f"--master local[2] {conf} pyspark-shell"}


class Program:
    """A legacy program running in a subprocess, its stdout collected line by line."""

    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self._log = log.open("w")
        self.process = subprocess.Popen(
            [sys.executable, str(PROGRAMS / name), *args], stdout=subprocess.PIPE,
            stderr=self._log, text=True, env=_environment(), cwd=str(log.parent),
            start_new_session=True)
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.log = log

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._lock:
                self.lines.append(line.rstrip("\n"))

    def blocks(self) -> list[tuple[datetime, list[Any]]]:
        """The ``pprint`` blocks printed so far (complete ones only)."""
        with self._lock:
            return parse_pprint(list(self.lines))

    def wait_for(self, predicate: Callable[[list[tuple[datetime, list[Any]]]], bool],
                 what: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not predicate(self.blocks()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {what}; exit status {self.process.poll()}; stdout:\n"
                                     + "\n".join(self.lines[-40:]) + "\nstderr:\n"
                                     + self.log.read_text()[-3000:])
            time.sleep(0.1)

    def terminate(self) -> int:
        """Send SIGTERM and return the exit status."""
        self.process.send_signal(signal.SIGTERM)
        try:
            status = self.process.wait(timeout=TIMEOUT)
        finally:
            self.kill()
        self._reader.join(timeout=10)
        return status

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._log.close()


def parse_pprint(lines: list[str]) -> list[tuple[datetime, list[Any]]]:
    """Parse PySpark's pprint output: dashes, ``Time: <datetime>``, dashes, records, blank."""
    blocks = []
    i = 0
    while i + 3 < len(lines):
        if lines[i] == DASHES and lines[i + 1].startswith("Time: ") and lines[i + 2] == DASHES:
            time_ = datetime.fromisoformat(lines[i + 1][len("Time: "):])
            end = i + 3
            while end < len(lines) and lines[end] != "":
                end += 1
            if end == len(lines):
                break  # the block is still being printed
            blocks.append((time_, [ast.literal_eval(line) for line in lines[i + 3:end]]))
            i = end + 1
        else:
            i += 1
    return blocks


def _totals(blocks: list[tuple[datetime, list[Any]]]) -> Counter[str]:
    totals: Counter[str] = Counter()
    for _, records in blocks:
        for word, count in records:
            totals[word] += count
    return totals


def test_direct_kafka_wordcount_prints_the_word_counts_of_each_batch(kafka, unique, tmp_path):
    topic = unique("words")
    kafka.create_topic(topic)
    kafka.send_messages(topic, {"before start": 2})  # the stream starts at the latest offsets
    program = Program("direct_kafka_wordcount.py", [kafka.bootstrap_servers, topic],
                      tmp_path / "stderr.log")
    try:
        program.wait_for(lambda blocks: len(blocks) >= 1, "first (empty) batch")
        kafka.send_messages(topic, {"a b a": 3, "c": 2})
        program.wait_for(lambda blocks: _totals(blocks) == {"a": 6, "b": 3, "c": 2},
                         "word counts of the new messages")
        assert program.terminate() == 0
    finally:
        program.kill()
    blocks = program.blocks()
    assert _totals(blocks) == {"a": 6, "b": 3, "c": 2}
    times = [t for t, _ in blocks]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert all((b - a).total_seconds() % 2 == 0 for a, b in zip(times, times[1:]))


@pytest.mark.slow  # two runs of a checkpointed driver program: about 38 s
def test_stateful_wordcount_continues_its_running_counts_after_a_restart(kafka, unique, tmp_path):
    topic = unique("words")
    checkpoint = str(tmp_path / "checkpoint")
    kafka.create_topic(topic)
    kafka.send_messages(topic, {"hello world": 3, "hello": 1})
    args = [kafka.bootstrap_servers, topic, checkpoint]

    first = Program("stateful_kafka_wordcount.py", args, tmp_path / "first.log")
    try:
        first.wait_for(lambda blocks: any(r for _, r in blocks), "running counts")
        assert first.terminate() == 0
    finally:
        first.kill()
    assert sorted(next(r for _, r in first.blocks() if r)) == [("hello", 4), ("world", 3)]

    kafka.send_messages(topic, {"hello spark": 2})
    second = Program("stateful_kafka_wordcount.py", args, tmp_path / "second.log")
    try:
        second.wait_for(lambda blocks: any(dict(r).get("spark") for _, r in blocks),
                        "running counts with the new words")
        assert second.terminate() == 0
    finally:
        second.kill()
    blocks = second.blocks()
    # Every block shows the running totals: the first run's counts restored from the
    # checkpoint plus the new messages, each read exactly once.
    assert sorted(blocks[-1][1]) == [("hello", 6), ("spark", 2), ("world", 3)]
    assert all(sorted(r) in ([("hello", 4), ("world", 3)],
                             [("hello", 6), ("spark", 2), ("world", 3)]) for _, r in blocks)
    assert blocks[0][0] > first.blocks()[-1][0]
