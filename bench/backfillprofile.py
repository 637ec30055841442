"""Where a backfill's wall time goes, slipstream beside the bare query (issue 40): `trending`
available-now over the same generated files, slipstream's run (`runner.start`, no ingest stage)
and the flagship's bare streaming query (bench/scenarios/flagship.py, Spark's own state store,
a partition a core), alternated in this process's JVM after a discarded round. For each run: the
time to start (slipstream: lock, build, checks, record, the listener's guards; the bare query:
its `start()`), the time until it ended, each batch's phases (Spark's `durationMs`), and the
Spark jobs it ran (from Spark's status store: tasks and milliseconds).

    .venv/bin/python -m bench.backfillprofile --events 1000000 --reps 2 --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench import inproc
from bench.core import Stopwatch
from bench.scenarios.flagship import start_bare
from bench.stageprofile import PHASES
from bench.workloads import TrendingInput, generate_trending, land_all


def batches(progress: list[Any]) -> list[dict[str, Any]]:
    out = []
    for p in progress:
        entry = json.loads(p.json) if hasattr(p, "json") else p
        durations = entry.get("durationMs") or {}
        out.append(
            {
                "batch": entry["batchId"],
                "rows": entry.get("numInputRows"),
                **{f"{phase}_ms": durations.get(phase) for phase in PHASES},
            }
        )
    return out


def jobs_since(spark: SparkSession, before: set[int]) -> list[dict[str, Any]]:
    """The jobs run since `before`: id, tasks and milliseconds from submission to completion."""
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
    jobs = store.jobsList(None)
    out = []
    for i in range(jobs.size()):
        job = jobs.apply(i)
        if job.jobId() in before:
            continue
        start, end = job.submissionTime(), job.completionTime()
        ms = end.get().getTime() - start.get().getTime() if end.isDefined() else None
        out.append({"job": job.jobId(), "tasks": job.numTasks(), "ms": ms})
    return sorted(out, key=lambda j: j["job"])


def slipstream_run(spark: SparkSession, data: TrendingInput, landing: Path, scratch: Path) -> dict:
    from slipstream.runtime import partitions, runner
    from slipstream.settings.config import load_settings

    flags = {
        "input": [str(landing), f"catalog={data.catalog}"],
        "trigger": "available-now",
        "state_dir": scratch,
        "sink": f"sqlite:{scratch / 'trending.db'}",
        "ingest_stage": False,
    }
    prepared = runner.prepare(load_settings("trending", flags, environ={}))
    with inproc.sql_conf(spark, partitions.choose(prepared).conf()):
        watch = Stopwatch()
        run = runner.start(spark, prepared)
        started = watch.seconds()
    run.wait()
    return {
        "start_s": started,
        "total_s": watch.seconds(),
        "batches": [b for q in run.queries.values() for b in batches(q.recentProgress)],
    }


def bare_run(spark: SparkSession, data: TrendingInput, landing: Path, scratch: Path) -> dict:
    scratch.mkdir(parents=True)
    watch = Stopwatch()
    query = start_bare(spark, landing, data.catalog, scratch, [])
    started = watch.seconds()
    query.awaitTermination()
    seconds = watch.seconds()
    return {"start_s": started, "total_s": seconds, "batches": batches(query.recentProgress)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    variants = {"slipstream": slipstream_run, "bare": bare_run}
    with tempfile.TemporaryDirectory(prefix="backfillprofile-") as tmp:
        work = Path(tmp)
        data = generate_trending(work / "input", args.events, 2000.0, markers=False)
        land_all(data, work / "landing")
        spark = inproc.session()
        runs = []
        for rep in range(args.reps + 1):  # round 0: warm-up, not kept
            order = ["slipstream", "bare"] if rep % 2 == 0 else ["bare", "slipstream"]
            for name in order:
                before = {job["job"] for job in jobs_since(spark, set())}
                result = variants[name](spark, data, work / "landing", work / f"{name}-{rep}")
                result.update(variant=name, rep=rep, jobs=jobs_since(spark, before))
                print(json.dumps(result), flush=True)
                if rep:
                    runs.append(result)
    args.out.write_text(json.dumps({"events": data.total_lines, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
