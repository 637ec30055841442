"""What a micro-batch pays to write its checkpoint files on a local disk (issue 40, the live
rows): a file stream over a landing folder of `--files` files, one new file a batch, each
variant in a JVM of its own, alternated, `--pairs` pairs, two shapes (`--shape`):

- `plain`: the files into Spark's no-op sink (the offset, commit and source logs only);
- `stateful`: a watermark and a one-minute window count in update mode (state files too).

Variants: `hadoop`, Hadoop's own local file system (without its native library it starts a
`chmod` for every file it creates and a `readlink` for every rename through its FileContext),
and `slipstream`, the session's default on a local master (slipstream.jvm.LocalFiles). Both run
on slipstream's session (settings/session.py) with the same settings otherwise. The first
`WARMUP_BATCHES` batches of each run are not kept; medians of Spark's own per-batch phases
(`durationMs`) and of the stateful operator's commit time.

    .venv/bin/python -m bench.checkpointfiles [--files 1500 --batches 80 --pairs 2]
        [--shape plain|stateful] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import inproc

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("hadoop", "slipstream")
WARMUP_BATCHES = 20
PHASES = ("latestOffset", "walCommit", "commitOffsets", "addBatch", "triggerExecution")
SHAPES = ("plain", "stateful")


def worker(variant: str, shape: str, files: int, batches: int, work: Path) -> dict[str, Any]:
    """One run: `files` files landed before the start, then one a batch."""
    from pyspark.sql import functions as F

    from slipstream.settings.session import build_session
    from slipstream.settings.slipstream_jar import LOCAL_FILES

    landing = work / "landing"
    landing.mkdir(parents=True)
    for i in range(files):
        (landing / f"old-{i:06d}.json").write_text('{"k": "a", "t": "2026-12-03T00:00:00"}\n')
    theirs = inproc.HADOOP_FILES if variant == "hadoop" else {}
    conf = {"spark.sql.shuffle.partitions": "2", **theirs}
    spark = build_session(master="local[2]", conf=conf, app_name=variant, log_level="ERROR")
    frame = spark.readStream.schema("k STRING, t TIMESTAMP").json(str(landing))
    if shape == "stateful":
        frame = frame.withWatermark("t", "1 minute").groupBy("k", F.window("t", "1 minute")).count()
    query = (
        frame.writeStream.format("noop")
        .outputMode("update" if shape == "stateful" else "append")
        .option("checkpointLocation", str(work / "checkpoint"))
        .start()
    )
    query.processAllAvailable()
    kept: list[dict[str, Any]] = []
    for batch in range(batches):
        line = json.dumps({"k": "a", "t": f"2026-12-03T{batch // 60:02d}:{batch % 60:02d}:00"})
        hidden = landing / f".new-{batch:06d}.json"
        hidden.write_text(line + "\n")
        os.rename(hidden, landing / f"new-{batch:06d}.json")
        query.processAllAvailable()
        progress = query.lastProgress
        if batch < WARMUP_BATCHES or progress is None:
            continue
        record = {phase: progress["durationMs"].get(phase, 0) for phase in PHASES}
        record["state_commit"] = sum(op["commitTimeMs"] for op in progress["stateOperators"])
        kept.append(record)
    query.stop()
    spark.stop()
    fs = {**LOCAL_FILES, **theirs}["spark.hadoop.fs.file.impl"]
    return {
        "variant": variant,
        "shape": shape,
        "file_system": fs,
        "batches": len(kept),
        "median_ms": {k: statistics.median(r[k] for r in kept) for k in (*PHASES, "state_commit")},
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1500)
    parser.add_argument("--batches", type=int, default=80)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--shape", choices=SHAPES, default="stateful")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        result = worker(args.worker, args.shape, args.files, args.batches, args.work)
        print(json.dumps(result))
        return
    order = [
        v for pair in range(args.pairs) for v in (VARIANTS if pair % 2 == 0 else VARIANTS[::-1])
    ]
    runs = []
    for variant in order:
        with tempfile.TemporaryDirectory(prefix="bench-ckfiles-") as work:
            command = [sys.executable, "-m", "bench.checkpointfiles", "--worker", variant]
            command += ["--work", str(Path(work) / "run"), "--shape", args.shape]
            command += ["--files", str(args.files), "--batches", str(args.batches)]
            done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
            run = json.loads(done.stdout.strip().splitlines()[-1])
            runs.append(run)
            print(variant, json.dumps(run["median_ms"]), flush=True)
    report = {
        "command": " ".join(["python -m bench.checkpointfiles", *(argv or sys.argv[1:])]),
        "files": args.files,
        "batches": args.batches,
        "warmup_batches": WARMUP_BATCHES,
        "order": order,
        "runs": runs,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
