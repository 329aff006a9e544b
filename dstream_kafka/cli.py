"""The ``dstream-kafka`` command line: local broker and HBase, set-up checks, the demo and offsets."""

from __future__ import annotations

import argparse
import math
import os
import select
import sys
from typing import Any, Callable, Sequence

from dstream_kafka import __version__
from dstream_kafka.errors import DStreamKafkaError
from dstream_kafka.operate.services.errors import ServiceError

__all__ = ["main", "build_parser"]


def _number(kind: Callable[[str], float], what: str,
            minimum: float, inclusive: bool) -> Callable[[str], float]:
    """Return an argparse type: a finite ``kind`` number above (or at) ``minimum``."""

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        low_ok = value >= minimum if inclusive else value > minimum
        if not math.isfinite(value) or not low_ok:
            bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
            raise argparse.ArgumentTypeError(f"expected {what} {bound}, got {text!r}")
        return value

    return parse


def _servers(text: str) -> str:
    from dstream_kafka.client.kafka_params import check_bootstrap_servers

    try:
        check_bootstrap_servers(text)
    except DStreamKafkaError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _topic(text: str) -> str:
    from dstream_kafka.operate.broker import check_topic_name

    try:
        check_topic_name(text)
    except DStreamKafkaError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _group(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("the consumer group must not be empty")
    return text


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of ``dstream-kafka``."""
    parser = argparse.ArgumentParser(
        prog="dstream-kafka",
        description="Kafka direct streams for PySpark: local broker, set-up checks and demo.",
    )
    parser.add_argument("--version", action="version", version=f"dstream-kafka {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    broker = sub.add_parser("broker", help="run a local Apache Kafka broker (KRaft) on 127.0.0.1")
    broker_sub = broker.add_subparsers(dest="action", metavar="ACTION")
    broker_sub.required = True
    start = broker_sub.add_parser(
        "start", help="start the broker, print its bootstrap servers, run until stopped")
    start.add_argument("--brokers", type=int, default=1, metavar="N",
                       help="number of brokers (default 1; 3 for failure testing)")
    start.add_argument("--data-dir", metavar="DIR",
                       help="keep logs here and reuse them next time (default: a temporary folder)")
    broker_sub.add_parser("stop", help="stop the broker started by `broker start`")
    broker_sub.add_parser("status", help="print the bootstrap servers of the running broker")

    hbase = sub.add_parser(
        "hbase", help="run a local standalone HBase with its Thrift1 gateway on 127.0.0.1")
    hbase_sub = hbase.add_subparsers(dest="action", metavar="ACTION")
    hbase_sub.required = True
    hbase_start = hbase_sub.add_parser(
        "start", help="start HBase, print its Thrift gateway host:port, run until stopped")
    hbase_start.add_argument("--data-dir", metavar="DIR",
                             help="keep the tables here and reuse them next time "
                                  "(default: a temporary folder)")
    hbase_start.add_argument("--heap", default="256m", metavar="SIZE",
                             help="maximum JVM heap, e.g. 256m or 1g (default 256m)")
    hbase_sub.add_parser("stop", help="stop the HBase started by `hbase start`")
    hbase_sub.add_parser("status", help="print the Thrift gateway of the running HBase")

    sub.add_parser("setup", help="check Java and Maven and resolve the Kafka and HBase jars "
                                 "into the cache")

    demo = sub.add_parser("demo", help="run the streaming demo against a local or given broker")
    demo.add_argument("--bootstrap-servers", metavar="HOST:PORT", type=_servers,
                      help="use this broker instead of starting a local one")
    demo.add_argument("--connect-timeout", metavar="SECONDS", default=30.0,
                      type=_number(float, "a number of seconds", 0, False),
                      help="how long to wait for --bootstrap-servers to answer (default 30)")
    demo.add_argument("--topic", default="dstream-demo", type=_topic,
                      help="topic to read (default dstream-demo)")
    demo.add_argument("--group", default="dstream-demo", type=_group,
                      help="consumer group (default dstream-demo)")
    demo.add_argument("--batch-seconds", type=_number(float, "a number of seconds", 0, False),
                      default=1.0, help="batch interval (default 1)")
    demo.add_argument("--rate", type=_number(int, "a whole number of records/s", 1, True),
                      default=200, help="records per second produced (default 200)")
    demo.add_argument("--duration", type=_number(float, "a number of seconds", 0, False),
                      default=None,
                      help="stop gracefully after this many seconds (default: run until Ctrl-C)")
    demo.add_argument("--data-dir", metavar="DIR", default=None,
                      help="folder of the demo's broker data and SQLite file "
                           "(default: demo/ in the cache folder)")

    offsets = sub.add_parser("offsets", help="see and move the offsets a stream committed to a store")
    offsets_sub = offsets.add_subparsers(dest="action", metavar="ACTION")
    offsets_sub.required = True
    describe = offsets_sub.add_parser(
        "describe", help="committed offsets, log start and end offsets and lag per partition")
    describe.add_argument("--store", required=True, metavar="URI",
                          help="the offset store: checkpoint:DIR, kafka://HOST:PORT, sqlite:///PATH, "
                               "postgresql://USER@HOST:PORT/DB, zookeeper://HOST:PORT/ROOT, "
                               "hbase://HOST:PORT/TABLE, structured-streaming:DIR")
    describe.add_argument("--group", required=True, type=_group, help="the stream's consumer group")
    describe.add_argument("--topic", type=_topic, help="only this topic")
    describe.add_argument("--bootstrap-servers", metavar="HOST:PORT", type=_servers,
                          help="brokers to ask for log offsets (default: the kafka:// store's)")
    describe.add_argument("--format", choices=("table", "json", "csv"), default="table",
                          help="table (default), json or csv")
    describe.add_argument("--timeout", metavar="SECONDS", default=10.0,
                          type=_number(float, "a number of seconds", 0, False),
                          help="how long to wait for the store and the broker (default 10)")
    export = offsets_sub.add_parser(
        "export", help='print the committed offsets as offsets JSON ({"topic":{"0":23}})')
    import_ = offsets_sub.add_parser(
        "import", help="write offsets JSON as one new commit of the group (audited in history)")
    for command in (export, import_):
        command.add_argument("--store", required=True, metavar="URI", help="the offset store URI")
        command.add_argument("--group", required=True, type=_group, help="the consumer group")
        command.add_argument("--timeout", metavar="SECONDS", default=10.0,
                             type=_number(float, "a number of seconds", 0, False),
                             help="how long to wait for the store (default 10)")
    export.add_argument("--topic", type=_topic, help="only this topic")
    import_.add_argument("--file", default="-", metavar="FILE",
                         help="the offsets JSON file (default: standard input)")
    import_.add_argument("--bootstrap-servers", metavar="HOST:PORT", type=_servers,
                         help="the brokers of the topics, to check the offsets against (default: the "
                              "kafka:// store's)")
    _add_reset(offsets_sub)
    hist = offsets_sub.add_parser("history", help="committed batches of a group, newest first")
    hist.add_argument("--store", required=True, metavar="URI", help="the offset store URI")
    hist.add_argument("--group", required=True, type=_group, help="the consumer group")
    hist.add_argument("--limit", type=_number(int, "a whole number", 1, True), default=20,
                      help="how many batches (default 20)")
    hist.add_argument("--format", choices=("table", "json"), default="table",
                      help="table (default) or json")
    hist.add_argument("--timeout", metavar="SECONDS", default=10.0,
                      type=_number(float, "a number of seconds", 0, False),
                      help="how long to wait for the store (default 10)")
    return parser


def _add_reset(offsets_sub: Any) -> None:
    reset = offsets_sub.add_parser(
        "reset", help="move a group's stored offsets (kafka-consumer-groups' scenarios); a dry run "
                      "unless --execute")
    reset.add_argument("--store", required=True, metavar="URI", help="the offset store URI")
    reset.add_argument("--group", required=True, type=_group, help="the consumer group")
    scenario = reset.add_mutually_exclusive_group(required=True)
    scenario.add_argument("--to-earliest", action="store_true", help="the log start offset")
    scenario.add_argument("--to-latest", action="store_true", help="the log end offset")
    scenario.add_argument("--to-current", action="store_true", help="the stored offset (unchanged)")
    scenario.add_argument("--to-offset", metavar="N", type=_number(int, "a whole number", 0, True),
                          help="offset N")
    scenario.add_argument("--shift-by", metavar="N", type=int, help="the stored offset plus N (N may be < 0)")
    scenario.add_argument("--to-datetime", metavar="ISO-8601",
                          help="the first offset at or after this time (no zone: local time)")
    scenario.add_argument("--by-duration", metavar="PnDTnHnMnS",
                          help="the first offset at or after now minus this duration")
    scenario.add_argument("--from-file", metavar="FILE",
                          help="offsets from Kafka's CSV (topic,partition,offset) or offsets JSON")
    reset.add_argument("--topic", action="append", default=[], metavar="TOPIC[:P,P]",
                       help="a topic, or some of its partitions (repeatable)")
    reset.add_argument("--all-topics", action="store_true", help="every partition the store holds for the group")
    reset.add_argument("--bootstrap-servers", metavar="HOST:PORT", type=_servers,
                       help="the brokers of the topics (default: the kafka:// store's)")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--execute", action="store_true", help="write the plan (default: a dry run)")
    # Kafka's kafka-consumer-groups spells the default out: accept it
    mode.add_argument("--dry-run", action="store_true",
                      help="show the plan and write nothing (the default)")
    reset.add_argument("--timeout", metavar="SECONDS", default=10.0,
                       type=_number(float, "a number of seconds", 0, False),
                       help="how long to wait for the store and the broker (default 10)")


def _reset_scenario(args: argparse.Namespace) -> Any:
    from dstream_kafka.operate.reset import Scenario

    for kind in ("to_earliest", "to_latest", "to_current"):
        if getattr(args, kind):
            return Scenario(kind.replace("_", "-"))
    for kind in ("to_offset", "shift_by", "to_datetime", "by_duration"):
        if getattr(args, kind) is not None:
            return Scenario(kind.replace("_", "-"), getattr(args, kind))
    return Scenario("from-file", _read_input(args.from_file, "--from-file"))


def _offsets(args: argparse.Namespace) -> int:
    import logging

    # The clients log every refused connection; the command reports one error line instead.
    # Restored afterwards: main() may run inside a caller's process.
    loggers = [logging.getLogger(name) for name in ("kafka", "kazoo", "happybase", "thriftpy2")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        return _offsets_action(args)
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _offsets_action(args: argparse.Namespace) -> int:
    from dstream_kafka.errors import OffsetFencedError, OffsetStoreError
    from dstream_kafka.operate.describe import (describe, export_offsets, format_history, format_rows,
                                             history, import_offsets)

    _ask_postgres_password(args.store)
    try:
        if args.action == "export":
            print(export_offsets(args.store, args.group, topic=args.topic, timeout=args.timeout))
            return 0
        if args.action == "import":
            text = _read_input(args.file, "--file")
            record = import_offsets(args.store, args.group, text, bootstrap_servers=args.bootstrap_servers,
                                    timeout=args.timeout)
            print(f"imported {len(record.ranges)} partitions into group {args.group!r} as batch "
                  f"{record.batch_time_ms}")
            return 0
        if args.action == "reset":
            from dstream_kafka.operate.reset import format_reset, reset

            plan = reset(args.store, args.group, _reset_scenario(args), topics=args.topic,
                         all_topics=args.all_topics, bootstrap_servers=args.bootstrap_servers,
                         execute=args.execute, timeout=args.timeout)
            print(format_reset(plan, executed=args.execute, terminal=sys.stdout.isatty()))
            return 0
        if args.action == "history":
            records = history(args.store, args.group, limit=int(args.limit), timeout=args.timeout)
            print(format_history(records, args.format,
                                 terminal=args.format == "table" and sys.stdout.isatty()))
            return 0
        rows = describe(args.store, args.group, bootstrap_servers=args.bootstrap_servers,
                        topic=args.topic, timeout=args.timeout)
    except OffsetFencedError as exc:
        if args.action == "reset":
            raise
        raise OffsetStoreError(f"--store: {exc} A stream is committing to this group: stop it "
                               "and import again") from None
    except OffsetStoreError as exc:
        if "upgrade dstream_kafka" in str(exc).lower():  # a store of a newer layout: nothing to check about the URI
            raise OffsetStoreError(f"--store: {exc}") from None
        raise OffsetStoreError(f"--store: {str(exc).rstrip('. ')}; check the URI and that the service runs "
                               f"(waited up to --timeout {args.timeout:g}s)") from None
    print(format_rows(rows, args.format, terminal=args.format == "table" and sys.stdout.isatty()))
    return 0


def _ask_postgres_password(uri: str) -> None:
    """Prompt for a postgresql:// store's password when libpq has none (no PGPASSWORD, no
    password file) and a person is at the terminal; getpass never echoes it, and it reaches
    libpq through this process's environment only."""
    import getpass
    import os

    if not uri.lower().startswith("postgresql:") or os.environ.get("PGPASSWORD"):
        return
    passfile = os.environ.get("PGPASSFILE") or os.path.expanduser("~/.pgpass")
    if os.path.isfile(passfile) or not (sys.stdin.isatty() and sys.stderr.isatty()):
        return  # libpq reads the file; without a terminal a missing password fails with libpq's message
    from dstream_kafka.stores.uri import parse_store_uri

    parsed = parse_store_uri(uri)  # a malformed URI is refused before anyone is asked anything
    os.environ["PGPASSWORD"] = getpass.getpass(f"Password for {parsed.user}@{parsed.host_list()}: ")


