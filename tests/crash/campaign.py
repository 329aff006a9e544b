"""The long crash campaign: many seeded kill trials per offset store, one summary table.

Usage (from the repository root)::

    .venv/bin/python -m tests.crash.campaign --trials 50 \\
        --stores sqlite,postgres,checkpoint,kafka,zookeeper,hbase,kafka-eos --seed 1

It starts its own Kafka broker, PostgreSQL, ZooKeeper and HBase (only those the chosen stores
need; 127.0.0.1, temporary folders), runs
``--trials`` trials per store (see :mod:`tests.crash.harness`), prints one line per trial as it
ends and then the table: store, trials, kills, records, lost, duplicated, duplicates outside
the last uncommitted batch, replays over other ranges, HBase result rows lost and duplicated
(hbase only), failed trials. The exit status is 1 when
any trial failed (a lost record, a duplicate of a transactional store, a duplicate outside the
allowed replay, or a run that crashed on its own); their folders are kept for inspection.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from tests.crash.driver import EXACTLY_ONCE

#: The committed results page; the campaign's defaults regenerate it.
REPORT = Path(__file__).resolve().parents[2] / "docs" / "development" / "crash-campaign.rst"
from tests.crash.harness import STORES, Services, TrialResult, TrialSpec, run_trial


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tests.crash.campaign",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=50, help="trials per store (default 50)")
    parser.add_argument("--stores", default=",".join(STORES),
                        help=f"comma-separated stores (default {','.join(STORES)})")
    parser.add_argument("--seed", type=int, default=1, help="campaign seed; trial i uses seed '<seed>-<i>'")
    parser.add_argument("--kills", type=int, default=2,
                        help="SIGKILLs per trial before the final run (default 2)")
    parser.add_argument("--records", type=int, default=2000, help="records per trial (default 2000)")
    parser.add_argument("--partitions", type=int, default=4, help="topic partitions (default 4)")
    parser.add_argument("--backend", default="kafka-python",
                        help="spark.streaming.kafka.consumer.backend of the drivers (and of the "
                             "kafka-eos output): kafka-python (default) or confluent-kafka")
    parser.add_argument("--jobs", type=int, default=1,
                        help="trials run at once (default 1; on 2 cores more mostly adds load)")
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="start no new trial after this many minutes (the table says what ran)")
    parser.add_argument("--workdir", default=None, help="folder for trial folders (default: a temporary one)")
    parser.add_argument("--output", default=str(REPORT),
                        help=f"write the results page here ('-': none; default {REPORT})")
    args = parser.parse_args(argv)
    args.stores = [s.strip() for s in args.stores.split(",") if s.strip()]
    unknown = sorted(set(args.stores) - set(STORES))
    if unknown:
        parser.error(f"unknown stores {unknown}; choose from {','.join(STORES)}")
    return args


def start_services(stores: list[str]) -> tuple[Services, list]:
    """Start the broker and whatever the chosen stores need; return them and their stop order."""
    from dstream_kafka.operate.services.kafka import KafkaCluster

    started = []
    kafka = KafkaCluster(brokers=1).start()
    started.append(kafka)
    services = Services(kafka)
    if "postgres" in stores:
        from tests.support.postgres import PostgresServer

        services.postgres = PostgresServer(password="crash-" + uuid.uuid4().hex).start()
        started.append(services.postgres)
    if "zookeeper" in stores:
        from tests.support.zookeeper import ZooKeeperServer

        services.zookeeper = ZooKeeperServer().start()
        started.append(services.zookeeper)
    if "hbase" in stores:
        from dstream_kafka.operate.services.hbase import HBaseServer

        # 1 GiB, not the suite's 256 MiB: every trial adds tables, and a 256 MiB HBase ran
        # out of heap after about 30 HBase trials ("Terminating due to OutOfMemoryError").
        services.hbase = HBaseServer(heap="1g").start(timeout=180.0)
        started.append(services.hbase)
    return services, started


def table(results: list[TrialResult], stores: list[str]) -> str:
    """The summary table, one row per store."""
    header = ("store", "trials", "kills", "records", "lost", "duplicated", "dup outside last batch",
              "replay mismatch", "rows lost", "rows duplicated", "client hangs", "failed")
    rows = [header]
    for store in stores:
        mine = [r for r in results if r.spec.store == store]
        at_least_once = store not in EXACTLY_ONCE
        rows.append((store, str(len(mine)), str(sum(r.kills for r in mine)),
                     str(sum(r.spec.records for r in mine)), str(sum(r.lost for r in mine)),
                     str(sum(r.duplicated for r in mine)),
                     str(sum(r.outside for r in mine)) if at_least_once else "-",
                     str(sum(r.replay_mismatch for r in mine)) if store == "checkpoint" else "-",
                     str(sum(r.rows_lost for r in mine)) if store == "hbase" else "-",
                     str(sum(r.rows_duplicated for r in mine)) if store == "hbase" else "-",
                     str(sum(r.client_hangs for r in mine)), str(sum(not r.ok for r in mine))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def kill_points(results: list[TrialResult], stores: list[str]) -> str:
    """How the killed runs were ended, per store: timed kills and each crash point of the hook."""
    lines = []
    for store in stores:
        counts: dict[str, int] = {}
        for result in results:
            if result.spec.store != store:
                continue
            for run in result.runs:
                if run.plan == "final" or not run.killed:
                    continue
                kind = run.plan.split(":")[0]
                counts[kind] = counts.get(kind, 0) + 1
        lines.append(f"{store}: " + (", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()))
                                     or "no kills"))
    return "\n".join(lines)


def shown_command(argv: list[str]) -> str:
    """The campaign's command line without the options that only say where files go."""
    shown, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--workdir", "--output"):
            skip = True
        elif not arg.startswith(("--workdir=", "--output=")):
            shown.append(arg)
    return " ".join(["tests.crash.campaign", *shown])


