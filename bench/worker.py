"""Subprocess entry points, so that a variant gets a JVM of its own:

    python -m bench.worker state --store rocksdb+changelog --seconds 300 --out F.jsonl
    python -m bench.worker plain-mobile --input DIR --db FILE
    python -m bench.worker session-floor
    python -m bench.worker plain-mobile-delta --input DIR --table DIR --checkpoint DIR

`state` samples state rows and memory after every batch (scenario 6); `plain-mobile` is the
hand-written PySpark job the start-up scenario compares slipstream with; `session-floor` is
the least a PySpark program can do: start a session and run one trivial job;
`plain-mobile-delta` is the mobile query by hand MERGEd into a Delta table (scenario 20);
`flagship` is one variant of scenario 3 in a JVM of its own (its `isolate` setting).

    python -m bench.worker flagship --variant V --landing DIR --catalog F --lines N --work DIR
        --cap K [--partitions 2,8] [--warmup 2]"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import threading
import time
from pathlib import Path
from typing import Any


def state(args: argparse.Namespace) -> int:
    from pyspark.sql import functions as F

    from bench import inproc
    from slipstream.settings.session import build_session

    conf = {**inproc.STATE_STORES[args.store], "spark.sql.shuffle.partitions": args.partitions}
    spark = build_session(conf=conf, app_name=f"bench-state-{args.store}", log_level="ERROR")
    inproc.quiet_stop_noise(spark)
    events = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", args.rate)
        .load()
        .select(
            F.col("timestamp").alias("ts"),
            F.concat(F.lit("e"), F.col("value").cast("string")).alias("event_id"),
            (F.col("value") % args.keys).alias("key"),
        )
    )
    counts = (
        events.withWatermark("ts", f"{args.watermark_s} seconds")
        .dropDuplicatesWithinWatermark(["event_id"])
        .groupBy(F.window("ts", f"{args.window_s} seconds", f"{args.slide_s} seconds"), "key")
        .count()
    )
    started = time.monotonic()
    lock = threading.Lock()
    heap: dict[str, float] = {}
    done = threading.Event()

    def sample_heap() -> None:  # every few seconds: live heap after a full GC, and the RSS
        while not done.is_set():
            mem = inproc.jvm_memory(spark, gc=True)
            with lock:
                heap.update(mem)
            done.wait(5)

    threading.Thread(target=sample_heap, daemon=True).start()
    query = (
        counts.writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", args.checkpoint)
        .start()
    )
    seen = -1
    try:
        with Path(args.out).open("w", encoding="utf-8") as out:
            while time.monotonic() - started < args.seconds:
                query.awaitTermination(1)
                if query.exception():
                    raise RuntimeError(str(query.exception()))
                for progress in query.recentProgress:
                    if progress["batchId"] <= seen or not inproc.ran(progress):
                        continue
                    seen = progress["batchId"]
                    with lock:
                        mem = dict(heap)
                    record = sample(progress, time.monotonic() - started, mem)
                    out.write(json.dumps(record) + "\n")
                    out.flush()
    finally:
        done.set()
        query.stop()
        spark.stop()
    return 0


def sample(progress: dict[str, Any], elapsed: float, mem: dict[str, float]) -> dict[str, Any]:
    ops = progress.get("stateOperators") or []
    return {
        "t": round(elapsed, 2),
        "batch": progress["batchId"],
        "rows": progress.get("numInputRows"),
        "batch_ms": progress["durationMs"].get("triggerExecution"),
        "operators": [
            {
                "name": op.get("operatorName"),
                "rows": op.get("numRowsTotal"),
                "memory_bytes": op.get("memoryUsedBytes"),
                "dropped_late": op.get("numRowsDroppedByWatermark"),
                "removed": op.get("numRowsRemoved"),
            }
            for op in ops
        ],
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        **mem,
    }


def run_to_end(counts: Any, write: Any, checkpoint: str) -> int:
    """Run `counts` available-now in update mode through `write` (foreachBatch), then stop."""
    query = (
        counts.writeStream.foreachBatch(write)
        .outputMode("update")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    counts.sparkSession.stop()
    return 0


def plain_mobile(args: argparse.Namespace) -> int:
    """The mobile query by hand: JSON files -> 10 min windows per action -> SQLite."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master("local[*]")
        .appName("bench-plain-mobile")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    counts = (
        spark.readStream.schema("id STRING, action STRING, ts TIMESTAMP")
        .json(args.input)
        .dropna()
        .withWatermark("ts", "10 minutes")
        .groupBy(F.window("ts", "10 minutes"), "action")
        .count()
        .select(
            F.date_format("window.start", "yyyy-MM-dd'T'HH:mm:ss'Z'").alias("window_start"),
            "action",
            "count",
        )
    )

    def write(batch: Any, batch_id: int) -> None:
        rows = [tuple(r) for r in batch.collect()]
        with sqlite3.connect(args.db) as conn:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS counts (window_start TEXT, action TEXT, "
                "count BIGINT, PRIMARY KEY (window_start, action))"
            )
            conn.executemany("INSERT OR REPLACE INTO counts VALUES (?, ?, ?)", rows)

    return run_to_end(counts, write, args.checkpoint)


