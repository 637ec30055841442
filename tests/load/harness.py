"""Cases run one after another under a CPU pressure, and the report (Markdown)."""

from __future__ import annotations

import shutil
import traceback
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tests.load.base import Case, Result
from tests.load.cases import CASES
from tests.load.pressure import CpuPressure
from tests.load.resources import RESOURCE_CASES

#: every case: CPU pressure alone (cases.py), and memory and disk pressure (resources.py)
ALL_CASES: dict[str, Case] = {**CASES, **RESOURCE_CASES}


def run_cases(
    names: Iterable[str],
    factor: int,
    root: Path,
    postgres: Any = None,
    keep: bool = False,
    together: bool = False,
    kafka: Any = None,
) -> tuple[list[Result], str]:
    """Each case in `root/<factor>x-<n>` while `factor` x the cores spin, one after another, or
    all at once (`together`: the suite's way, a shorter time under pressure); the results and
    how the pressure measured (hogs, load). `kafka`: the broker of the cases that read a topic."""
    cases: list[tuple[Case, Path]] = []
    for n, name in enumerate(names):
        workdir = root / f"{factor}x-{n}"
        shutil.rmtree(workdir, ignore_errors=True)
        workdir.mkdir(parents=True)
        cases.append((ALL_CASES[name], workdir))

    def run(case: Case, workdir: Path) -> Result:
        try:
            return case.run(workdir, postgres, kafka)
        except Exception as exc:  # noqa: BLE001 - one case's harness failure loses no other's
            failed = Result(case.name, exact=False, log=traceback.format_exc())
            failed.notes.append(f"the case itself failed: {exc!r}")
            return failed

    with CpuPressure(factor) as pressure:
        if together:
            with ThreadPoolExecutor(len(cases)) as pool:
                results = list(pool.map(lambda c: run(*c), cases))
        else:
            results = [run(case, workdir) for case, workdir in cases]
    for result, (_, workdir) in zip(results, cases, strict=True):
        if result.exact and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return results, pressure.describe()


def report(rows: list[tuple[str, Result]], command: str) -> str:
    lines = [
        f"`{command}`",
        "",
        "| pressure | case | time | outcome |",
        "|---|---|---|---|",
    ]
    for pressure, r in rows:
        outcome = ("exact" if r.exact else "FAILED") + "".join(f"; {n}" for n in r.notes)
        lines.append(f"| {pressure} | {r.case} | {r.seconds:.0f} s | {outcome} |")
    return "\n".join(lines) + "\n"
