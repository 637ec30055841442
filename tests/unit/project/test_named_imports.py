"""Every name a message, the README or a documentation page tells a person to import imports
(issue 30, item 3): `from X import a, b` and `import X` in the README and docs/**/*.md (code and
prose) and in every string of the package's source (error messages and their fixes), and every
dotted `slipstream.x.y` name the README, a page or a message points at."""

from __future__ import annotations

import ast
import functools
import importlib
import re
from pathlib import Path

import pytest

from tests.helpers import REPO, SRC

FROM_IMPORT = re.compile(r"\bfrom (slipstream(?:\.\w+)*) import ((?:\w+(?:, *)?)+)")
IMPORT = re.compile(r"(?:^|[\s`(])import (slipstream(?:\.\w+)*)")
DOTTED = re.compile(r"`(slipstream(?:\.[A-Za-z_]\w*)+)")  # the README's `slipstream.x.y`


def strings_of(path: Path) -> list[str]:
    """Every string in a module, f-strings by their literal parts."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
        elif isinstance(node, ast.JoinedStr):
            out.append("".join(v.value for v in node.values if isinstance(v, ast.Constant)))
    return out


@functools.cache
def told() -> dict[str, set[str]]:
    """Where each import or dotted name was found -> the texts that name it. Read once per
    session: every case of the parametrized test below asks it (do not mutate the answer)."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    texts = {str(p.relative_to(REPO)): [p.read_text()] for p in pages}
    for path in sorted((SRC / "slipstream").rglob("*.py")):
        texts[str(path.relative_to(REPO))] = strings_of(path)
    found: dict[str, set[str]] = {}
    for where, strings in texts.items():
        for text in strings:
            for module, names in FROM_IMPORT.findall(text):
                for name in re.split(r", *", names.strip(", ")):
                    found.setdefault(f"from {module} import {name}", set()).add(where)
            for module in IMPORT.findall(text):
                found.setdefault(f"import {module}", set()).add(where)
            for dotted in DOTTED.findall(text) if where.endswith(".md") else ():
                found.setdefault(dotted.rstrip("."), set()).add(where)
    return found


def resolves(statement: str) -> bool:
    if statement.startswith("from "):
        module, name = re.fullmatch(r"from (\S+) import (\w+)", statement).groups()
        return hasattr(importlib.import_module(module), name) or _is_module(f"{module}.{name}")
    if statement.startswith("import "):
        return _is_module(statement.split()[1])
    parts = statement.split(".")  # a dotted name: the longest module, then attributes
    for cut in range(len(parts), 0, -1):
        if _is_module(".".join(parts[:cut])):
            target: object = importlib.import_module(".".join(parts[:cut]))
            for attr in parts[cut:]:
                if not hasattr(target, attr):
                    return False
                target = getattr(target, attr)
            return True
    return False


def _is_module(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


#: dotted names that are not Python names (an entry-point group, a logger, a file's stem)
NOT_PYTHON = {"slipstream.pipelines", "slipstream.toml", "slipstream.db"}


def test_the_scan_finds_the_readmes_and_the_messages_imports() -> None:
    found = told()
    assert "from slipstream.testing import PipelineHarness" in found
    assert "from slipstream.api import not_null" in found  # SINK_KEY_NULLABLE's fix
    assert "from slipstream.api import spark_interval" in found  # "Write your own pipeline"


@pytest.mark.parametrize("statement", sorted(told()))
def test_every_import_a_person_is_told_to_write_works(statement: str) -> None:
    if statement in NOT_PYTHON:
        return
    where = ", ".join(sorted(told()[statement]))
    assert resolves(statement), f"{statement!r} (named in {where}) does not import"
