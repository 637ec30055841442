"""2. Toolkit overhead: the same query built through slipstream's runner and by hand.

Two workloads, each alternated in one JVM:

- **rate**: rate source -> 10 s window x 100 keys count + watermark -> noop, default trigger,
  at a fixed input rate. Through slipstream it is a (bench-only) pipeline run by
  `runner.prepare/start`; by hand it is the same five lines of PySpark. This isolates what the
  runner adds to every batch (query naming, the listener and its handlers, the `_source` column).
- **mobile JSON files** (`--set workloads='["mobile"]'` runs this one alone): the `mobile`
  pipeline (JSON lines -> 10 min windows per action + 10 min watermark) over pre-written files
  with `--trigger available-now` and a noop sink, against a hand-written
  `readStream.schema(...).json(dir)` of the same query. `slipstream (no stage)` reads lines as
  text, parses them strictly (a bad record is quarantined with its raw text and a reason,
  instead of Spark's silent NULLs), and runs a second query that reads, parses and writes the
  rejected rows; `slipstream+ingest-stage` (issue 26) has one ingest query read and parse each
  line once, write the rejected rows and the typed rows (Parquet, "bronze"), and the results
  query read bronze. A third variant, hand-written but with slipstream's parser and no
  quarantine query, splits that cost into its parts. A fourth, `plain+guarantees`, is what a
  user writes by hand for the same guarantees with Spark's own reader: `PERMISSIVE` with a
  `_corrupt_record` column, a second query that writes the malformed lines and those missing a
  required field, with a reason, to a JSON file sink (exactly-once, its own checkpoint). It
  keeps less than slipstream does: Spark's reader turns a number where a string belongs into
  text and a value of the wrong type into NULL without a word, which slipstream quarantines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench import inproc
from bench.core import (
    Comparison,
    Context,
    Result,
    Stopwatch,
)
from bench.workloads import write_mobile_files

NAME = "overhead"
TITLE = "toolkit overhead: slipstream runner vs hand-written PySpark, same query"


def rate_pipeline() -> Any:
    """The ceiling query as a slipstream pipeline (the rate source is not offered by the
    built-in pipelines, so the benchmark declares its own)."""
    from slipstream.api.pipeline import Input, Output, Pipeline

    class RateWindowCount(Pipeline):
        name = "bench_rate"
        description = "rate -> 10 s window x 100 keys count (benchmark)"
        # unparsed: the rate source delivers typed rows
        inputs = (Input("rows", format="text", sources=("rate",)),)
        outputs = (Output("counts", key=("window_start", "key"), modes=("update",)),)

        def build(self, spark: SparkSession, inputs: Any, params: Any) -> dict[str, DataFrame]:
            return {"counts": inproc.windowed_count(inputs["rows"])}

    return RateWindowCount()


def run_rate(ctx: Context, variant: str, rate: int, warmup: int, batches: int) -> dict[str, Any]:
    spark = inproc.session()
    scratch = ctx.scratch("rate") / f"{variant}-{inproc.unique()}"
    if variant == "slipstream":
        flags = {"source": "rate", "rows_per_second": rate, "sink": "noop", "mode": "update",
                 "ingest_stage": False}  # fmt: skip  # rate rows do not parse: no stage
        run = inproc.start_run(
            spark, "bench_rate", {**flags, "state_dir": scratch}, rate_pipeline()
        )
        query = run.queries["counts"]
        try:
            return inproc.run_batches(query, warmup, batches)
        finally:
            run.stop()
    frame = spark.readStream.format("rate").option("rowsPerSecond", rate).load()
    query = inproc.start_noop(inproc.windowed_count(frame), "bench-plain-rate", scratch / "cp")
    return inproc.run_batches(query, warmup, batches)


MOBILE_SCHEMA = "id STRING, action STRING, ts TIMESTAMP"
SLIP = "slipstream (no stage)"  # every input read and parsed by each query that uses it
STAGED = "slipstream+ingest-stage"  # read and parsed once, the outputs read bronze


def mobile_counts(records: DataFrame) -> DataFrame:
    return (
        records.withWatermark("ts", "10 minutes")
        .groupBy(F.window("ts", "10 minutes"), F.col("action"))
        .count()
    )


def run_mobile(ctx: Context, variant: str, input_dir: Path, lines: int) -> dict[str, Any]:
    spark = inproc.session()
    scratch = ctx.scratch("mobile") / f"{variant}-{inproc.unique()}"
    watch = Stopwatch()
    if variant in (SLIP, STAGED):
        staged = variant == STAGED  # one read and parse per line: the ingest query counts
        flags = {"input": input_dir, "sink": "noop", "mode": "update", "trigger": "available-now",
                 "ingest_stage": staged}  # fmt: skip
        run = inproc.start_run(spark, "mobile", {**flags, "state_dir": scratch})
        run.wait()
        seconds = watch.seconds()
        counted = "mobile.quarantine.actions" if staged else "mobile.counts"
        results = run.totals.by_query.get(counted, {})
        rows = int(results.get("rows", 0))
        quarantined = int(results.get("quarantined", 0))
    else:
        if variant == "plain":
            records = (
                spark.readStream.schema(MOBILE_SCHEMA)
                .json(str(input_dir))
                .dropna(subset=["id", "action", "ts"])
            )
        elif variant == "plain+guarantees":
            return run_guarded(spark, input_dir, scratch, lines, watch)
        else:  # "plain+variant-parse": slipstream's parser, one query, no quarantine
            from slipstream.api.schema import parse_ddl

            schema = parse_ddl(MOBILE_SCHEMA)
            records = inproc.parsed_lines(spark, input_dir, schema, ("id", "action", "ts"), True)
        query = inproc.start_noop(mobile_counts(records), None, scratch / "cp", available_now=True)
        query.awaitTermination()
        seconds = watch.seconds()
        done = [p for p in query.recentProgress if inproc.ran(p)]
        rows = sum(int(p.get("numInputRows") or 0) for p in done)
        quarantined = None
    return {
        "seconds": seconds,
        "lines_per_s": lines / seconds,
        "input_rows": rows,
        "quarantined": quarantined,
    }


def run_guarded(
    spark: SparkSession, input_dir: Path, scratch: Path, lines: int, watch: Stopwatch
) -> dict[str, Any]:
    """By hand, with bad records kept: Spark's reader with a corrupt-record column, results to
    noop, and a quarantine query (raw line + reason) to JSON files, both available-now."""
    corrupt = "_corrupt_record"
    read = (
        spark.readStream.schema(f"{MOBILE_SCHEMA}, {corrupt} STRING")
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", corrupt)
        .json(str(input_dir))
    )
    missing = F.col("id").isNull() | F.col("action").isNull() | F.col("ts").isNull()
    good = read.where(F.col(corrupt).isNull() & ~missing).drop(corrupt)
    bad = read.where(F.col(corrupt).isNotNull() | missing).select(
        F.coalesce(F.col(corrupt), F.to_json(F.struct("id", "action", "ts"))).alias("raw"),
        F.when(F.col(corrupt).isNotNull(), F.lit("malformed"))
        .otherwise(F.lit("missing_field"))
        .alias("reason"),
    )
    results = inproc.start_noop(mobile_counts(good), None, scratch / "cp", available_now=True)
    quarantine = (
        bad.writeStream.format("json")
        .option("path", str(scratch / "quarantine"))
        .option("checkpointLocation", str(scratch / "cp-quarantine"))
        .trigger(availableNow=True)
        .start()
    )
    results.awaitTermination()
    quarantine.awaitTermination()
    seconds = watch.seconds()
    done = [p for p in results.recentProgress if inproc.ran(p)]
    return {
        "seconds": seconds,
        "lines_per_s": lines / seconds,
        "input_rows": sum(int(p.get("numInputRows") or 0) for p in done),
        "quarantined": spark.read.json(str(scratch / "quarantine")).count(),
    }


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    reps = ctx.param("reps", 2, 3)
    rate = ctx.param("rate", 50_000, 200_000)
    warmup, batches = 3, ctx.param("batches", 6, 15)
    files, per_file = ctx.param("mobile_files", (20, 10_000), (20, 50_000))
    result.params = {
        "rate_rows_per_second": rate,
        "rate_warmup_batches": warmup,
        "rate_measured_batches": batches,
        "mobile_files": files,
        "mobile_lines_per_file": per_file,
        "repetitions": reps,
    }

    workloads = list(ctx.param("workloads", ["rate", "mobile"], ["rate", "mobile"]))
    if "rate" in workloads:
        ctx.log(f"  rate workload: {rate:,} rows/s, {batches} batches after {warmup}")
        variants = ["slipstream", "plain"]
        rate_metrics = {"rows_per_s": "rows_per_s", "ms_per_batch": "ms_per_batch", "seconds": None}
        pairs = [("slipstream", "plain")]
        by = Comparison(rate_metrics, "rows_per_s", pairs, "processed rows/s", prefix="rate: ")
        by.run(
            ctx,
            result,
            variants,
            lambda v, rep: run_rate(ctx, v, rate, warmup, batches),
            reps,
            workload="rate -> window count",
            input=f"{rate:,} rows/s",
        )
    if "mobile" not in workloads:
        return result

    input_dir = ctx.scratch("mobile-input")
    lines = write_mobile_files(input_dir, files, per_file)
    ctx.log(f"  mobile workload: {lines:,} lines in {files} files")
    variants = [
        SLIP,
        STAGED,
        "plain",
        "plain+variant-parse",
        "plain+guarantees",
    ]
    variants = [v for v in variants if v in ctx.param("mobile_variants", variants, variants)]
    file_metrics = {"rows_per_s": "lines_per_s", "ms_per_batch": None, "seconds": "seconds"}
    pairs = [
        (SLIP, "plain"),
        (STAGED, "plain"),
        ("plain+variant-parse", "plain"),
        (SLIP, "plain+variant-parse"),
        (SLIP, "plain+guarantees"),
        (STAGED, "plain+guarantees"),
        (STAGED, SLIP),
    ]
    by = Comparison(file_metrics, "lines_per_s", pairs, "lines/s", prefix="mobile: ")
    runs = by.run(
        ctx,
        result,
        variants,
        lambda v, rep: run_mobile(ctx, v, input_dir, lines),
        reps,
        workload="mobile JSON files, available-now",
        input=f"{lines:,} lines",
    )
    kept = {r["variant"]: r["quarantined"] for r in runs if r["quarantined"] is not None}
    result.notes.append(
        f"mobile input: {lines:,} lines, of which about 0.5% malformed; quarantined per run: "
        f"slipstream without the stage {kept.get(SLIP, '?')}, with the ingest stage "
        f"{kept.get(STAGED, '?')}, by hand with Spark's reader "
        f"{kept.get('plain+guarantees', '?')}"
    )
    result.notes.append(
        "rate rows/s: Spark's rows / triggerExecution over the measured batches (the input rate "
        "is fixed, so this is the processing rate at that load); mobile lines/s: lines / wall "
        "time from query start to termination (query start-up included)"
    )
    return result
