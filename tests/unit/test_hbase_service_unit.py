"""HBaseServer without a JVM: configuration, log filtering and the missing-tool messages."""

from __future__ import annotations

import builtins
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.operate.services import hbase as hbase_module
from dstream_kafka.operate.services.hbase import HBaseServer, _filtered_tail
from dstream_kafka.operate.services.hbase_config import mebibytes, site_xml
from dstream_kafka.operate.services.maven import HBASE_VERSION, hbase_artifacts


def test_artifacts_are_the_thrift_gateway_of_the_pinned_release():
    assert HBASE_VERSION == "2.6.1"
    assert hbase_artifacts() == ["org.apache.hbase:hbase-thrift:2.6.1"]


def test_site_xml_escapes_values_and_parses():
    root = ET.fromstring(site_xml({"a.b": "x<y&z", "n": 3}))
    got = {p.findtext("name"): p.findtext("value") for p in root.iter("property")}
    assert got == {"a.b": "x<y&z", "n": "3"}


def test_written_configuration_stays_on_loopback_and_in_its_folder(tmp_path: Path):
    server = HBaseServer(data_dir=tmp_path, site_config={"hbase.regionserver.handler.count": 3})
    server.zookeeper_port, server.master_port, server.regionserver_port, server.thrift_port = (
        2001, 2002, 2003, 2004)
    (tmp_path / "conf").mkdir()
    server._write_config()
    root = ET.parse(tmp_path / "conf" / "hbase-site.xml").getroot()
    site = {p.findtext("name"): p.findtext("value") for p in root.iter("property")}
    assert site["hbase.cluster.distributed"] == "false"
    assert site["hbase.rootdir"] == (tmp_path / "hbase").as_uri()
    assert site["hbase.zookeeper.quorum"] == "127.0.0.1"
    assert site["hbase.zookeeper.property.clientPort"] == "2001"
    assert site["hbase.unsafe.stream.capability.enforce"] == "false"
    assert site["hbase.master.info.port"] == site["hbase.regionserver.info.port"] == "-1"
    assert site["hbase.regionserver.thrift.ipaddress"] == "127.0.0.1"
    assert site["hbase.regionserver.handler.count"] == "3"  # site_config wins
    log4j = (tmp_path / "conf" / "log4j.properties").read_text()
    assert str(tmp_path / "logs" / "hbase.log") in log4j
    # A given data folder is kept, so stop waits for a clean shutdown.
    assert server.stop_grace == 60.0 and HBaseServer().stop_grace == 2.0


def test_log_tail_drops_classpath_and_environment_dumps_and_clips_long_lines(tmp_path: Path):
    log = tmp_path / "hbase.log"
    log.write_text("\n".join([
        "INFO starting",
        "INFO Client environment:java.class.path=" + ":".join(["/x.jar"] * 5000),
        "INFO env:CLASSPATH=/a.jar:/b.jar",
        "INFO vmInputArguments=[-Xmx256m]",
        "ERROR " + "y" * 5000,
        "",
        "FATAL master aborted",
    ]) + "\n")
    tail = _filtered_tail(log, lines=10, width=100)
    assert "class.path" not in tail and "CLASSPATH" not in tail and "vmInputArguments" not in tail
    assert tail.splitlines()[0] == "INFO starting"
    assert tail.splitlines()[1].endswith("[…]") and len(tail.splitlines()[1]) < 120
    assert tail.splitlines()[-1] == "FATAL master aborted"
    assert _filtered_tail(tmp_path / "missing.log") == "(no missing.log)"


def test_jvm_sizes():
    assert mebibytes("256m") == 256 and mebibytes("1g") == 1024 and mebibytes("65536k") == 64
    assert mebibytes("1x") is None


def test_missing_java_gives_the_apt_get_hint_before_anything_starts(monkeypatch):
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "java"
                        else real_which(name, *a, **k))
    monkeypatch.setattr(hbase_module, "hbase_classpath",
                        lambda *a: pytest.fail("resolved jars without Java"))
    server = HBaseServer()
    with pytest.raises(MissingDependencyError) as info:
        server.start()
    message = str(info.value)
    assert "java is required to run HBase" in message
    assert "apt-get update && apt-get install -y openjdk-17-jre-headless" in message
    assert "\n" not in message
    assert server._root is None and server.pids() == []


def test_missing_happybase_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_happybase(name, *args, **kwargs):
        if name == "happybase":
            raise ImportError("No module named 'happybase'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_happybase)
    with pytest.raises(MissingDependencyError, match=r"pip install dstream_kafka\[hbase\]"):
        HBaseServer().start()


def test_missing_maven_is_named_for_hbase_when_the_jars_are_not_cached(monkeypatch, tmp_path):
    monkeypatch.setenv("DSTREAM_KAFKA_CACHE", str(tmp_path / "cache"))
    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "mvn"
                        else real_which(name, *a, **k))
    with pytest.raises(MissingDependencyError) as info:
        hbase_module.hbase_classpath()
    assert "Apache HBase jars" in str(info.value)
    assert "apt-get update && apt-get install -y maven" in str(info.value)


def test_a_killed_command_line_hbase_leaves_no_orphan_jvm_and_no_temporary_folder(monkeypatch,
                                                                                   tmp_path):
    import json
    import subprocess
    import sys

    from dstream_kafka.operate.services.hbase_process import hbase_status, read_hbase_state

    monkeypatch.setenv("DSTREAM_KAFKA_RUN_DIR", str(tmp_path / "run"))
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              start_new_session=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    folder = tmp_path / "dstream-kafka-hbase-abc"
    folder.mkdir()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "hbase.json").write_text(json.dumps({
        "pid": dead.pid, "thrift": "127.0.0.1:1", "jvm_pids": [orphan.pid],
        "data_dir": str(folder), "temporary": True,
    }))
    try:
        assert read_hbase_state() is None
        assert orphan.wait(timeout=10) == -9
        assert not folder.exists()
        assert not (tmp_path / "run" / "hbase.json").exists()
        assert hbase_status() == 1
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()
