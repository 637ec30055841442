"""10. sensors: the three outputs of one input, against a Spark batch job computing the same
three tables in one run, over the same generated readings (1,000,000 in the full run).

Variants, alternated:
- **slipstream**: `sensors` as a user runs it, available-now on a new checkpoint, every output
  to the noop sink: the shared stage (runtime/shared_stage.py, the default for such a run) reads,
  parses and deduplicates the input once, in one query that writes the quarantine and appends
  its rows to Parquet; the three outputs read those rows under the same watermark;
- **slipstream, no shared stage**: the same with `shared_stage=False`, as before it: three
  output queries, each reading, parsing and deduplicating the input itself (the first also
  writing the quarantine);
- **slipstream, ingest stage** (asked for by `--set variants`): `ingest_stage=True` (issue 26):
  one ingest query parses the input once and writes the rejected records and the typed rows
  (Parquet, "bronze"), which the shared query reads;
- **batch**: `spark.read.schema(S).json`, required fields present, deduplicated, cached once,
  then the three tables written to noop: Spark's own reader, no quarantine, no reasons, one
  read and one parse for all three;
- **bare streaming query**: the engine's own cost (issue 40): the pipeline's three outputs
  (its own `build`, the same deduplication, windows and aggregations) as three plain PySpark
  streaming queries over `readStream.schema(S).json` with the required fields present
  (`inproc.bare_outputs`), each to noop; Spark's own (HDFS-backed) state store; no quarantine,
  no event-time guard, no late-row count;
- **bare, deduplicated once**: the design a stage that deduplicates would give (the next cost
  named in docs/benchmarks.md section 50): one plain streaming query reads the input with
  Spark's reader, deduplicates it within the watermark (the pipeline's default) and appends the
  rows to Parquet; then the three tables of the batch job, each a streaming query over those
  rows under the same watermark, no deduplication of their own; Spark's own state store;
- **bare, deduplicated in a second hop** (asked for by `--set variants`): the same, the input
  first appended to Parquet as read (the ingest stage's bronze), then a second query
  deduplicating those rows into the Parquet the three tables read;
- **bare, deduplicated once by timers** (asked for by `--set variants`): the first form with
  slipstream's deduplication by event-time timers (`--dedup timers`, on RocksDB) in the stage
  query;
- **parse once** (asked for by `--set variants`): one streaming query doing only what each of
  the three queries without the shared stage does first (read the text, parse strictly, keep
  the valid rows) to noop. `3 x parse once / slipstream, no shared stage` is the share of its
  time spent reading and parsing the input once per query.

events/s = readings / wall time of the whole run (session shared, started before); CPU
seconds = the JVM's and this process's. Every streaming variant runs with the shuffle
partitions slipstream's CLI chooses for the run (runtime/partitions.py)."""

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
    summarize_ratio,
)
from slipstream.pipelines.sensors import SCHEMA

NAME = "sensors"
TITLE = "sensors: three outputs from one input vs a Spark batch job, same readings"
REQUIRED = ("sensor_id", "event_time", "value")
QUERIES = 3  # without the shared stage: three outputs, each reading and parsing the input
SLIP, DIRECT = "slipstream", "slipstream, no shared stage"
STAGED = "slipstream, ingest stage"
BARE = "bare streaming query"
ONCE = "bare, deduplicated once"
TWO_HOPS = "bare, deduplicated in a second hop"
TIMERS = "bare, deduplicated once by timers"
DEDUPLICATED = (ONCE, TWO_HOPS, TIMERS)
KEYS = ["sensor_id", "event_time"]
WATERMARK = "10 minutes"  # the pipeline's default


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


