"""The session-scoped ``hbase`` fixture for the HBase offset store tests.

It belongs in ``tests/conftest.py`` next to ``kafka``, ``postgres`` and ``zookeeper`` (and then
replaces the module-scoped fixture of ``test_hbase_service.py``); it lives here while that file
is being edited elsewhere. Test modules import it (``from conftest_hbase import
hbase``: pytest puts this folder on ``sys.path``), which pytest treats as a fixture of that module, still session-scoped.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from dstream_kafka.errors import MissingDependencyError
from dstream_kafka.services.hbase import HBaseServer


@pytest.fixture(scope="session")
def hbase() -> Iterator[HBaseServer]:
    """A standalone HBase 2.6 with its Thrift1 gateway on 127.0.0.1 for the whole session."""
    pytest.importorskip("happybase", reason="the hbase extra is not installed")
    server = HBaseServer()
    try:
        server.start(timeout=180.0)
    except MissingDependencyError as exc:  # no Java or Maven here: say what to install
        pytest.skip(str(exc))
    yield server
    server.stop()
