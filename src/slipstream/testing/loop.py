"""A warm SparkSession across test runs: `python -m slipstream.testing.loop [PATH ...]
[-- PYTEST ARGS]` keeps one Python process and one SparkSession, runs pytest in it
(`pytest.main`), and runs it again on every change of a `.py` file under the folders of PATH
(default: the working folder), until Ctrl-C. A run pays for Spark's start once: `session()`
(slipstream.testing) and `PipelineHarness(session, ...)` return the live session.

Between two runs, the modules loaded from those folders (the pipeline, its test, a conftest)
are dropped from `sys.modules`, so an edit is imported afresh; the installed packages stay
loaded. Bytecode is not written meanwhile, so an edit within the same second as the previous
one is never read from a stale `.pyc`."""

from __future__ import annotations

import importlib
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TextIO

from slipstream.testing.harness import session

#: what a wait for a change looks at: folders a project's own code is not in
SKIPPED = {".git", ".venv", "venv", "__pycache__", "node_modules", ".mypy_cache", ".ruff_cache"}
POLL_S = 0.5

Snapshot = dict[Path, int]


def roots_of(paths: Sequence[str]) -> list[Path]:
    """The folders watched: each PATH's own (a file's parent), or the working folder."""
    found = [Path(p).resolve() for p in paths] or [Path.cwd().resolve()]
    return sorted({p if p.is_dir() else p.parent for p in found})


def _under(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def snapshot(roots: Sequence[Path]) -> Snapshot:
    """Every `.py` file under `roots` (skipping SKIPPED folders) and its modification time."""
    found: Snapshot = {}
    for root in roots:
        for path in root.rglob("*.py"):
            if SKIPPED.isdisjoint(path.relative_to(root).parts[:-1]):
                try:
                    found[path] = path.stat().st_mtime_ns
                except FileNotFoundError:  # removed while listed
                    continue
    return found


def user_modules(roots: Sequence[Path]) -> list[str]:
    """The loaded modules whose file is under `roots` (not an installed package's)."""
    names = []
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and _under(Path(file).resolve(), roots):
            names.append(name)
    return sorted(names)


def purge(roots: Sequence[Path]) -> list[str]:
    """Drop the modules of `roots` so the next run imports them afresh; their names."""
    names = user_modules(roots)
    for name in names:
        sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return names


def wait_for_change(roots: Sequence[Path], before: Snapshot) -> None:
    """Return once a `.py` file under `roots` was added, removed or modified since `before`
    (a poll of the file times every POLL_S; Ctrl-C ends the loop)."""
    wake = threading.Event()
    while snapshot(roots) == before:
        wake.wait(POLL_S)


def loop(
    paths: Sequence[str],
    pytest_args: Sequence[str] = (),
    *,
    out: TextIO | None = None,
    runs: int | None = None,
    changed: Callable[[Sequence[Path], Snapshot], None] = wait_for_change,
) -> int:
    """Run pytest on `paths` in this process on one warm session, again after each change
    (`changed` returns then), `runs` times (None: until Ctrl-C); the last run's exit code."""
    import pytest

    out = out or sys.stdout
    roots = roots_of(paths)
    began = time.monotonic()
    spark = session()
    app = spark.sparkContext.applicationId
    shown = ", ".join(str(r) for r in roots)
    print(
        f"slipstream test loop: Spark is up ({app}, {time.monotonic() - began:.1f} s); pytest "
        f"runs now and on every change of a .py file under {shown}; Ctrl-C stops",
        file=out,
        flush=True,
    )
    writes_bytecode, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    done, code = 0, 0
    try:
        while True:
            before = snapshot(roots)
            started = time.monotonic()
            code = int(pytest.main([*pytest_args, *paths]))
            done += 1
            print(
                f"slipstream test loop: run {done}: exit {code} in "
                f"{time.monotonic() - started:.1f} s (the same Spark, {app})",
                file=out,
                flush=True,
            )
            if code == pytest.ExitCode.INTERRUPTED or (runs is not None and done >= runs):
                return code
            purge(roots)
            print("slipstream test loop: waiting for a change...", file=out, flush=True)
            changed(roots, before)
    except KeyboardInterrupt:
        return code
    finally:
        sys.dont_write_bytecode = writes_bytecode


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    paths, _, pytest_args = (
        (args[: args.index("--")], "--", args[args.index("--") + 1 :])
        if "--" in args
        else (args, "", [])
    )
    return loop(paths, pytest_args)


if __name__ == "__main__":
    raise SystemExit(main())
