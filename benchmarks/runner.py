"""Child process that runs one Python contender: ``python -m benchmarks.runner SPEC.json``.

The spec (written by :mod:`benchmarks.harness`) holds the contender and workload names, the
broker address, the topic description (:class:`benchmarks.broker.TopicInfo` as a dict) and
``result_path``, where this process writes its result as JSON. A failure writes
``{"error": ...}`` there and exits non-zero, so the harness can record it and go on.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Dispatch ``spec`` to its contender family and return the result dict."""
    name = spec["contender"]
    if name.startswith("raw-"):
        from benchmarks.contenders.raw import run_raw

        return run_raw(spec)
    from benchmarks.contenders.pyspark_contenders import run_pyspark

    return run_pyspark(spec)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(Path(args[0]).read_text())
    out = Path(spec["result_path"])
    try:
        result = run(spec)
    except BaseException as exc:  # record any failure, including KeyboardInterrupt
        out.write_text(json.dumps({"error": f"{type(exc).__name__}: {exc}",
                                   "traceback": traceback.format_exc()}))
        return 1
    out.write_text(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
