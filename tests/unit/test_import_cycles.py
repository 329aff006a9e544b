"""The package's import graph has no cycle, and the runtime does not import operator code.

The graph is read from the source (no module is imported): an edge ``a -> b`` is an import
of ``b`` that runs while ``a`` is being imported, that is, at module level or in a class body.
Imports inside functions run later, and those under ``if TYPE_CHECKING:`` never run, so
neither is an edge. ``from X import name`` is an edge to ``X.name`` when that is a module of
the package, else to ``X``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dstream_kafka"


def _module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_time_statements(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements of ``body`` that run when it runs (not in functions)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _import_time_statements(node.body)
            yield from _import_time_statements(node.orelse)
        elif isinstance(node, ast.ClassDef):
            yield from _import_time_statements(node.body)
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
            yield from _import_time_statements(node.body)
            yield from _import_time_statements(getattr(node, "orelse", []))
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            yield from _import_time_statements(node.body)  # type: ignore[attr-defined]
            for handler in node.handlers:  # type: ignore[attr-defined]
                yield from _import_time_statements(handler.body)
            yield from _import_time_statements(node.orelse)  # type: ignore[attr-defined]
            yield from _import_time_statements(node.finalbody)  # type: ignore[attr-defined]


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool,
             modules: dict[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[:len(package) - (node.level - 1)]
        base = ".".join(package + ([base] if base else []))
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        yield sub if sub in modules else base


def import_graph(*, at_import_time: bool = True) -> dict[str, set[str]]:
    """Return ``{module: modules of the package it imports}``: at import time, or anywhere
    (in functions and under ``TYPE_CHECKING`` too) when ``at_import_time`` is False."""
    modules = _module_names()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        edges = set()
        statements = (_import_time_statements(tree.body) if at_import_time else
                      (n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))))
        for node in statements:
            for target in _targets(node, name, path.name == "__init__.py", modules):
                if target in modules and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """Return one cycle as ``[a, b, ..., a]``, or None when the graph has none."""
    done: set[str] = set()
    for root in sorted(graph):
        if root in done:
            continue
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, Iterator[str]]] = []

        def enter(node: str) -> None:
            path.append(node)
            on_path.add(node)
            stack.append((node, iter(sorted(graph.get(node, ())))))

        enter(root)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return path[path.index(child):] + [child]
            elif child not in done:
                enter(child)
    return None


def test_the_package_has_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_cycle_finder_reports_a_cycle_and_accepts_a_diamond() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"d"}, "c": {"d"}, "d": set()}) is None


def test_imports_in_functions_and_under_type_checking_are_not_edges() -> None:
    graph = import_graph()
    # offsets_json imports offsets at module level; offsets names it only in docstrings
    assert "dstream_kafka.offsets" in graph["dstream_kafka.offsets_json"]
    assert "dstream_kafka.offsets_json" not in graph["dstream_kafka.offsets"]
    # dstream.py builds child streams with imports inside its methods
    assert "dstream_kafka.streaming.windowed" not in graph["dstream_kafka.streaming.dstream"]


def test_only_the_command_line_imports_the_operator_tools() -> None:
    # operate/ holds what operators run at a terminal; a stream or a store must never need it
    outside = {module: sorted(t for t in targets if t.startswith("dstream_kafka.operate"))
               for module, targets in import_graph(at_import_time=False).items()
               if not module.startswith("dstream_kafka.operate") and module != "dstream_kafka.cli"}
    assert {module: found for module, found in outside.items() if found} == {}


# The role folders' rules, as docs/development/architecture.rst draws them: (importer, imported,
# why). Any import counts, also one inside a function.
LAYERS = [
    ("read", "plan", "executors never import driver-side planning"),
    ("read", "ui", "the read path does not import the HTTP metrics"),
    ("read", "stores", "executors read ranges; offsets are stored by the driver"),
    ("stores", "plan", "stores know no batch planning"),
    ("stores", "read", "stores know no executors"),
    ("client", "plan", "client settings and look-ups know no batches"),
    ("client", "read", "client settings know no executor tasks"),
    ("client", "stores", "client settings know no offset storage"),
    ("streaming", "plan", "the engine knows no Kafka"),
    ("streaming", "read", "the engine knows no Kafka"),
    ("streaming", "stores", "the engine knows no Kafka"),
    ("streaming", "client", "the engine knows no Kafka"),
    # formats decode records on executors, after reading: above read, below nothing of the driver
    ("formats", "plan", "decoders know no batch planning"),
    ("formats", "read", "decoders take records, not the read path"),
    ("formats", "stores", "decoders know no offset storage"),
    ("formats", "streaming", "decoders know no engine"),
    ("formats", "ui", "decoders know no HTTP pages"),
    ("read", "formats", "the read path delivers raw records; decoding is the user's choice"),
    ("client", "formats", "client settings know no record formats"),
    ("client", "sql", "client settings know no DataFrames"),
    # decode_frame takes any DataFrame with binary key/value columns: it needs their bytes,
    # not how sql/ read them; and sql/ reads raw bytes, decoding is the user's choice
    ("formats", "sql", "decoding a DataFrame needs its columns, not how it was read"),
    ("sql", "formats", "Kafka DataFrames deliver raw bytes; decoding is the user's choice"),
    ("stores", "sql", "stores know no DataFrames"),
    ("sql", "stores", "a DataFrame reads ranges; offsets are stored by the stream"),
    ("sql", "streaming", "DataFrames are built without the DStream engine (Spark Connect has none)"),
    ("sql", "ui", "DataFrames know no HTTP metrics"),
    ("streaming", "monitor", "the engine knows no Kafka"),
    ("streaming", "sql", "the engine knows no DataFrames (the Connect check is spark_connect.py)"),
    ("read", "client.latest_offsets", "executors need no driver look-up (client/reachability.py)"),
    ("monitor", "plan", "the lag timer is fed by the stream; it knows no planning"),
    ("monitor", "ui", "lag is measured without the page; the page and metrics read it"),
    ("monitor", "stores", "committed offsets come from the stream, not read from stores"),
    ("monitor", "read", "the lag timer runs on the driver"),
    ("read", "monitor", "executors know no lag timer"),
    ("stores", "monitor", "stores know no lag timer"),
    ("client", "monitor", "client look-ups know no lag timer"),
    ("streaming", "write", "the engine knows no Kafka"),
    ("read", "write", "executors' reads know nothing of where results go"),
    ("plan", "write", "batch planning knows no outputs; the output finds its stream"),
    ("plan", "ui", "the planner names no output: the page and metrics register as outputs "
                   "(streaming/outputs.py)"),
    ("streaming", "ui", "the engine names no output: the page registers as a context output"),
    ("stores", "write", "stores know no outputs"),
    ("client", "write", "client settings know no outputs"),
    # the output's librdkafka producer settings come from client/librdkafka.py, as the
    # confluent-kafka consumer's do: neither side borrows the other's translation
    ("write", "read", "outputs take their client settings from client/, not from the read path"),
]


def _under(module: str, part: str) -> bool:
    """Whether ``module`` is ``part`` (a role folder, or a module in one) or lies below it."""
    return module == f"dstream_kafka.{part}" or module.startswith(f"dstream_kafka.{part}.")


def test_the_role_folders_import_only_downwards() -> None:
    graph = import_graph(at_import_time=False)
    broken = sorted(
        f"{module} -> {target} ({why})"
        for module, targets in graph.items() for target in targets
        for importer, imported, why in LAYERS
        if _under(module, importer) and _under(target, imported)
        # the porting path of pyspark.streaming.kafka is the 0-8 facade, documented as such
        and module != "dstream_kafka.streaming.kafka"
        # the DataFrame stream is a stream: it commits its batches' offsets to the store
        and (module, imported) != ("dstream_kafka.sql.stream", "stores"))
    assert broken == []
