"""Where a micro-batch's time goes, without and with the ingest stage (issue 26).

`trending` over the same generated files, available-now, `--max-files-per-trigger K` so that
each run has several batches, run once with `ingest_stage=False` and once with `True` in one
JVM (alternated if `--reps` > 1). For every query of the run: Spark's `durationMs` per phase
(addBatch, queryPlanning, walCommit, commitOffsets, latestOffset, getBatch, triggerExecution)
and its state stores' commit time (`stateOperators[].commitTimeMs`), median and total over
the batches that read rows, and the wall time of the whole run.

    .venv/bin/python -m bench.stageprofile --events 200000 --max-files 10 --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from statistics import median
from typing import Any

from bench import inproc
from bench.core import Stopwatch
from bench.workloads import TrendingInput, generate_trending, land_all

PHASES = (
    "triggerExecution",
    "addBatch",
    "queryPlanning",
    "walCommit",
    "commitOffsets",
    "latestOffset",
    "getBatch",
)


def phases(progress: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and total per phase over the batches that read rows, and the state commits."""
    ran = [p for p in progress if (p.get("numInputRows") or 0) > 0]
    out: dict[str, Any] = {"batches": len(ran), "rows": sum(p["numInputRows"] for p in ran)}
    for phase in PHASES:
        values = [float((p.get("durationMs") or {}).get(phase, 0)) for p in ran]
        if values:
            out[f"{phase}_ms_p50"] = median(values)
            out[f"{phase}_ms_total"] = sum(values)
    commits = [
        sum(float(o.get("commitTimeMs") or 0) for o in p.get("stateOperators") or []) for p in ran
    ]
    if commits:
        out["state_commit_ms_p50"] = median(commits)
        out["state_commit_ms_total"] = sum(commits)
    return out


def one(
    data: TrendingInput, landing: Path, scratch: Path, staged: bool, files: int
) -> dict[str, Any]:
    spark = inproc.session()
    state = scratch / f"{'staged' if staged else 'plain'}-{inproc.unique()}"
    flags = {
        "input": [str(landing), f"catalog={data.catalog}"],
        "trigger": "available-now",
        "state_dir": state,
        "sink": f"sqlite:{state / 'trending.db'}",  # as scenario 3
        "max_files_per_trigger": files,
        "ingest_stage": staged,
    }
    watch = Stopwatch()
    run = inproc.start_run(spark, "trending", flags)
    run.wait()
    seconds = watch.seconds()
    queries = {name: phases(q.recentProgress) for name, q in run.queries.items()}
    return {"ingest_stage": staged, "seconds": seconds, "queries": queries}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--max-files", type=int, default=10)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="stageprofile-") as tmp:
        work = Path(tmp)
        data = generate_trending(work / "input", args.events, 2000.0, markers=False)
        land_all(data, work / "landing")
        runs = []
        for rep in range(args.reps):
            order = (False, True) if rep % 2 == 0 else (True, False)
            for staged in order:
                runs.append(one(data, work / "landing", work, staged, args.max_files))
                print(json.dumps(runs[-1], indent=1), flush=True)
    report = {
        "events": data.total_lines,
        "files": len(data.files),
        "max_files_per_trigger": args.max_files,
        "runs": runs,
    }
    args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
