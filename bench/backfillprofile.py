"""Where a backfill's wall time goes, slipstream beside the bare query (issue 40): `trending`
available-now over the same generated files, slipstream's run (`runner.start`, no ingest stage)
and the flagship's bare streaming query (bench/scenarios/flagship.py, Spark's own state store,
a partition a core), alternated in this process's JVM after a discarded round. For each run: the
time to start (slipstream: lock, build, checks, record, the listener's guards; the bare query:
its `start()`), the time until it ended, each batch's phases (Spark's `durationMs`), and the
Spark jobs it ran (from Spark's status store: tasks and milliseconds) and the CPU seconds of
each of the JVM's kinds of threads (executors' tasks, JIT compilers, garbage collectors, ...)
and of this process.

    .venv/bin/python -m bench.backfillprofile --events 1000000 --reps 2 --out FILE.json
        [--variants slipstream,bare] [--maintenance 60s] [--retained]

`--variants slipstream` alone runs one variant in this JVM (a process each, for a comparison
without the other's state or code in the JVM); `--maintenance` sets how often Spark's state
store maintenance unloads a stopped query's state (the benchmark's session: 2 s, Spark's
default 60 s); `--retained` adds the heap in use after a full collection, after each run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from bench import inproc
from bench.core import Stopwatch
from bench.procs import cpu_seconds_of, stat_fields
from bench.scenarios.flagship import start_bare
from bench.stageprofile import PHASES
from bench.workloads import TrendingInput, generate_trending, land_all


def batches(progress: list[Any]) -> list[dict[str, Any]]:
    out = []
    for p in progress:
        entry = json.loads(p.json) if hasattr(p, "json") else p
        durations = entry.get("durationMs") or {}
        operators = entry.get("stateOperators") or []
        out.append(
            {
                "batch": entry["batchId"],
                "rows": entry.get("numInputRows"),
                **{f"{phase}_ms": durations.get(phase) for phase in PHASES},
                # each stateful operator: rows held, rows removed, its own metrics
                "state": [
                    {
                        k: o.get(k)
                        for k in (
                            "operatorName",
                            "numRowsTotal",
                            "numRowsRemoved",
                            "allRemovalsTimeMs",
                            "commitTimeMs",
                            "numShufflePartitions",
                            "customMetrics",
                        )
                    }
                    for o in operators
                ],
            }
        )
    return out


def jobs_since(spark: SparkSession, before: set[int]) -> list[dict[str, Any]]:
    """The jobs run since `before`: id, tasks, when it was submitted (milliseconds after the first
    of them), milliseconds from submission to completion, and Spark's call site."""
    store = spark.sparkContext._jsc.sc().statusStore()  # type: ignore[union-attr]
    jobs = store.jobsList(None)
    out = []
    for i in range(jobs.size()):
        job = jobs.apply(i)
        if job.jobId() in before:
            continue
        start, end = job.submissionTime().get().getTime(), job.completionTime()
        ms = end.get().getTime() - start if end.isDefined() else None
        out.append(
            {"job": job.jobId(), "tasks": job.numTasks(), "at": start, "ms": ms, "name": job.name()}
        )
    first = min((j["at"] for j in out), default=0)
    for j in out:
        j["at"] -= first
    return sorted(out, key=lambda j: j["job"])


def thread_cpu(spark: SparkSession) -> Counter[str]:
    """CPU seconds so far of each kind of the JVM's threads (their names without numbers, as
    Linux keeps them: 15 characters), and this process's as `python`."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    out: Counter[str] = Counter()
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
        except OSError:  # the thread ended meanwhile
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        kind = re.sub(r"\d+", "N", re.sub(r"[#\-\s]*\d+$", "", name))
        out[kind] += cpu_seconds_of(stat_fields(stat))
    times = os.times()
    out["python"] = times.user + times.system
    return out


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
    parser.add_argument("--variants", default="slipstream,bare")
    parser.add_argument("--maintenance", default=inproc.FINITE_MAINTENANCE)
    parser.add_argument("--retained", action="store_true")
    args = parser.parse_args(argv)
    variants = {"slipstream": slipstream_run, "bare": bare_run}
    chosen = args.variants.split(",")
    with tempfile.TemporaryDirectory(prefix="backfillprofile-") as tmp:
        work = Path(tmp)
        data = generate_trending(work / "input", args.events, 2000.0, markers=False)
        land_all(data, work / "landing")
        spark = inproc.session()
        spark.conf.set(inproc.MAINTENANCE_KEY, args.maintenance)  # before the first query
        runs = []
        for rep in range(args.reps + 1):  # round 0: warm-up, not kept
            order = chosen if rep % 2 == 0 else chosen[::-1]
            for name in order:
                before = {job["job"] for job in jobs_since(spark, set())}
                cpu = thread_cpu(spark)
                result = variants[name](spark, data, work / "landing", work / f"{name}-{rep}")
                used = thread_cpu(spark)
                used.subtract(cpu)
                result.update(variant=name, rep=rep, jobs=jobs_since(spark, before))
                result["cpu_s"] = {k: round(v, 2) for k, v in used.most_common() if v >= 0.01}
                if args.retained:
                    result["retained_heap_mib"] = round(
                        inproc.jvm_memory(spark, gc=True)["heap_mib"]
                    )
                print(json.dumps(result), flush=True)
                if rep:
                    runs.append(result)
    totals = {
        name: sum((Counter(r["cpu_s"]) for r in runs if r["variant"] == name), Counter())
        for name in chosen
    }
    summary = {
        "events": data.total_lines,
        "maintenance": args.maintenance,
        "cpu_s_by_thread": {
            name: {k: round(v, 2) for k, v in c.most_common()} for name, c in totals.items()
        },
        "runs": runs,
    }
    print(json.dumps({name: round(sum(c.values()), 2) for name, c in totals.items()}))
    args.out.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
