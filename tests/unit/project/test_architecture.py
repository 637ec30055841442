"""The house's import rules, read from the source (no Spark): every import of every module under
src/slipstream, at the top or inside a function, follows them.

- no import circle between modules;
- no module imports another module's private name (`_name`);
- arrows point down: a room imports only rooms below it (ROOMS, bottom first) or itself;
- a built-in pipeline imports only the author's API (`slipstream.api`) and `slipstream.errors`.
docs/architecture.md draws the same rooms."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "src" / "slipstream"

REGISTRY = "slipstream.pipelines.registry"

#: the rooms, bottom first: a room may import the rooms before it, never those after it
ROOMS = (
    "errors",
    "core",
    "jvm",
    "checkpoint",
    "ingest",
    "sources",
    "settings",
    "sinks",
    "api",
    "pipelines",
    "analysis",
    "monitor",
    "runtime",
    "testing",
    "tools",
    "app",
    "__main__",
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


@functools.cache
def parsed(path: Path) -> ast.Module:
    """A module's tree, parsed once per session (every rule below walks every module)."""
    return ast.parse(path.read_text(), str(path))


def imports(path: Path, known: set[str]) -> Iterator[tuple[str, str | None, int]]:
    """(module imported, name taken from it or None, line) for each slipstream import."""
    tree = parsed(path)
    own = module_name(path)
    is_package = path.name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("slipstream"):
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = own.split(".") if is_package else own.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            if not base.startswith("slipstream"):
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in known:
                    yield sub, None, node.lineno
                else:
                    yield base, alias.name, node.lineno


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        for target, _, _ in imports(path, known):
            if target in known and target != name:
                edges[name].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return found


def test_no_import_circle() -> None:
    assert circles(graph()) == []


def test_no_module_imports_another_modules_private_name() -> None:
    mods = modules()
    bad = [
        f"{name}:{line} takes {taken} from {target}"
        for name, path in mods.items()
        for target, taken, line in imports(path, set(mods))
        if taken and taken.startswith("_") and not taken.startswith("__") and target != name
    ]
    assert bad == []


def test_arrows_point_down() -> None:
    mods = modules()
    rank = {r: i for i, r in enumerate(ROOMS)}
    bad = []
    for name, path in mods.items():
        here = room(name)
        if here == "__init__":
            continue
        assert here in rank, f"{name} is in no room of ROOMS: add its folder there"
        for target, _, line in imports(path, set(mods)):
            there = room(target)
            if there != "__init__" and rank[there] > rank[here]:
                bad.append(f"{name}:{line} ({here}) imports {target} ({there})")
    assert bad == []


def test_a_pipeline_imports_only_the_authors_api() -> None:
    mods = modules()
    bad = []
    for name, path in mods.items():
        if room(name) != "pipelines" or name in (
            "slipstream.pipelines",
            "slipstream.pipelines.registry",
        ):
            continue
        for target, _, line in imports(path, set(mods)):
            if not (target == "slipstream.errors" or target.startswith("slipstream.api")):
                bad.append(f"{name}:{line} imports {target}")
    assert bad == []


def test_the_rules_see_every_kind_of_import() -> None:
    """The walker itself: a circle, a private name and an upward arrow are seen."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(edges) == [["a", "b", "c"]]
    assert room("slipstream.runtime.bind") == "runtime"