def plain_mobile_delta(args: argparse.Namespace) -> int:
    """The mobile query by hand, each batch MERGEd into a Delta table on (window_start, action)
    with Delta's idempotent txnAppId/txnVersion: Spark and Delta at their own settings, except
    a local master of 2 cores and 2 shuffle partitions (as the slipstream runs it is beside),
    and `--snapshot-partitions` when given. Delta's jar comes as slipstream finds it (a local
    jar, no Ivy at the start), so that the variants differ in the query alone."""
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from slipstream.settings.delta_package import delta_conf
    from slipstream.settings.ivy_jars import as_local_jars

    conf = as_local_jars(delta_conf({}))
    if args.snapshot_partitions:
        conf["spark.databricks.delta.snapshotPartitions"] = args.snapshot_partitions
    builder = SparkSession.builder.master("local[2]").appName("bench-plain-mobile-delta")
    for key, value in {**conf, "spark.sql.shuffle.partitions": "2"}.items():
        builder = builder.config(key, value)
    spark = builder.config("spark.sql.session.timeZone", "UTC").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    counts = (
        spark.readStream.schema("id STRING, action STRING, ts TIMESTAMP")
        .option("maxFilesPerTrigger", 1)
        .json(args.input)
        .dropna()
        .withWatermark("ts", "10 minutes")
        .groupBy(F.window("ts", "10 minutes"), "action")
        .count()
        .select(F.col("window.start").alias("window_start"), "action", "count")
    )

    def write(batch: Any, batch_id: int) -> None:
        if not (Path(args.table) / "_delta_log").is_dir():
            batch.write.format("delta").option("txnAppId", "bench").option(
                "txnVersion", batch_id
            ).save(args.table)
            return
        batch.createOrReplaceTempView("batch")
        session = batch.sparkSession  # the query's own (foreachBatch's views live there)
        session.conf.set("spark.databricks.delta.write.txnAppId", "bench")
        session.conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        session.sql(
            f"MERGE INTO delta.`{args.table}` AS t USING batch AS s ON t.window_start = "
            "s.window_start AND t.action = s.action WHEN MATCHED THEN UPDATE SET * "
            "WHEN NOT MATCHED THEN INSERT *"
        )

    return run_to_end(counts, write, args.checkpoint)


def session_floor(args: argparse.Namespace) -> int:
    from slipstream.settings.session import build_session

    spark = build_session(app_name="bench-floor", log_level="ERROR")
    spark.range(1).count()
    spark.stop()
    return 0


def flagship(args: argparse.Namespace) -> int:
    """One variant of scenario 3 in this JVM: `--warmup` runs not kept, then one measured,
    printed as a JSON line (bench/scenarios/flagship.py `run_isolated`)."""
    from bench.core import Context
    from bench.scenarios import flagship as scenario
    from bench.workloads import TrendingInput

    work = Path(args.work)
    ctx = Context(quick=False, work=work, results=work, log=lambda _: None)
    landing = Path(args.landing)
    data = TrendingInput(landing, Path(args.catalog), [], [], args.lines)
    partitions = [p for p in args.partitions.split(",") if p]
    for _ in range(args.warmup):
        scenario.run_variant(ctx, landing, data, args.variant, args.cap, partitions)
    measured = scenario.run_variant(ctx, landing, data, args.variant, args.cap, partitions)
    print(json.dumps(measured), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.worker")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("state")
    p.add_argument("--store", required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--rate", type=int, required=True)
    p.add_argument("--keys", type=int, default=1000)
    p.add_argument("--watermark-s", type=int, required=True)
    p.add_argument("--window-s", type=int, required=True)
    p.add_argument("--slide-s", type=int, required=True)
    p.add_argument("--partitions", default="4")
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--out", required=True)
    p = sub.add_parser("plain-mobile")
    p.add_argument("--input", required=True)
    p.add_argument("--db", required=True)
    p.add_argument("--checkpoint", required=True)
    p = sub.add_parser("plain-mobile-delta")
    p.add_argument("--input", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--snapshot-partitions")
    sub.add_parser("session-floor")
    p = sub.add_parser("flagship")
    p.add_argument("--variant", required=True)
    p.add_argument("--landing", required=True)
    p.add_argument("--catalog", required=True)
    p.add_argument("--lines", type=int, required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--cap", type=int, required=True)
    p.add_argument("--partitions", default="")
    p.add_argument("--warmup", type=int, default=1)
    args = parser.parse_args(argv)
    handler = {
        "state": state,
        "plain-mobile": plain_mobile,
        "plain-mobile-delta": plain_mobile_delta,
        "session-floor": session_floor,
        "flagship": flagship,
    }
    return handler[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
