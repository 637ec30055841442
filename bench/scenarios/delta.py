"""20. Delta: `mobile` MERGEd into a Delta table, one batch per file, beside the same query by hand.

Runs on the Spark 4.2 line (`.venv-delta/bin/python -m bench delta`): Delta Lake's jar is built
for it. Each variant is a fresh process over the same generated files, available-now, one file
per batch, so every batch is one MERGE of a few rows into a small table (what a live `update`
output into Delta does):

- **slipstream**: `slipstream run mobile --sink delta:DIR` (its settings: Delta's snapshots
  rebuilt in as many partitions as the local master has cores);
- **slipstream, Delta's 50**: the same with `--conf spark.databricks.delta.snapshotPartitions=50`,
  Delta's own default;
- **bare PySpark**: the mobile query by hand, MERGEd in `foreachBatch` with txnAppId/txnVersion,
  Spark and Delta at their defaults (`python -m bench.worker plain-mobile-delta`);
- **bare PySpark, 2 snapshot partitions**: the same with the setting slipstream chooses.

Measured: the process's wall time from launch to exit, and (slipstream) the median of its batch
lines' seconds after the first batch."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from bench.core import (
    Context,
    Result,
    add_medians,
    alternate,
    median,
    paired_ratios,
    summarize_ratio,
)
from bench.procs import Proc, slipstream_command
from bench.workloads import write_mobile_files

NAME = "delta"
TITLE = "Delta: mobile MERGEd into a Delta table per batch, slipstream beside the query by hand"
IN_PROCESS = False
SNAPSHOT = "spark.databricks.delta.snapshotPartitions"
VARIANTS = (
    "slipstream",
    "slipstream, Delta's 50",
    "bare PySpark",
    "bare PySpark, 2 snapshot partitions",
)


def command(variant: str, input_dir: Path, work: Path) -> list[str]:
    table = work / "table"
    if variant.startswith("bare"):
        argv = [sys.executable, "-m", "bench.worker", "plain-mobile-delta",
                "--input", str(input_dir), "--table", str(table),
                "--checkpoint", str(work / "checkpoint")]  # fmt: skip
        return argv + (["--snapshot-partitions", "2"] if variant.endswith("partitions") else [])
    args: list[str | Path] = [
        "run", "mobile", "--input", input_dir, "--sink", f"delta:{table}", "--state-dir", work,
        "--trigger", "available-now", "--max-files-per-trigger", "1", "--ingest-stage", "false",
        "--late-rows", "false", "--master", "local[2]",
        "--conf", "spark.sql.shuffle.partitions=2",
    ]  # fmt: skip
    if variant.endswith("50"):
        args += ["--conf", f"{SNAPSHOT}=50"]
    return slipstream_command(*args)


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    files = ctx.param("files", 4, 10)
    per_file = ctx.param("lines", 500, 2000)
    reps = ctx.param("reps", 2, 3)
    input_dir = ctx.scratch("input")
    lines = write_mobile_files(input_dir, files, per_file)
    result.params = {"files": files, "lines": lines, "repetitions": reps, "variants": VARIANTS}

    def one(variant: str, rep: int) -> dict[str, Any]:
        work = ctx.scratch(f"runs/{variant.replace(' ', '-').replace(',', '')}-{rep + 1}")
        proc = Proc(command(variant, input_dir, work), work / "run.log")
        code = proc.wait(timeout=900)
        exited = time.monotonic() - proc.launched
        if code != 0:
            raise RuntimeError(f"{variant} failed ({code}):\n{proc.tail()}")
        batches = [b.seconds for b in proc.batch_lines()][1:]
        return {"exit_s": exited, "batch_s": median(batches) if batches else None}

    runs = alternate(VARIANTS, one, reps, warmup=True, log=ctx.log)
    add_medians(result, runs, VARIANTS, {"exit_s": "exit_s", "batch_s": "batch_s"})
    for a, b in (
        ("slipstream", "slipstream, Delta's 50"),
        ("slipstream", "bare PySpark"),
        ("slipstream", "bare PySpark, 2 snapshot partitions"),
        ("bare PySpark, 2 snapshot partitions", "bare PySpark"),
    ):
        result.headline[f"{a} / {b}, launch -> exit"] = summarize_ratio(
            paired_ratios(runs, "exit_s", a, b)
        )
    result.notes.append(
        "exit_s = launch -> process exit (start, every batch, stop); batch_s = the median of "
        "slipstream's batch lines after the first; ratios paired within one repetition"
    )
    return result
