"""10. sensors: the three outputs of one input, against a Spark batch job computing the same
three tables in one run, over the same generated readings (1,000,000 in the full run).

Variants, alternated:
- **slipstream (no stage)**: `sensors` as a user runs it, available-now, every output to the
  noop sink, `ingest_stage=False`: four streaming queries (sensor_stats, sensor_alerts,
  sensor_baseline and the quarantine), each reading and parsing the input itself;
- **slipstream, ingest stage**: the same with `ingest_stage=True` (issue 26): one ingest query
  reads and parses the input once and writes the rejected records and the typed rows (Parquet,
  "bronze"); the three outputs read bronze;
- **batch**: `spark.read.schema(S).json`, required fields present, deduplicated, cached once,
  then the three tables written to noop: Spark's own reader, no quarantine, no reasons, one
  read and one parse for all three;
- **parse once**: one streaming query doing only what each of slipstream's four does first
  (read the text, parse strictly, keep the valid rows) to noop. `4 x parse once / slipstream`
  is the share of slipstream's time spent reading and parsing the input once per query.

events/s = readings / wall time of the whole run (session shared, started before)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bench import inproc
from bench.core import (
    Comparison,
    Context,
    Result,
    Stopwatch,
    median,
    paired_ratios,
)
from slipstream.pipelines.sensors import SCHEMA

NAME = "sensors"
TITLE = "sensors: three outputs from one input vs a Spark batch job, same readings"
REQUIRED = ("sensor_id", "event_time", "value")
QUERIES = 4  # three outputs and the quarantine, each reading and parsing the input
SLIP, STAGED = "slipstream (no stage)", "slipstream, ingest stage"


def write_readings(folder: Path, readings: int) -> int:
    from slipstream.tools.generators import sensors
    from slipstream.tools.generators.streams import StreamSpec, generate

    fleet_size = 500
    minutes = max(1, readings // fleet_size)  # healthy sensors report once a minute
    spec = StreamSpec(
        duration=timedelta(minutes=minutes), file_every=timedelta(minutes=max(1, minutes // 20)),
        out_of_order=0.05, late=0.0, duplicates=0.01, malformed=0.005,
    )  # fmt: skip
    report = generate(spec, sensors.Sensors(fleet_size, 5, 5, 5), folder)
    return report.total_lines


def batch_tables(spark: Any, folder: Path) -> list[DataFrame]:
    readings = (
        spark.read.schema(SCHEMA)
        .json(str(folder))
        .dropna(subset=list(REQUIRED))
        .dropDuplicates(["sensor_id", "event_time"])
        .cache()
    )
    window = F.window("event_time", "5 minutes")
    codes = F.array_sort(F.collect_set("error_code")).alias("error_codes")
    stats = readings.groupBy(window, "sensor_id").agg(
        F.count(F.lit(1)).alias("readings"), F.avg("value"), F.min("value"), F.max("value"),
        F.stddev_samp("value"), codes,
    )  # fmt: skip
    alerts = readings.groupBy(window, "sensor_id").count().where(F.col("count") > F.lit(5.0))
    baseline = readings.groupBy("sensor_id").agg(F.count(F.lit(1)), F.avg("value"), codes)
    return [stats, alerts, baseline, readings]


def measure(ctx: Context, variant: str, folder: Path, readings: int) -> dict[str, Any]:
    spark = inproc.session()
    scratch = ctx.scratch("sensors") / f"{variant.replace(' ', '-')}-{inproc.unique()}"
    watch = Stopwatch()
    if variant in (SLIP, STAGED):
        flags = {"input": folder, "sink": "noop", "trigger": "available-now",
                 "ingest_stage": variant == STAGED}  # fmt: skip
        run = inproc.start_run(spark, "sensors", {**flags, "state_dir": scratch})
        run.wait()
    elif variant == "batch":
        *tables, cached = batch_tables(spark, folder)
        for table in tables:
            table.write.format("noop").mode("overwrite").save()
        cached.unpersist()
    else:
        records = inproc.parsed_lines(spark, folder, SCHEMA, REQUIRED, stream=True)
        query = inproc.start_noop(records, None, scratch / "cp", "append", available_now=True)
        query.awaitTermination()
    seconds = watch.seconds()
    return {"seconds": seconds, "events_per_s": readings / seconds}


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    target = ctx.param("readings", 100_000, 1_000_000)
    reps = ctx.param("reps", 2, 2)
    folder = ctx.scratch("readings")
    ctx.log(f"  generating about {target:,} readings")
    readings = write_readings(folder, int(target))
    result.params = {"readings": readings, "repetitions": reps, "sensors": 500,
                     "window": "5m tumbling", "watermark": "10m"}  # fmt: skip
    variants = [SLIP, STAGED, "batch", "parse once"]
    variants = [v for v in variants if v in ctx.param("variants", variants, variants)]

    def one(variant: str, rep: int) -> dict[str, Any]:
        return measure(ctx, variant, folder, readings)

    metrics = {"seconds": "seconds", "events_per_s": "events_per_s"}
    pairs = [(SLIP, "batch"), (STAGED, "batch"), (STAGED, SLIP)]
    by = Comparison(metrics, "events_per_s", pairs, "events/s")
    runs = by.run(ctx, result, variants, one, reps, readings=readings)
    shares = [QUERIES / r for r in paired_ratios(runs, "seconds", SLIP, "parse once")]
    result.headline["reading and parsing, 4 queries x parse once / slipstream, seconds"] = (
        f"{median(shares):.2f} ({min(shares):.2f}-{max(shares):.2f}, {len(shares)} pairs)"
        if shares
        else "n/a"
    )
    result.notes.append(
        "slipstream without the stage reads and parses the input once per query (4 here); "
        "with the ingest stage once, plus a Parquet write and three reads of the typed rows; "
        "the batch job once"
    )
    return result
