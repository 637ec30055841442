"""Where a live batch's time goes, batch by batch (issue 40): `trending` with the default
trigger, one file of RATE events landing a second, in this process's JVM, for SECONDS files.
For every batch that read rows: Spark's `durationMs` per phase (bench/stageprofile.py's), its
state stores' commit time and each stateful operator's rows changed and held, as JSON lines;
then each phase's median over the batches after the first SKIP. It shows what a short benchmark
leaves out: how the batch time changes over a run's first minutes.

    .venv/bin/python -m bench.liveprofile --rate 1000 --seconds 60 --out FILE.jsonl

Or the same records from a run already made, out of its event log (a `bench sustained --keep`
run's `STATE/events/trending.jsonl`), the batches from `--from-batch` on:

    .venv/bin/python -m bench.liveprofile --events FILE --from-batch 1000 --out FILE.jsonl
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
        # each operator's time updating its state, and a transformWithState's timers: the time
        # its expired timers took and how many (`--dedup timers`), RocksDB's compaction
        "state_updates_ms": [o.get("allUpdatesTimeMs") for o in operators],
        **{
            name: [(o.get("customMetrics") or {}).get(metric) for o in operators]
            for name, metric in CUSTOM.items()
        },
    }


#: a record's name -> the state operators' custom metric
CUSTOM = {
    "timers_ms": "timerProcessingTimeMs",
    "expired_timers": "numExpiredTimers",
    "compaction_ms": "rocksdbTotalCompactionLatencyMs",
}


def from_events(path: Path, query: str, first: int) -> list[dict[str, Any]]:
    """The records of `query`'s batches from `first` on that read rows, from an event log."""
    records = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            event = json.loads(line)
            progress = event.get("progress") or {}
            if event.get("event") != "progress" or event.get("query") != query:
                continue
            if progress.get("batchId", -1) >= first and (progress.get("numInputRows") or 0) > 0:
                records.append(batch_record(progress))
    return records


def summary(kept: list[dict[str, Any]]) -> dict[str, Any]:
    """Each phase's median, and each operator's (in the progress's order) for the lists."""
    out: dict[str, Any] = {
        f"{phase}_ms_p50": median(float(r[f"{phase}_ms"] or 0) for r in kept) for phase in PHASES
    }
    out["rows_p50"] = median(float(r["rows"] or 0) for r in kept)
    for key in ("state_updates_ms", "state_commit_ms", *CUSTOM):
        width = max(len(r[key]) for r in kept)
        out[f"{key}_p50"] = [
            median(float(r[key][i] or 0) for r in kept if i < len(r[key])) for i in range(width)
        ]
    out["state_ops"] = kept[-1]["state_ops"]
    out["batches"] = len(kept)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=1_000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--skip", type=int, default=15, help="batches left out of the medians")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--events", type=Path, help="a run's event log instead of a run")
    parser.add_argument("--query", default="trending.views", help="with --events")
    parser.add_argument("--from-batch", type=int, default=0, help="with --events")
    args = parser.parse_args(argv)
    if args.events is not None:
        write(args.out, from_events(args.events, args.query, args.from_batch), 0)
        return
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
    write(args.out, records, args.skip)


def write(out: Path, records: list[dict[str, Any]], skip: int) -> None:
    """The records as JSON lines in `out`; the medians of those after the first `skip`."""
    with out.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record) + "\n")
    print(json.dumps(summary(records[skip:]), indent=1))


if __name__ == "__main__":
    main()