def report(results: list[TrialResult], stores: list[str], command: str, minutes: float,
           planned: int | None = None) -> str:
    """The results page (reStructuredText): how it was made, the table, the kill points."""
    failed = sum(not r.ok for r in results)
    cut_short = (f" (stopped early: {len(results)} of {planned} planned trials ran)"
                 if planned is not None and len(results) < planned else "")
    title = "Crash campaign results"
    return "\n".join([
        title, "=" * len(title), "",
        "Written by the seeded SIGKILL campaign (:doc:`testing`, \"Crash tests\"); regenerate it with::", "",
        f"    .venv/bin/python -m {command}", "",
        f"{len(results)} trials in {minutes:.1f} min{cut_short}, {failed} failed, finished "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores. "
        "Transactional stores (SQLite, PostgreSQL) and Kafka to Kafka exactly-once (kafka-eos, "
        "its output topic read with read_committed) must show 0 lost and 0 duplicated; the others "
        "0 lost and no duplicate outside the one batch that was output but not committed at a "
        "kill; the checkpoint store must replay exactly that batch's ranges; HBase's results "
        "table must hold one row per record.", "",
        "::", "",
        *("    " + line for line in table(results, stores).splitlines()), "",
        "How the killed runs ended (timed kills land anywhere in planning, reading, output and "
        "commit; the others are the driver hook's crash points):", "",
        "::", "",
        *("    " + line for line in kill_points(results, stores).splitlines()), "",
    ])


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    root = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="dstream-kafka-crash-"))
    root.mkdir(parents=True, exist_ok=True)
    print(f"crash campaign: {args.trials} trials x {len(args.stores)} stores ({','.join(args.stores)}), "
          f"{args.kills} kills and {args.records} records per trial, seed {args.seed}, folder {root}",
          flush=True)
    began = time.monotonic()
    # SIGTERM (kill, a CI timeout) ends the campaign like Ctrl-C: services stopped, table printed.
    signal.signal(signal.SIGTERM, _interrupted)
    services, started = start_services(args.stores)
    results: list[TrialResult] = []
    # Trial-major order: an interrupted or time-limited campaign has covered every store alike.
    specs = [TrialSpec(store, f"{args.seed}-{i}", records=args.records, partitions=args.partitions,
                       kills=args.kills, backend=args.backend)
             for i in range(args.trials) for store in args.stores]
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            def one(spec: TrialSpec) -> TrialResult | None:
                if args.max_minutes is not None and time.monotonic() - began > args.max_minutes * 60:
                    return None
                return run_trial(services, spec, root / f"{spec.store}-{spec.seed}")

            try:
                for result in pool.map(one, specs):
                    if result is None:
                        continue
                    results.append(result)
                    print(("ok   " if result.ok else "FAIL ") + result.describe(), flush=True)
                    if result.ok:
                        shutil.rmtree(result.workdir, ignore_errors=True)
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: finish the running trials, start no more
                print("crash campaign: interrupted; waiting for the running trials, then stopping "
                      "the services", flush=True)
                pool.shutdown(wait=True, cancel_futures=True)
    finally:
        for service in reversed(started):
            service.stop()
    print()
    print(table(results, args.stores))
    failed = sum(not r.ok for r in results)
    print(f"\n{len(results)} trials in {(time.monotonic() - began) / 60:.1f} min; {failed} failed"
          + (f" (kept in {root})" if failed else ""))
    if args.output != "-" and results:
        page = report(results, args.stores, shown_command(sys.argv[1:] if argv is None else list(argv)),
                      (time.monotonic() - began) / 60, planned=len(specs))
        Path(args.output).write_text(page, encoding="utf-8")
        print(f"results page written to {args.output}")
    if all(r.ok for r in results) and not args.workdir:
        shutil.rmtree(root, ignore_errors=True)
    return 0 if results and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
