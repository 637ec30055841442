"""What every scenario shares: the result model, the table, JSON output, the machine, statistics.

A scenario is a function `run(ctx) -> Result`. It measures, it does not judge: a `Result` holds
the rows of its table, a few headline figures (ratios first), the parameters that reproduce it
and notes on what the figures mean. Nothing here imports Spark."""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slipstream.monitor.eventlog import json_safe

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"


@dataclass
class Context:
    """What a scenario gets: the mode, a scratch directory of its own, and the output stream."""

    quick: bool
    work: Path  # scratch space, deleted after the run unless --keep
    results: Path
    log: Callable[[str], None] = print
    overrides: dict[str, Any] = field(default_factory=dict)  # --set NAME=VALUE

    def size(self, quick: Any, full: Any) -> Any:
        return quick if self.quick else full

    def param(self, name: str, quick: Any, full: Any) -> Any:
        """A scenario parameter: `--set NAME=VALUE` wins, else the quick or the full size."""
        if name in self.overrides:
            return self.overrides[name]
        return self.size(quick, full)

    def scratch(self, name: str) -> Path:
        path = self.work / name
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class Result:
    scenario: str
    title: str
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    headline: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None  # why the scenario could not run
    failed: str | None = None  # ran, but its own verdict failed (the figures are kept)
    machine_before: dict[str, Any] = field(default_factory=dict)
    machine_after: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    command: str = ""
    sections: list[Result] = field(default_factory=list)  # further tables of the same scenario

    def add(self, **row: Any) -> None:
        for key in row:
            if key not in self.columns:
                self.columns.append(key)
        self.rows.append(row)

    def to_dict(self) -> dict[str, Any]:
        return json_safe(asdict(self))


# ---------------------------------------------------------------- the machine and the versions


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def machine_now() -> dict[str, Any]:
    one, five, fifteen = load_average()
    return {
        "at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "load_1m": round(one, 2),
        "load_5m": round(five, 2),
        "load_15m": round(fifteen, 2),
    }


def _mem_total_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _java_version() -> str:
    try:
        out = subprocess.run(
            ["java", "-version"], capture_output=True, text=True, timeout=30, check=False
        )
        return (out.stderr or out.stdout).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def _git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=10, check=False
    )
    return done.stdout.strip()


def _git_commit() -> str:
    try:
        dirty = _git("status", "--porcelain", "--untracked-files=no")
        return _git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def environment() -> dict[str, Any]:
    import importlib.metadata as md

    def version(name: str) -> str:
        try:
            return md.version(name)
        except md.PackageNotFoundError:
            return "not installed"

    return {
        "cores": os.cpu_count(),
        "memory_gib": _mem_total_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "java": _java_version(),
        "pyspark": version("pyspark"),
        "pandas": version("pandas"),
        "slipstream_commit": _git_commit(),
        **machine_now(),
    }


