"""Type checks: the package passes mypy --strict, and users' code using the public names passes --strict.

Both run mypy in a subprocess with the project's interpreter, so the result is the one
``python -m mypy`` gives on a command line. They use the checkout's ``.mypy_cache/`` (a folder
per check), the one ``python -m mypy`` keeps: mypy re-checks what changed since (by content
hash), so a warm run takes seconds instead of minutes (the inner loop runs these tests).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A user's program touching every public name the README documents, as users write it.
USER_PROGRAM = '''\
from __future__ import annotations

from typing import Any

from dstream_kafka import (
    EARLIEST,
    LATEST,
    BatchInfo,
    CanCommitOffsets,
    ConsumerRecord,
    ConsumerStrategies,
    ConsumerStrategy,
    DStream,
    DStreamKafkaError,
    HasOffsetRanges,
    KafkaRDD,
    KafkaUtils,
    LocationStrategies,
    LocationStrategy,
    OffsetRange,
    OffsetStore,
    OffsetStores,
    StreamingContext,
    StreamingListener,
    TopicPartition,
    errors,
)


def ranges(topic: str) -> list[OffsetRange]:
    return [OffsetRange(topic, 0, 0, 10), OffsetRange.create(topic, 1, 5, 7)]


def total(topic: str) -> int:
    return sum(r.count() for r in ranges(topic))


def strategy(topic: str, params: dict[str, Any]) -> ConsumerStrategy:
    return ConsumerStrategies.Subscribe([topic], params)


def placement() -> LocationStrategy:
    return LocationStrategies.PreferConsistent


def positions(topic: str) -> dict[TopicPartition, int]:
    return {TopicPartition(topic, 0): EARLIEST, TopicPartition(topic, 1): LATEST}


def wire(ssc: StreamingContext, topic: str, params: dict[str, Any]) -> None:
    stream = KafkaUtils.createDirectStream(ssc, placement(), strategy(topic, params))

    def commit(rdd: KafkaRDD) -> None:
        if isinstance(rdd, HasOffsetRanges) and isinstance(stream, CanCommitOffsets):
            stream.commitAsync(rdd.offsetRanges())

    stream.foreachRDD(commit)


def values(stream: DStream[ConsumerRecord]) -> DStream[Any]:
    return stream.map(lambda record: record.value)


def is_ours(exc: BaseException) -> bool:
    return isinstance(exc, (DStreamKafkaError, errors.DStreamKafkaError))


class Printer(StreamingListener):
    def last(self, info: BatchInfo) -> object:
        return info


STORES: tuple[type[OffsetStore], object] = (OffsetStore, OffsetStores)
'''


def _mypy(*args: str, cwd: Path, cache: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--cache-dir", str(ROOT / ".mypy_cache" / cache), *args]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=600)


def test_package_passes_mypy_strict_with_zero_errors() -> None:
    # setup.cfg [mypy] names the files (dstream_kafka/) and the options, --strict among them
    import configparser

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    assert config.getboolean("mypy", "strict"), "setup.cfg [mypy] must keep strict = True"
    result = _mypy(cwd=ROOT, cache="package")
    assert result.returncode == 0, f"mypy reported errors:\n{result.stdout}{result.stderr}"


def test_user_code_type_checks_strictly_against_the_public_names(tmp_path: Path) -> None:
    program = tmp_path / "user_program.py"
    program.write_text(USER_PROGRAM)
    (tmp_path / "mypy.ini").write_text(textwrap.dedent("""\
        [mypy]
        strict = True
        mypy_path = {root}
        # the package's own modules are checked by the test above
        follow_imports = silent
        [mypy-kafka.*,kafka,kazoo.*,psycopg2.*,psycopg2,happybase.*,py4j.*,confluent_kafka.*]
        ignore_missing_imports = True
        """).format(root=ROOT))
    result = _mypy("--config-file", str(tmp_path / "mypy.ini"), str(program),
                   cwd=tmp_path, cache="user-program")
    assert result.returncode == 0, f"mypy --strict on a user's program:\n{result.stdout}{result.stderr}"