def tables(readings: DataFrame) -> list[DataFrame]:
    """The three tables (stats, alerts, baseline) of deduplicated readings: the batch job's, and
    the streaming queries' of the DEDUPLICATED variants (modes: MODES)."""
    window = F.window("event_time", "5 minutes")
    codes = F.array_sort(F.collect_set("error_code")).alias("error_codes")
    stats = readings.groupBy(window, "sensor_id").agg(
        F.count(F.lit(1)).alias("readings"), F.avg("value"), F.min("value"), F.max("value"),
        F.stddev_samp("value"), codes,
    )  # fmt: skip
    alerts = readings.groupBy(window, "sensor_id").count().where(F.col("count") > F.lit(5.0))
    baseline = readings.groupBy("sensor_id").agg(F.count(F.lit(1)), F.avg("value"), codes)
    return [stats, alerts, baseline]


MODES = ("update", "append", "update")  # the pipeline's defaults for the three outputs


def batch_tables(spark: Any, folder: Path) -> list[DataFrame]:
    readings = (
        spark.read.schema(SCHEMA)
        .json(str(folder))
        .dropna(subset=list(REQUIRED))
        .dropDuplicates(["sensor_id", "event_time"])
        .cache()
    )
    return [*tables(readings), readings]


def deduplicated_once(spark: Any, folder: Path, scratch: Path, variant: str) -> None:
    """The DEDUPLICATED variants: the stage's queries, then the three tables over its rows."""
    readings = spark.readStream.schema(SCHEMA).json(str(folder)).dropna(subset=list(REQUIRED))
    if variant == TWO_HOPS:
        _appended(readings, scratch / "bronze", scratch / "stage-bronze")
        readings = spark.readStream.schema(SCHEMA).parquet(str(scratch / "bronze"))
    readings = readings.withWatermark("event_time", WATERMARK)
    if variant == TIMERS:
        from slipstream.jvm.dedup import timer_dedup

        deduplicated = timer_dedup(readings, KEYS, "event_time", 10 * 60 * 1000)
    else:
        deduplicated = readings.dropDuplicatesWithinWatermark(KEYS)
    rows = scratch / "deduplicated"
    _appended(deduplicated, rows, scratch / "stage")
    staged = (
        spark.readStream.schema(SCHEMA).parquet(str(rows)).withWatermark("event_time", WATERMARK)
    )
    queries = [
        inproc.start_noop(table, None, scratch / f"table-{n}", mode, available_now=True)
        for n, (table, mode) in enumerate(zip(tables(staged), MODES, strict=True))
    ]
    for query in queries:
        query.awaitTermination()


