"""7. Start-up: from launching the command to the first result visible in the serving table.

Each variant is a fresh process (a fresh JVM), alternated, over input that is already there:

- `slipstream run mobile --trigger available-now` over the four bundled sample files;
- the same query written by hand in plain PySpark (`python -m bench.worker plain-mobile`),
  writing SQLite through `foreachBatch`;
- `slipstream run trending --trigger available-now` over one file of 2,000 events;
- the floor: a Python process that starts a SparkSession with slipstream's defaults and runs one
  trivial job (`spark.range(1).count()`), then exits.

"First result" is the first row in the output table (polled every 50 ms); "exit" is when the
process has ended (the available-now run finished, the session stopped)."""

from __future__ import annotations

import math
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from bench.core import Context, Result, alternate, median, paired_ratios, summarize_ratio
from bench.procs import Proc, slipstream_command
from bench.stage import param_args
from bench.workloads import generate_trending, land_all

NAME = "startup"
TITLE = "start-up: launch to first result in the serving table"
IN_PROCESS = False


def has_rows(db: Path, table: str) -> bool:
    if not db.exists():
        return False
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute(f'SELECT 1 FROM "{table}" LIMIT 1').fetchone() is not None
    except sqlite3.OperationalError:
        return False


def launch_and_time(
    argv: list[str], log: Path, db: Path | None, table: str | None, timeout: float = 300
) -> dict[str, Any]:
    proc = Proc(argv, log)
    first = float("nan")
    deadline = proc.launched + timeout
    while time.monotonic() < deadline:
        if db is not None and table is not None and math.isnan(first) and has_rows(db, table):
            first = time.monotonic() - proc.launched
        if not proc.alive():
            break
        time.sleep(0.05)
    if db is not None and table is not None and math.isnan(first) and has_rows(db, table):
        first = time.monotonic() - proc.launched  # appeared as the process ended
    code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    exited = time.monotonic() - proc.launched
    if code != 0:
        raise RuntimeError(f"{' '.join(argv[:5])} failed ({code}):\n{proc.tail()}")
    if db is None:
        first = exited  # the floor's "result" is its job, done before it exits
    return {"first_result_s": first, "exit_s": exited}


def run(ctx: Context) -> Result:
    from slipstream.tools.demo import copy_samples

    result = Result(NAME, TITLE)
    reps = ctx.size(2, 4)
    mobile_input = ctx.scratch("mobile-input")
    copy_samples(mobile_input)
    variants = ["session floor", "slipstream mobile", "plain PySpark mobile", "slipstream trending"]
    data = generate_trending(ctx.work / "trending", 2000, 2000.0, markers=False)
    trending_input = ctx.scratch("trending-landing")
    land_all(data, trending_input)
    catalog = data.catalog
    result.params = {"repetitions": reps, "variants": variants}

    def one(variant: str, rep: int) -> dict[str, Any]:
        work = ctx.scratch(f"runs/{variant.replace(' ', '-')}-{rep + 1}")
        db = work / "out.db"
        log = work / "run.log"
        if variant == "session floor":
            argv = [sys.executable, "-m", "bench.worker", "session-floor"]
            return launch_and_time(argv, log, None, None)
        if variant == "plain PySpark mobile":
            argv = [
                sys.executable,
                "-m",
                "bench.worker",
                "plain-mobile",
                "--input",
                str(mobile_input),
                "--db",
                str(db),
                "--checkpoint",
                str(work / "checkpoint"),
            ]
            return launch_and_time(argv, log, db, "counts")
        pipeline = variant.split()[-1]
        args: list[str | Path] = ["run", pipeline, "--state-dir", work, "--sink", f"sqlite:{db}"]
        args += ["--trigger", "available-now", "--quiet", *param_args(ctx)]
        if pipeline == "mobile":
            args += ["--input", mobile_input]
            table = "mobile_action_counts"
        else:
            args += ["--input", trending_input, "--input", f"catalog={catalog}"]
            table = "article_views"
        return launch_and_time(slipstream_command(*args), log, db, table)

    runs = alternate(variants, one, reps, warmup=False, log=ctx.log)
    for v in variants:
        mine = [r for r in runs if r["variant"] == v]
        result.add(
            variant=v,
            first_result_s=median([r["first_result_s"] for r in mine]),
            first_result_min_s=min(r["first_result_s"] for r in mine),
            exit_s=median([r["exit_s"] for r in mine]),
            runs=len(mine),
        )
    result.headline["slipstream mobile / plain PySpark, launch -> first result"] = summarize_ratio(
        paired_ratios(runs, "first_result_s", "slipstream mobile", "plain PySpark mobile")
    )
    result.headline["slipstream mobile - session floor (s, medians)"] = median(
        [r["first_result_s"] for r in runs if r["variant"] == "slipstream mobile"]
    ) - median([r["first_result_s"] for r in runs if r["variant"] == "session floor"])
    return result
