"""What a live batch pays for the deduplication state it holds (issue 40, the 10,000 events/s
row): `withWatermark(ts, D).dropDuplicatesWithinWatermark(event_id)` into Spark's no-op sink,
at a steady state of `--ids` ids held, each batch `--rate` new ids one second of event time
later (so the watermark evicts about as many as it adds), three ways, each in a JVM of its own
(`--shape trending`: with `trending`'s sliding window count after it, in update mode):

- `spark-heap`: Spark's operator on its HDFS-backed store (a live run's default);
- `spark-rocksdb`: Spark's operator on RocksDB with changelog checkpointing;
- `timers`: the same deduplication as a transformWithState processor whose ids expire by
  event-time timers (`--dedup timers`: slipstream/jvm/dedup.py), on RocksDB.

Spark's operator finds the ids to evict by scanning all of its state every batch (and the heap
store copies its map of the last version); a timer is stored ordered by its time, so a batch
reads only what the watermark passed. Batch 0 loads the state (`--ids` ids spread over twice
the delay: an id is held until the watermark, newest - D, passes its time + D); its batches and
the next `WARMUP_BATCHES` are not kept. Every variant must emit the same number of rows (each
batch re-sends some ids still held and a few rows behind the watermark: both dropped).

    .venv/bin/python -m bench.dedupstate [--ids 3000000 --rate 10000 --batches 12 --pairs 2]
        [--variants spark-heap,spark-rocksdb,timers] [--partitions 2] [--shape dedup|trending]
        [--out FILE.json]
    .venv/bin/python -m bench.dedupstate --boundaries   # the same rows, batch by batch
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

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("spark-heap", "spark-rocksdb", "timers")
WARMUP_BATCHES = 2  # after the loading batch 0
RESENT = 0.02  # of a batch's rows: ids of the last minute again
LATE = 0.005  # of a batch's rows: event times behind the watermark
T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z
ARTICLES = 500
SHAPES = ("dedup", "trending")


def delay_s(ids: int, rate: int) -> int:
    """The watermark delay D at which `ids` ids are held at `rate` ids a second (2 D of them)."""
    return max(1, ids // (2 * rate))


def generate(folder: Path, ids: int, rate: int, batches: int) -> None:
    """File 0: `ids` ids over [T0, T0 + 2D); file i >= 1: `rate` new ids in second i of event
    time after that, some re-sent ids of the last minute and some late rows. One file a batch."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    rng = np.random.default_rng(7)
    span = 2 * delay_s(ids, rate) * 1000

    def write(index: int, numbers: np.ndarray, ts: np.ndarray) -> None:
        table = pa.table(
            {
                "event_id": pa.array([f"e{n:010d}" for n in numbers]),
                "ts": pa.array(ts, type=pa.timestamp("ms", tz="UTC")),
                "article_id": pa.array([f"a{n % ARTICLES}" for n in numbers]),
            }
        )
        path = folder / f"part-{index:05d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_000_000 + index, 1_000_000 + index))  # the file source's order

    write(0, np.arange(ids), T0_MS + np.sort(rng.integers(0, span, ids)))
    for i in range(1, batches + 1):
        start = T0_MS + span + (i - 1) * 1000
        fresh = np.arange(ids + (i - 1) * rate, ids + i * rate)
        ts = start + rng.integers(0, 1000, rate)
        resent = max(1, int(rate * RESENT))
        recent = np.arange(max(0, ids + (i - 1) * rate - 60 * rate), ids + (i - 1) * rate)
        late = max(1, int(rate * LATE))
        numbers = np.concatenate([fresh, rng.choice(recent, resent), rng.integers(0, ids, late)])
        behind = start - span  # older than the watermark (newest - D) by D
        times = np.concatenate([ts, start + rng.integers(0, 1000, resent),
                                behind - rng.integers(0, 1000, late)])  # fmt: skip
        write(i, numbers, times)