def _appended(frame: DataFrame, path: Path, checkpoint: Path) -> None:
    """`frame` appended to Parquet at `path` by an available-now query, to its end."""
    query = (
        frame.writeStream.format("parquet")
        .option("path", str(path))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()


def cli_conf(folder: Path) -> dict[str, str]:
    """The shuffle partitions slipstream's CLI chooses for an available-now run of sensors."""
    from slipstream.runtime import partitions, runner
    from slipstream.settings.config import load_settings

    flags = {"input": folder, "sink": "noop", "trigger": "available-now", "ingest_stage": False}
    return partitions.choose(runner.prepare(load_settings("sensors", flags, environ={}))).conf()


def measure(ctx: Context, variant: str, folder: Path, readings: int) -> dict[str, Any]:
    spark = inproc.session()
    scratch = ctx.scratch("sensors") / f"{variant.replace(' ', '-')}-{inproc.unique()}"
    conf = {} if variant == "batch" else cli_conf(folder)
    if variant in (BARE, *DEDUPLICATED):  # Spark's own state store and listing, as a plain
        conf = {**conf, **inproc.SPARK_OWN}  # PySpark job gets
    if variant == TIMERS:  # the processor's state needs RocksDB (runtime/partitions.py)
        conf = {**conf, **inproc.STATE_STORES["rocksdb+changelog, rows not counted"]}
    with inproc.sql_conf(spark, conf):
        cpu = inproc.cpu_seconds(spark)
        watch = Stopwatch()
        run_variant(spark, variant, folder, scratch)
        seconds = watch.seconds()
        cpu = inproc.cpu_seconds(spark) - cpu
    return {"seconds": seconds, "cpu_s": cpu, "events_per_s": readings / seconds}


def run_variant(spark: Any, variant: str, folder: Path, scratch: Path) -> None:
    if variant in (SLIP, DIRECT, STAGED):
        flags = {"input": folder, "sink": "noop", "trigger": "available-now",
                 "ingest_stage": variant == STAGED}  # fmt: skip
        if variant == DIRECT:
            flags["shared_stage"] = False
        run = inproc.start_run(spark, "sensors", {**flags, "state_dir": scratch})
        run.wait()
    elif variant == BARE:
        for query in inproc.start_bare(spark, "sensors", {"readings": folder}, scratch):
            query.awaitTermination()
    elif variant in DEDUPLICATED:
        deduplicated_once(spark, folder, scratch, variant)
    elif variant == "batch":
        *outputs, cached = batch_tables(spark, folder)
        for table in outputs:
            table.write.format("noop").mode("overwrite").save()
        cached.unpersist()
    else:
        records = inproc.parsed_lines(spark, folder, SCHEMA, REQUIRED, stream=True)
        query = inproc.start_noop(records, None, scratch / "cp", "append", available_now=True)
        query.awaitTermination()


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    target = ctx.param("readings", 100_000, 1_000_000)
    reps = ctx.param("reps", 2, 2)
    folder = ctx.scratch("readings")
    ctx.log(f"  generating about {target:,} readings")
    readings = write_readings(folder, int(target))
    result.params = {"readings": readings, "repetitions": reps, "sensors": 500,
                     "window": "5m tumbling", "watermark": "10m"}  # fmt: skip
    every = [SLIP, DIRECT, STAGED, BARE, *DEDUPLICATED, "batch", "parse once"]
    usual = [SLIP, DIRECT, BARE, ONCE, "batch"]  # the others: by --set variants
    variants = [v for v in every if v in ctx.param("variants", usual, usual)]

    def one(variant: str, rep: int) -> dict[str, Any]:
        return measure(ctx, variant, folder, readings)

    metrics = {"seconds": "seconds", "events_per_s": "events_per_s", "cpu_s": "cpu_s"}
    against = [(d, "batch") for d in DEDUPLICATED] + [(d, BARE) for d in DEDUPLICATED]
    pairs = [(SLIP, "batch"), (DIRECT, "batch"), (STAGED, "batch"), (BARE, "batch")]
    pairs += [(SLIP, BARE), (DIRECT, BARE), (SLIP, DIRECT), (STAGED, SLIP), (SLIP, ONCE)]
    pairs += against
    by = Comparison(metrics, "events_per_s", pairs, "events/s")
    runs = by.run(ctx, result, variants, one, reps, readings=readings)
    cpu_pairs = [(SLIP, BARE), (DIRECT, BARE), (STAGED, BARE), (SLIP, ONCE), (BARE, "batch")]
    for a, b in [*cpu_pairs, (SLIP, "batch"), *against]:
        if a in variants and b in variants:
            cpu = paired_ratios(runs, "cpu_s", a, b)
            result.headline[f"{a} / {b}, CPU s"] = summarize_ratio(cpu)
    shares = [QUERIES / r for r in paired_ratios(runs, "seconds", DIRECT, "parse once")]
    if shares:
        result.headline[f"reading and parsing, 3 queries x parse once / {DIRECT}, seconds"] = (
            f"{median(shares):.2f} ({min(shares):.2f}-{max(shares):.2f}, {len(shares)} pairs)"
        )
    result.notes.append(
        "slipstream reads, parses and deduplicates the input once (the shared stage), plus a "
        "Parquet write and three reads of its rows; without the shared stage each of the three "
        "outputs reads, parses and deduplicates it; the batch job reads and deduplicates once"
    )
    return result
