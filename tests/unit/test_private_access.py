"""Private internals of kafka-python, PySpark and py4j are read only in the two adapters.

``dstream_kafka/_kafka_internals.py`` and ``dstream_kafka/_spark_internals.py`` hold every
use of a foreign private attribute, each behind an accessor that its own test checks on the
installed library. This guard reads the package's source (nothing is imported) and fails,
naming file, line and expression, where any other module reads such an attribute itself.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "dstream_kafka"
ADAPTERS = frozenset({PACKAGE / "_kafka_internals.py", PACKAGE / "_spark_internals.py"})

#: Foreign internals named by the review, whether or not an adapter reads them today.
NAMED = frozenset({"_jvm", "_jsc", "_jrdd", "_gateway", "_coordinator", "_cluster", "_client", "_fetcher",
                   "_subscription"})

#: Underscore names that are public API of their owner, read on objects the package does not define.
PUBLIC_UNDERSCORE = {
    "_replace": "namedtuple's documented method",
    "_getframe": "sys._getframe, documented (CPython)",
    "_current_frames": "sys._current_frames, documented",
    "_PARTITION_EOF": "confluent_kafka.KafkaError's documented code",
    "_AUTO_OFFSET_RESET": "confluent_kafka.KafkaError's documented code",
    "_AUTHENTICATION": "confluent_kafka.KafkaError's documented code",
}

_BY_NAME = frozenset({"getattr", "hasattr", "setattr", "delattr"})


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@functools.lru_cache(maxsize=1)
def _sources() -> dict[Path, ast.Module]:
    """The package's parsed modules (read only by the tests)."""
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def _on_self(node: ast.Attribute) -> bool:
    return isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")


def _named_by_string(node: ast.AST) -> Iterator[str]:
    """Private names given as text: ``getattr(x, "_name")`` and the adapter's ``_internal(x, "_name", ...)``."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in _BY_NAME | {"_internal"} and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)):
        yield node.args[1].value


def foreign_internals() -> frozenset[str]:
    """The private attributes the adapters read on objects of other libraries, and :data:`NAMED`."""
    found = set(NAMED)
    for path in ADAPTERS:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Attribute) and _private(node.attr) and not _on_self(node):
                found.add(node.attr)
            found.update(_named_by_string(node))
    return frozenset(found)


class _Classes:
    """The private names each class of the package defines, and its bases, by class name."""

    def __init__(self, trees: dict[Path, ast.Module]) -> None:
        self.names: dict[str, set[str]] = {}
        self.bases: dict[str, set[str]] = {}
        for tree in trees.values():
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    self.names.setdefault(node.name, set()).update(_defined_in(node))
                    self.bases.setdefault(node.name, set()).update(
                        b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                        if isinstance(b, (ast.Name, ast.Attribute)))

    def owns(self, cls: str, name: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether ``cls`` or a base class of the package defines ``name`` (a foreign base does not count)."""
        if cls in seen or cls not in self.names:
            return False
        return name in self.names[cls] or any(self.owns(b, name, seen | {cls}) for b in self.bases[cls])


def _defined_in(cls: ast.ClassDef) -> set[str]:
    names = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    for node in ast.walk(cls):
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _on_self(node):
            names.add(node.attr)
    return names


def _walk_with_class(node: ast.AST, cls: str | None = None) -> Iterator[tuple[ast.AST, str | None]]:
    """Every node below ``node`` with the name of the innermost class around it."""
    for child in ast.iter_child_nodes(node):
        yield child, cls
        yield from _walk_with_class(child, child.name if isinstance(child, ast.ClassDef) else cls)


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(PACKAGE.parent)}:{getattr(node, 'lineno', '?')}: {ast.unparse(node)}"


def test_the_adapters_name_the_internals_they_read() -> None:
    # the derivation itself works: accessors read these (by attribute or by name)
    assert {"_coordinator", "_client", "_net", "_manager", "_jrdd", "_jsc", "_jvm", "_conf",
            "_active_spark_context"} <= foreign_internals()


def test_foreign_internals_are_read_only_in_the_two_adapters() -> None:
    trees = _sources()
    classes = _Classes(trees)
    foreign = foreign_internals()
    found = []
    for path, tree in trees.items():
        if path in ADAPTERS:
            continue
        for node, cls in _walk_with_class(tree):
            if isinstance(node, ast.Attribute) and node.attr in foreign:
                # self._client of a class that defines _client itself is its own attribute
                if not (_on_self(node) and cls is not None and classes.owns(cls, node.attr)):
                    found.append(_where(path, node))
            elif any(name in foreign for name in _named_by_string(node)):
                found.append(_where(path, node))
    assert found == [], "read these through dstream_kafka._kafka_internals / _spark_internals:\n" + "\n".join(found)


def test_no_module_reads_a_private_attribute_the_package_does_not_define() -> None:
    # A private name defined nowhere in the package belongs to another library: that read
    # goes through an adapter too (unless the name is its owner's public API).
    trees = _sources()
    defined = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                defined.add(node.attr)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                defined.update((a.asname or a.name).split(".")[0] for a in node.names)
    found = [_where(path, node) for path, tree in trees.items() if path not in ADAPTERS
             for node in ast.walk(tree)
             if isinstance(node, ast.Attribute) and _private(node.attr) and not _on_self(node)
             and node.attr not in defined and node.attr not in PUBLIC_UNDERSCORE]
    assert found == [], "\n".join(found)


def test_no_module_outside_the_engine_sets_a_private_attribute_of_another_object() -> None:
    # streaming/ shares its documented engine protocol (streaming/__init__.py); elsewhere a
    # module asks the owner through a method instead of writing its internals.
    trees = _sources()
    found = [_where(path, node) for path, tree in trees.items()
             if path not in ADAPTERS and "streaming" not in path.relative_to(PACKAGE).parts
             for node, cls in _walk_with_class(tree)
             if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
             and _private(node.attr) and not _on_self(node)
             and not (isinstance(node.value, ast.Name) and node.value.id == cls)]
    assert found == [], "\n".join(found)
