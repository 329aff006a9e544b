"""What a new user tripped on, against the real services: the batch page's call site and
``offsets reset --dry-run``."""

from __future__ import annotations

import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any, Callable

from dstream_kafka import ConsumerStrategies, KafkaUtils, LocationStrategies, config
from dstream_kafka.offsets import OffsetRange
from dstream_kafka.stores.uri import open_store
from dstream_kafka.ui import active_page

from support import wait_until


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dstream_kafka.cli", *args], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ))


def test_the_batch_page_names_the_users_foreach_rdd_line_not_the_librarys(
        kafka: Any, make_ssc: Any, unique: Callable[[str], str],
        spark_conf: Callable[[str, str], None]) -> None:
    spark_conf(config.UI_PORT, "0")
    topic = unique("site")
    kafka.create_topic(topic, partitions=1)
    kafka.send_messages(topic, {"a": 3})
    context = make_ssc(0.5)
    params = {"bootstrap.servers": kafka.bootstrap_servers, "group.id": unique("g"),
              "auto.offset.reset": "earliest", "enable.auto.commit": False}
    stream = KafkaUtils.createDirectStream(context, LocationStrategies.PreferConsistent,
                                           ConsumerStrategies.Subscribe([topic], params))
    stream.foreachRDD(lambda rdd: rdd.count())  # the line the page must name
    line = sys._getframe().f_lineno - 1
    context.start()
    page = active_page()
    assert page is not None
    wait_until(lambda: any(p.numRecords for p in stream.recentProgress), what="a batch")
    batch = next(p.batchTime for p in stream.recentProgress if p.numRecords)
    wait_until(lambda: page.state.batch(batch) is not None and page.state.batch(batch).completed,
               what="the page to hear of the batch")
    with urllib.request.urlopen(page.url + f"batch?id={batch}", timeout=10) as reply:
        html = reply.read().decode()
    context.stop(stopSparkContext=False, stopGraceFully=False)
    assert f"foreachRDD at {__file__}:{line}" in html
    assert "direct_stream.py" not in html


def test_offsets_reset_accepts_dry_run_as_kafkas_tool_spells_it_and_writes_nothing(
        kafka: Any, tmp_path: Path, unique: Callable[[str], str]) -> None:
    topic, group = unique("topic"), unique("group")
    kafka.create_topic(topic, partitions=1)
    kafka.send_messages(topic, {"v": 10})
    uri = f"sqlite:///{tmp_path / 'o.db'}"
    with open_store(uri) as store:
        store.commit(group, 1_000, [OffsetRange(topic, 0, 0, 8)])
    out = _cli("offsets", "reset", "--store", uri, "--group", group, "--topic", topic,
               "--to-earliest", "--dry-run", "--bootstrap-servers", kafka.bootstrap_servers)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[1].split()[3:5] == ["8", "0"]  # CURRENT-OFFSET, NEW-OFFSET
    with open_store(uri) as store:
        assert store.load(group) == {(topic, 0): 8}
    both = _cli("offsets", "reset", "--store", uri, "--group", group, "--topic", topic,
                "--to-earliest", "--dry-run", "--execute")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
