"""Store cost per batch of the HBase offset store against a real standalone HBase (Thrift1).

Not yet a contender of the exactly-once benchmark (that needs the adapter wiring): this measures
what the store adds per batch, commit and load, for a batch of ``topics`` x ``partitions``
ranges, on 127.0.0.1. Run with ``python -m benchmarks.hbase_store_cost [batches]``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

from dstream_kafka.offsets import OffsetRange
from dstream_kafka.services.hbase import HBaseServer
from dstream_kafka.stores import OffsetStores


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(batches: int = 300, topics: int = 2, partitions: int = 4) -> dict[str, object]:
    """Commit ``batches`` batches and load after each; return p50/p99 in milliseconds."""
    with HBaseServer() as hbase:
        store = OffsetStores.hbase(hbase.host, hbase.thrift_port)
        names = [f"bench-{i}" for i in range(topics)]
        offsets = {(t, p): 0 for t in names for p in range(partitions)}
        commit_ms, load_ms = [], []
        store.load("bench")  # creates the table; not measured
        for i in range(batches):
            ranges = [OffsetRange(t, p, o, o + 100) for (t, p), o in offsets.items()]
            began = time.perf_counter()
            store.commit("bench", 1_700_000_000_000 + i * 1000, ranges)
            commit_ms.append((time.perf_counter() - began) * 1000)
            offsets = {k: o + 100 for k, o in offsets.items()}
            began = time.perf_counter()
            store.load("bench")
            load_ms.append((time.perf_counter() - began) * 1000)
        store.close()
        return {"batches": batches, "ranges_per_batch": topics * partitions, "topics": topics,
                "commit_ms_p50": round(statistics.median(commit_ms), 2), "commit_ms_p99": round(_pct(commit_ms, 0.99), 2),
                "load_ms_p50": round(statistics.median(load_ms), 2), "load_ms_p99": round(_pct(load_ms, 0.99), 2),
                "hbase_startup_s": round(hbase.startup_seconds or 0, 1), "hbase_rss_mib": hbase.rss_bytes() // 2**20}


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 300)))
