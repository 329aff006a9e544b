"""Import paths of 0.1.0 that moved in the role layout keep importing, as the same modules.

``import dstream_kafka.kafka_rdd`` gives the module object of ``dstream_kafka.read.kafka_rdd``
(never a second copy, so classes, caches and ``isinstance`` stay one), with a
``DeprecationWarning`` naming the new path. Objects pickled under an old path (a checkpoint
written by 0.1.0) load too. :data:`MOVED` is also the changelog's table of moves.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Sequence

__all__ = ["MOVED", "install", "new_name"]

#: old module path -> new module path; a package's entry covers everything below it
MOVED: dict[str, str] = {
    "dstream_kafka.kafka_params": "dstream_kafka.client.kafka_params",
    "dstream_kafka.param_checks": "dstream_kafka.client.param_checks",
    "dstream_kafka.security_params": "dstream_kafka.client.security",
    "dstream_kafka.keystores": "dstream_kafka.client.keystores",
    "dstream_kafka.deserializers": "dstream_kafka.client.deserializers",
    "dstream_kafka.direct_stream": "dstream_kafka.plan.direct_stream",
    "dstream_kafka.resume": "dstream_kafka.plan.positions",
    "dstream_kafka.progress": "dstream_kafka.plan.progress",
    "dstream_kafka.commit_queue": "dstream_kafka.plan.commit_queue",
    "dstream_kafka.bounded_run": "dstream_kafka.plan.bounded_run",
    "dstream_kafka.start_options": "dstream_kafka.plan.stream_options",
    "dstream_kafka.offset_resolution": "dstream_kafka.plan.batch_options",
    "dstream_kafka.latest_offsets": "dstream_kafka.client.latest_offsets",
    "dstream_kafka.rate": "dstream_kafka.plan.rate",
    "dstream_kafka.backpressure": "dstream_kafka.plan.backpressure",
    "dstream_kafka.range_calculator": "dstream_kafka.plan.range_calculator",
    "dstream_kafka.consumer_strategy": "dstream_kafka.plan.consumer_strategy",
    "dstream_kafka.offset_reader": "dstream_kafka.client.offset_reader",
    "dstream_kafka.kafka_rdd": "dstream_kafka.read.kafka_rdd",
    "dstream_kafka.placement": "dstream_kafka.read.placement",
    "dstream_kafka.consumer_cache": "dstream_kafka.read.consumer_cache",
    "dstream_kafka.internal_consumer": "dstream_kafka.read.internal_consumer",
    "dstream_kafka.backends": "dstream_kafka.read.backends",
    "dstream_kafka.store_uri": "dstream_kafka.stores.uri",
    "dstream_kafka.offsets_group": "dstream_kafka.stores.mirror",
    "dstream_kafka.metrics": "dstream_kafka.ui.metrics",
    "dstream_kafka.offsets_admin": "dstream_kafka.operate.describe",
    "dstream_kafka.offsets_reset": "dstream_kafka.operate.reset",
    "dstream_kafka.offsets_broker": "dstream_kafka.operate.broker",
    "dstream_kafka.demo": "dstream_kafka.operate.demo",
    "dstream_kafka.ui.terminal": "dstream_kafka.operate.terminal",
    "dstream_kafka.services.spark": "dstream_kafka.spark_settings",
    "dstream_kafka.services": "dstream_kafka.operate.services",
    "dstream_kafka.kafka08": "dstream_kafka.compat.kafka08",
    "dstream_kafka.log_redaction": "dstream_kafka.client.log_redaction",
}
_BY_LENGTH = sorted(MOVED, key=len, reverse=True)


def new_name(fullname: str) -> str | None:
    """Return the module path that ``fullname`` moved to, or None if it did not move."""
    for old in _BY_LENGTH:
        if fullname == old or fullname.startswith(old + "."):
            return MOVED[old] + fullname[len(old):]
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str) -> None:
        self.target = target

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.target}; import it from there",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.target)

    def exec_module(self, module: ModuleType) -> None:
        """The target module is already executed: nothing to run twice."""


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname) if fullname.startswith("dstream_kafka.") else None
        if new is None:
            return None
        # checked first, ahead of the path finder: a moved package's old name must not
        # reach its files through the new package's __path__ as a second module
        found = importlib.util.find_spec(new)
        if found is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _Alias(new), is_package=found.submodule_search_locations is not None)


def install() -> None:
    """Put the finder of moved paths first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())