def run_worker(variant: str, folder: Path, work: Path, ids: int, rate: int,
               partitions: int, shape: str) -> dict[str, Any]:  # fmt: skip
    """One variant in a JVM of its own: its batches' progress."""
    out = subprocess.run(
        [sys.executable, "-m", "bench.dedupstate", "--worker", variant, "--input", str(folder),
         "--work", str(work), "--ids", str(ids), "--rate", str(rate),
         "--partitions", str(partitions), "--shape", shape],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def worker(variant: str, folder: Path, work: Path, delay: int,
           partitions: int, shape: str) -> dict[str, Any]:  # fmt: skip
    from pyspark.sql import functions as F

    from slipstream.jvm.dedup import timer_dedup
    from slipstream.runtime.partitions import HDFS_STORE, ROCKSDB_STORE, STATE_ROWS_COUNTED
    from slipstream.settings.session import STATE_PROVIDER, build_session

    spark = build_session(
        conf={
            "spark.driver.memory": "8g",
            "spark.sql.shuffle.partitions": str(partitions),
            STATE_PROVIDER: HDFS_STORE if variant == "spark-heap" else ROCKSDB_STORE,
            # as a run sets it: a deduplication by timers counts no rows (runtime/partitions)
            STATE_ROWS_COUNTED: str(variant != "timers").lower(),
        },
        app_name="dedupstate",
        log_level="ERROR",
    )
    events = (
        spark.readStream.schema("event_id string, ts timestamp, article_id string")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(folder))
        .withWatermark("ts", f"{delay} seconds")
    )
    if variant == "timers":
        deduped = timer_dedup(events, ("event_id",), "ts", delay * 1000)
    else:
        deduped = events.dropDuplicatesWithinWatermark(["event_id"])
    mode = "append"
    if shape == "trending":  # the sliding window count after it, as `trending` runs it
        window = F.window("ts", "10 minutes", "1 minute")
        deduped = deduped.groupBy(window, "article_id").count()
        mode = "update"
    query = (
        deduped.writeStream.format("noop")
        .outputMode(mode)
        .option("checkpointLocation", str(work / f"checkpoint-{variant}"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    batches = []
    for p in query.recentProgress:
        if not p.numInputRows:
            continue
        ops = p.stateOperators
        state = max(ops, key=lambda o: o.numRowsTotal) if ops else None  # the deduplication
        batches.append({
            "batch": p.batchId, "rows": p.numInputRows, "out": p.sink.numOutputRows,
            "ms": p.durationMs.get("triggerExecution", 0), "durations": dict(p.durationMs),
            "state_rows": state.numRowsTotal if state else None,
            "removed": state.numRowsRemoved if state else None,
            "commit_ms": state.commitTimeMs if state else None,
            "removals_ms": state.allRemovalsTimeMs if state else None,
            "updates_ms": state.allUpdatesTimeMs if state else None,
            "all_commits_ms": sum(o.commitTimeMs for o in ops),
            "custom": [dict(o.customMetrics) for o in ops],
        })  # fmt: skip
    spark.stop()
    return {"variant": variant, "batches": batches}


#: controlled batches of (id, event time s) around both of a batch's watermarks, delay 10 s: a
#: repeat while held, with another time, at the eviction's bound, after it, late rows
BOUNDARY_DELAY_S = 10
BOUNDARY_BATCHES = (
    (("e1", 100.0), ("e2", 105.0), ("e3", 110.0)),
    (("e1", 100.0), ("e4", 100.0), ("e5", 100.001), ("e2", 130.0), ("e6", 120.0), ("e7", 99.0)),
    (("e3", 125.0), ("e1", 121.0), ("e5", 121.0), ("e6", 121.0), ("e8", 120.0), ("e9", 120.001)),
    (("e6", 200.0), ("e10", 131.0), ("e11", 130.999), ("e12", 119.0)),
    (("e6", 201.0), ("e13", 180.0), ("e14", 189.999), ("e15", 190.0), ("e16", 189.0)),
)


def boundaries(work: Path) -> None:
    """Spark's operator and the processor over BOUNDARY_BATCHES, one file a batch: the rows each
    kept, batch by batch, must be the same (SystemExit otherwise)."""
    from pyspark.sql import DataFrame

    from slipstream.jvm.dedup import timer_dedup
    from slipstream.settings.session import build_session

    spark = build_session(
        conf={"spark.sql.shuffle.partitions": "2"},
        app_name="dedupstate-boundaries",
        log_level="ERROR",
    )
    folder = work / "input"
    folder.mkdir()
    for i, rows in enumerate(BOUNDARY_BATCHES):
        path = folder / f"batch-{i}.json"
        path.write_text("".join(json.dumps({"id": k, "ts": t}) + "\n" for k, t in rows))
        os.utime(path, (1_000_000 + i, 1_000_000 + i))
    kept: dict[str, dict[int, list[tuple[str, float]]]] = {}
    for variant in ("spark", "timers"):
        events = (
            spark.readStream.schema("id string, ts double")
            .option("maxFilesPerTrigger", 1)
            .json(str(folder))
            .selectExpr("id", "timestamp_millis(cast(ts * 1000 as bigint)) AS ts")
            .withWatermark("ts", f"{BOUNDARY_DELAY_S} seconds")
        )
        if variant == "timers":
            out = timer_dedup(events, ("id",), "ts", BOUNDARY_DELAY_S * 1000)
        else:
            out = events.dropDuplicatesWithinWatermark(["id"])
        got: dict[int, list[tuple[str, float]]] = {}

        def each(frame: DataFrame, batch: int, got: dict[int, Any] = got) -> None:
            got[batch] = sorted((r.id, r.ts.timestamp()) for r in frame.collect())  # tiny

        query = (
            out.writeStream.foreachBatch(each)
            .option("checkpointLocation", str(work / f"checkpoint-{variant}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        kept[variant] = got
    spark.stop()
    for batch in sorted(kept["spark"].keys() | kept["timers"].keys()):
        same = kept["spark"].get(batch) == kept["timers"].get(batch)
        print(json.dumps({"batch": batch, "same": same, "spark": kept["spark"].get(batch),
                          "timers": kept["timers"].get(batch)}))  # fmt: skip
    if kept["spark"] != kept["timers"]:
        sys.exit("the processor kept other rows than Spark's operator")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=3_000_000)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--shape", choices=SHAPES, default="dedup")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--boundaries", action="store_true", help=boundaries.__doc__)
    parser.add_argument("--worker", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--input", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    delay = delay_s(args.ids, args.rate)
    if args.boundaries:
        with tempfile.TemporaryDirectory(prefix="dedupstate-") as tmp:
            boundaries(Path(tmp))
        return
    if args.worker:
        result = worker(args.worker, args.input, args.work, delay, args.partitions, args.shape)
        print(json.dumps(result))
        return
    variants = args.variants.split(",")
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="dedupstate-") as tmp:
        work = Path(tmp)
        generate(work / "input", args.ids, args.rate, args.batches)
        for pair in range(args.pairs):
            order = variants if pair % 2 == 0 else variants[::-1]
            for variant in order:
                run_dir = work / f"run-{pair}-{variant}"
                result = run_worker(variant, work / "input", run_dir, args.ids,
                                    args.rate, args.partitions, args.shape)  # fmt: skip
                kept = [b for b in result["batches"] if b["batch"] > WARMUP_BATCHES]
                summary = {
                    "pair": pair, "variant": variant,
                    "batch_ms_p50": statistics.median(b["ms"] for b in kept),
                    "batch_ms_max": max(b["ms"] for b in kept),
                    "state_rows_p50": statistics.median(b["state_rows"] for b in kept),
                    "removed_p50": statistics.median(b["removed"] for b in kept),
                    "load_batch_ms": result["batches"][0]["ms"],
                    "rows_out": sum(b["out"] for b in result["batches"]),
                }  # fmt: skip
                runs.append({**summary, "batches": result["batches"]})
                print(json.dumps(summary), flush=True)
    outs = {r["rows_out"] for r in runs}
    report = {"shape": args.shape, "ids": args.ids, "rate": args.rate, "delay_s": delay,
              "batches": args.batches, "partitions": args.partitions,
              "same_rows_out": len(outs) == 1, "runs": runs}  # fmt: skip
    print(json.dumps({"same rows out": len(outs) == 1, "rows out": sorted(outs)}))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    if len(outs) != 1:
        sys.exit(f"the variants emitted different rows: {sorted(outs)}")


if __name__ == "__main__":
    main()