# ---------------------------------------------------------------- statistics


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def percentile(values: Sequence[float], p: float) -> float:
    """The p-th percentile (0-100), linear interpolation between closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def ratio(a: float, b: float) -> float:
    return a / b if b else math.nan


def alternate(
    variants: Sequence[str],
    run_one: Callable[[str, int], dict[str, Any]],
    reps: int,
    warmup: bool = True,
    log: Callable[[str], None] = print,
) -> list[dict[str, Any]]:
    """Run every variant `reps` times, interleaved (A B, then B A, ...) so that drift in the
    machine's load touches every variant alike. A first, discarded round warms the JVM up.
    Returns one dict per measured run, with `variant` and `rep` added."""
    out: list[dict[str, Any]] = []
    if warmup:
        for name in variants:
            log(f"  warm-up {name}")
            run_one(name, -1)
    for rep in range(reps):
        order = list(variants) if rep % 2 == 0 else list(reversed(variants))
        for name in order:
            measured = run_one(name, rep)
            log(f"  rep {rep + 1}/{reps} {name}: " + _brief(measured))
            out.append({"variant": name, "rep": rep, **measured})
    return out


def add_medians(
    result: Result,
    runs: list[dict[str, Any]],
    variants: Sequence[str],
    metrics: dict[str, str | None],
    **fixed: Any,
) -> None:
    """One table row per variant: the `fixed` columns, the variant, the median over its runs
    of each metric (`column: key of a run`, None for a column left blank) and the run count."""
    for variant in variants:
        mine = [r for r in runs if r["variant"] == variant]
        row: dict[str, Any] = {**fixed, "variant": variant}
        for column, key in metrics.items():
            measured = [r[key] for r in mine if key is not None and r.get(key) is not None]
            row[column] = median(measured) if measured else None  # blank where not measured
        result.add(**row, runs=len(mine))


def _brief(measured: dict[str, Any]) -> str:
    parts = []
    for key, value in measured.items():
        if isinstance(value, float):
            parts.append(f"{key}={value:,.3g}" if abs(value) < 100 else f"{key}={value:,.0f}")
        elif isinstance(value, int | str | bool):
            parts.append(f"{key}={value}")
    return " ".join(parts[:6])


def paired_ratios(
    runs: list[dict[str, Any]], metric: str, numerator: str, denominator: str
) -> list[float]:
    """metric(numerator) / metric(denominator) within each repetition (same moment, same load)."""
    by_rep: dict[int, dict[str, float]] = {}
    for run in runs:
        by_rep.setdefault(run["rep"], {})[run["variant"]] = run[metric]
    return [
        ratio(v[numerator], v[denominator])
        for _, v in sorted(by_rep.items())
        if numerator in v and denominator in v
    ]


def summarize_ratio(values: list[float]) -> str:
    """'0.93 (0.90-0.97, 3 pairs)'."""
    if not values:
        return "n/a"
    if len(values) == 1:
        return f"{values[0]:.2f} (1 pair)"
    return f"{median(values):.2f} ({min(values):.2f}-{max(values):.2f}, {len(values)} pairs)"


def ratio_headlines(
    result: Result,
    runs: list[dict[str, Any]],
    metric: str,
    pairs: list[tuple[str, str]],
    label: str,
    prefix: str = "",
) -> None:
    """One headline per (numerator, denominator) variant pair: `prefix a / b, label`."""
    for numerator, denominator in pairs:
        result.headline[f"{prefix}{numerator} / {denominator}, {label}"] = summarize_ratio(
            paired_ratios(runs, metric, numerator, denominator)
        )


@dataclass(frozen=True)
class Comparison:
    """How a scenario compares its variants: a table row per variant with the median of each
    of `metrics` (`add_medians`), and a headline per pair of variants, the paired ratios of
    the `ratio` metric (`ratio_headlines`: `prefix a / b, label`)."""

    metrics: dict[str, str | None]
    ratio: str
    pairs: list[tuple[str, str]]
    label: str
    prefix: str = ""
    warmup: bool = True

    def run(
        self,
        ctx: Context,
        result: Result,
        variants: Sequence[str],
        run_one: Callable[[str, int], dict[str, Any]],
        reps: int,
        **fixed: Any,
    ) -> list[dict[str, Any]]:
        """`alternate` the variants, then add their rows (with the `fixed` columns) and the
        headlines to `result`; returns the measured runs."""
        runs = alternate(variants, run_one, reps, warmup=self.warmup, log=ctx.log)
        add_medians(result, runs, variants, self.metrics, **fixed)
        ratio_headlines(result, runs, self.ratio, self.pairs, self.label, prefix=self.prefix)
        return runs


class Stopwatch:
    def __init__(self) -> None:
        self.started = time.perf_counter()

    def seconds(self) -> float:
        return time.perf_counter() - self.started


# ---------------------------------------------------------------- the table and the files


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 100:
            return f"{value:.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def render_table(result: Result, markdown: bool = False) -> str:
    cols = result.columns
    cells = [[fmt(row.get(c)) for c in cols] for row in result.rows]
    if markdown:
        lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
        lines += ["| " + " | ".join(r) + " |" for r in cells]
        return "\n".join(lines)
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(cols)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def render(result: Result, markdown: bool = False) -> str:
    head = f"## {result.scenario}: {result.title}"
    if result.skipped:
        return f"{head}\nSKIPPED: {result.skipped}"
    parts = [head]
    before, after = result.machine_before, result.machine_after
    if before:
        parts.append(
            f"load {before.get('load_1m')} -> {after.get('load_1m')} (1-min average), "
            f"{result.seconds:.0f} s"
        )
    if result.rows:
        parts.append(render_table(result, markdown))
    for key, value in result.headline.items():
        parts.append(f"* {key}: {fmt(value)}")
    for note in result.notes:
        parts.append(f"- {note}")
    for section in result.sections:
        parts.append(render(section, markdown))
    return "\n".join(parts)


def write_json(results: list[Result], env: dict[str, Any], quick: bool, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    names = "-".join(r.scenario for r in results) if len(results) < 3 else "all"
    path = directory / f"{stamp}-{names}{'-quick' if quick else ''}.json"
    doc = {
        "environment": env,
        "quick": quick,
        "argv": sys.argv,
        "results": [r.to_dict() for r in results],
    }
    path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    return path
