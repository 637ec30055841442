"""Where a live batch's time goes, batch by batch (issue 40): `trending` with the default
trigger, one file of RATE events landing a second, in this process's JVM, for SECONDS files.
For every batch that read rows: Spark's `durationMs` per phase (bench/stageprofile.py's), its
state stores' commit time and each stateful operator's rows changed and held, as JSON lines;
then each phase's median over the batches after the first SKIP. It shows what a short benchmark
leaves out: how the batch time changes over a run's first minutes.

    .venv/bin/python -m bench.liveprofile --rate 1000 --seconds 60 --out FILE.jsonl
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from statistics import median
from typing import Any

from bench import inproc
from bench.stageprofile import PHASES
from bench.workloads import Pacer, generate_trending

RECENT = "spark.sql.streaming.numRecentProgressUpdates"


def batch_record(progress: dict[str, Any]) -> dict[str, Any]:
    durations = progress.get("durationMs") or {}
    operators = progress.get("stateOperators") or []
    return {
        "batch": progress["batchId"],
        "rows": progress.get("numInputRows"),
        **{f"{phase}_ms": durations.get(phase) for phase in PHASES},
        "state_commit_ms": [o.get("commitTimeMs") for o in operators],
        # each stateful operator's rows: changed in the batch (the aggregation's are the rows the
        # sink writes in update mode) and held after it
        "state_ops": [o.get("operatorName") for o in operators],
        "state_rows_updated": [o.get("numRowsUpdated") for o in operators],
        "state_rows_total": [o.get("numRowsTotal") for o in operators],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1_000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--skip", type=int, default=15, help="batches left out of the medians")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="liveprofile-") as tmp:
        work = Path(tmp)
        data = generate_trending(
            work / "input", args.rate * (args.seconds + 1), float(args.rate), markers=False
        )
        landing = work / "landing"
        landing.mkdir()
        pacer = Pacer(data.files, landing, 1.0)
        pacer.land(0)
        spark = inproc.session(finite=False)  # a live run: Spark's maintenance
        spark.streams.removeListener(inproc.collector())  # PySpark's own bridge: not slipstream's
        flags = {
            "input": [str(landing), f"catalog={data.catalog}"],
            "state_dir": work / "state",
            "sink": f"sqlite:{work / 'state' / 'trending.db'}",
            "ingest_stage": False,
        }
        from slipstream.runtime import partitions, runner
        from slipstream.settings.config import load_settings

        prepared = runner.prepare(load_settings("trending", flags, environ={}))
        # the CLI's session's partitions; every batch's progress kept (Spark keeps 100)
        conf = {**partitions.choose(prepared).conf(), RECENT: str(args.seconds * 4)}
        with inproc.sql_conf(spark, conf):
            run = runner.start(spark, prepared)
        pacer.start(first=1)
        while not pacer.done:
            time.sleep(0.5)
        views = run.queries["views"]
        views.processAllAvailable()
        ran = [json.loads(p.json) for p in views.recentProgress]
        records = [batch_record(p) for p in ran if (p.get("numInputRows") or 0) > 0]
        run.stop()
    with args.out.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
    kept = records[args.skip :]
    summary = {
        f"{phase}_ms_p50": median(float(r[f"{phase}_ms"] or 0) for r in kept) for phase in PHASES
    }
    summary["batches"] = len(kept)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