def _read_input(path: str, option: str) -> str:
    """Return the UTF-8 text of ``path`` (``-``: standard input), or one error line naming ``option``."""
    from dstream_kafka.errors import ConfigurationError

    try:
        if path == "-":
            data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
        else:
            with open(path, "rb") as fh:
                data = fh.read()
    except OSError as exc:
        raise ConfigurationError(f"{option}: cannot read {path!r} ({exc.strerror}); give an offsets "
                                 "file or - for standard input") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = "standard input" if path == "-" else repr(path)
        raise ConfigurationError(
            f"{option}: {where} is not UTF-8 text (byte 0x{data[exc.start]:02x} at position {exc.start}); "
            "save the offsets as UTF-8 and try again; nothing was written") from None


#: The exit code of a command whose reader closed standard output (``| head``): a Unix tool
#: killed by SIGPIPE exits 128 + 13 in the shell's words.
EXIT_PIPE_CLOSED = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``dstream-kafka``; returns the process exit code (0 success, 1 failure, 2 usage,
    :data:`EXIT_PIPE_CLOSED` when the reader of standard output stopped early, as in
    ``dstream-kafka offsets history ... | head``: the command then ends quietly, like a Unix
    tool, instead of a BrokenPipeError traceback)."""
    parser = build_parser()
    args = parser.parse_args(argv)  # argparse drops its own output (--help, --version) into a closed pipe
    try:
        code = _run(parser, args)
        sys.stdout.flush()  # a reader that stopped early is found here, not at the exit's flush
        return code
    except BrokenPipeError:
        if not _stdout_closed():
            raise  # a broken connection of a client, not our reader: the error it is
        # Python flushes stdout once more at exit: send what is left nowhere, silently.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_PIPE_CLOSED


def _stdout_closed() -> bool:
    """Whether the reader of standard output has gone (a pipe or socket with no reader left)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    if not hasattr(select, "poll"):
        return True  # no poll (Windows): a BrokenPipeError seen here is most likely stdout's
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the parsed command; returns its exit code."""
    try:
        if args.command == "broker":
            from dstream_kafka.operate.services import broker_process

            if args.action == "start":
                if args.brokers < 1:
                    parser.error("--brokers must be at least 1")
                return broker_process.start_broker_foreground(args.brokers, args.data_dir)
            if args.action == "stop":
                return broker_process.stop_broker()
            return broker_process.broker_status()
        if args.command == "hbase":
            from dstream_kafka.operate.services import hbase_process

            if args.action == "start":
                if _jvm_size(args.heap) is None:
                    parser.error(f"--heap must be a JVM size such as 256m or 1g, got {args.heap!r}")
                return hbase_process.start_hbase_foreground(args.data_dir, args.heap)
            if args.action == "stop":
                return hbase_process.stop_hbase()
            return hbase_process.hbase_status()
        if args.command == "setup":
            return _setup()
        if args.command == "demo":
            import logging

            from dstream_kafka.operate.demo import run_demo

            # A log line would tear the demo's live view; its Streaming page shows the lag
            # verdict instead. Restored afterwards: main() may run inside a caller's process.
            lag_log = logging.getLogger("dstream_kafka.monitor.lag")
            level = lag_log.level
            lag_log.setLevel(logging.ERROR)
            try:
                return run_demo(args)
            finally:
                lag_log.setLevel(level)
        if args.command == "offsets":
            return _offsets(args)
    except (DStreamKafkaError, ServiceError) as exc:
        print(f"dstream-kafka: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    parser.error(f"unknown command {args.command}")
    return 2  # pragma: no cover - parser.error exits


def _jvm_size(text: str) -> int | None:
    """Return a JVM memory size (``256m``, ``1g``, ``524288k``) in bytes, or None if malformed."""
    units = {"k": 2**10, "m": 2**20, "g": 2**30}
    body, unit = (text[:-1], units[text[-1].lower()]) if text[-1:].lower() in units else (text, 1)
    return int(body) * unit if body.isdigit() and int(body) > 0 else None


def _setup() -> int:
    from dstream_kafka.operate.services.environment import require_java, require_maven
    from dstream_kafka.operate.services.hbase import prepare_hbase
    from dstream_kafka.operate.services.kafka import kafka_classpath
    from dstream_kafka.operate.services.maven import HBASE_VERSION, KAFKA_VERSION

    print(f"java: {require_java()}")
    print(f"maven: {require_maven()}")
    jars = kafka_classpath().split(":")
    print(f"Apache Kafka {KAFKA_VERSION}: {len(jars)} jars resolved into {jars[0].rsplit('/', 2)[0]}")
    hbase_jars, launcher = prepare_hbase()
    print(f"Apache HBase {HBASE_VERSION}: {len(hbase_jars)} jars resolved into "
          f"{hbase_jars[0].parent.parent}; " + (
              f"one-JVM launcher compiled into {launcher}" if launcher is not None else
              "no javac (install openjdk-17-jdk-headless): the Thrift gateway runs as a second JVM"))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
