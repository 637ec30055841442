"""12. ads: the stream-stream join pipeline over generated impressions and clicks (1,000,000
impressions in the full run), against a Spark batch job computing the same joins, and the
join's buffered state batch by batch.

Variants, alternated:
- **slipstream (no stage)**: `ads` as a user runs it, available-now, every output to the noop
  sink, in batches of `files` files of each stream (the join's state is read from progress
  after each), `ingest_stage=False`: each output and each quarantine reads and parses;
- **slipstream, ingest stage**: the same with `ingest_stage=True` (issue 26): one ingest query
  per stream reads and parses it once; the outputs read its typed rows (Parquet, "bronze");
- **bare streaming query**: the engine's own cost (issue 40): the pipeline's three outputs (its
  own `build`: the same joins, watermarks and deduplication) as plain PySpark streaming queries
  over `readStream.schema(S).json` with the required fields present (`inproc.bare_outputs`),
  the same files per batch, each to noop; Spark's own (HDFS-backed) state store; no
  quarantine, no event-time guard, no late-row count;
- **batch**: `spark.read.schema(S).json` of both streams, required fields present, deduplicated,
  the same inner and left outer joins (same condition) and the catalog join, written to noop.

events/s = (impressions + clicks) / wall time; CPU seconds = the JVM's and this process's.
The streaming variants run with the shuffle partitions slipstream's CLI chooses for the run.
The state plateau is the join operator's rows (`numRowsTotal`) over the last third of the
batches against its maximum: a join whose watermarks bound its state levels off instead of
growing with the input."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from statistics import median as _median
from typing import Any

from pyspark.sql import functions as F

from bench import inproc
from bench.core import Comparison, Context, Result, Stopwatch, paired_ratios, summarize_ratio

NAME = "ads"
TITLE = "ads: impressions joined to clicks, streaming vs a Spark batch join, and its state"
SLIP, STAGED = "slipstream (no stage)", "slipstream, ingest stage"
BARE = "bare streaming query"


def write_stream(folder: Path, impressions: int) -> tuple[int, Path]:
    from slipstream.tools.generators.ads import Ads
    from slipstream.tools.generators.streams import StreamSpec, generate

    hours = 8
    workload = Ads(rate=impressions / (hours * 3600), ads=40, users=50_000)
    spec = StreamSpec(
        duration=timedelta(hours=hours), file_every=timedelta(minutes=5),
        watermark=timedelta(hours=3), window=timedelta(hours=1), out_of_order=0.3,
        late=0.0, duplicates=0.01, malformed=0.005,
    )  # fmt: skip
    catalog = workload.write_catalog(folder / "catalog.csv")
    report = generate(spec, workload, folder / "streams")
    return report.total_lines, catalog


def batch_join(spark: Any, streams: Path, catalog: Path) -> list[Any]:
    from slipstream.pipelines.ads import CATALOG, CLICKS, IMPRESSIONS

    impressions = (
        spark.read.schema(IMPRESSIONS).json(str(streams / "impressions"))
        .dropna(subset=["impression_id", "ad_id", "impression_time"])
        .dropDuplicates(["impression_id"])
    )  # fmt: skip
    clicks = (
        spark.read.schema(CLICKS).json(str(streams / "clicks"))
        .dropna(subset=["click_id", "impression_id", "ad_id", "click_time"])
        .dropDuplicates(["click_id"])
        .select("click_id", F.col("impression_id").alias("cid"), F.col("ad_id").alias("cad"),
                "click_time")
    )  # fmt: skip
    condition = F.expr(
        "impression_id = cid AND ad_id = cad AND click_time >= impression_time AND "
        "click_time <= impression_time + INTERVAL 1 HOUR"
    )
    table = F.broadcast(spark.read.schema(CATALOG).option("header", True).csv(str(catalog)))
    attributed = impressions.join(clicks, condition, "inner").join(table, "ad_id", "left")
    outcome = impressions.join(clicks, condition, "left_outer")
    return [attributed, outcome]


def flags(streams: Path, catalog: Path, files: int, staged: bool = False) -> dict[str, Any]:
    return {
        "input": [f"impressions={streams / 'impressions'}", f"clicks={streams / 'clicks'}",
                  f"catalog={catalog}"],
        "sink": "noop", "trigger": "available-now", "max_files_per_trigger": files,
        "ingest_stage": staged,
    }  # fmt: skip


def cli_conf(streams: Path, catalog: Path, files: int) -> dict[str, str]:
    """The shuffle partitions slipstream's CLI chooses for this available-now run of ads."""
    from slipstream.runtime import partitions, runner
    from slipstream.settings.config import load_settings

    settings = load_settings("ads", flags(streams, catalog, files), environ={})
    return partitions.choose(runner.prepare(settings)).conf()


def measure(
    ctx: Context, variant: str, streams: Path, catalog: Path, events: int, files: int
) -> dict[str, Any]:
    spark = inproc.session()
    scratch = ctx.scratch("ads") / f"{variant.replace(' ', '-')}-{inproc.unique()}"
    conf = {} if variant == "batch" else cli_conf(streams, catalog, files)
    if variant == BARE:  # Spark's own state store and listing, as a plain PySpark job gets
        conf = {**conf, **inproc.SPARK_OWN}
    with inproc.sql_conf(spark, conf):
        cpu = inproc.cpu_seconds(spark)
        watch = Stopwatch()
        out = run_variant(spark, variant, streams, catalog, files, scratch)
        seconds = watch.seconds()
        cpu = inproc.cpu_seconds(spark) - cpu
    return {"seconds": seconds, "cpu_s": cpu, "events_per_s": events / seconds, **out}


def run_variant(
    spark: Any, variant: str, streams: Path, catalog: Path, files: int, scratch: Path
) -> dict[str, Any]:
    if variant == "batch":
        for frame in batch_join(spark, streams, catalog):
            frame.write.format("noop").mode("overwrite").save()
        return {}
    if variant == BARE:
        paths = {"impressions": streams / "impressions", "clicks": streams / "clicks",
                 "catalog": catalog}  # fmt: skip
        options = {"maxFilesPerTrigger": str(files)}
        for query in inproc.start_bare(spark, "ads", paths, scratch, options):
            query.awaitTermination()
        return {}
    settings = {**flags(streams, catalog, files, variant == STAGED), "state_dir": scratch}
    run = inproc.start_run(spark, "ads", settings)
    run.wait()
    query = run.queries["ad_clicks_attributed"]
    rows = [
        sum(o["numRowsTotal"] for o in p["stateOperators"] if "Join" in o["operatorName"])
        for p in query.recentProgress
        if p["numInputRows"] > 0
    ]
    if not rows:
        return {}
    tail = rows[len(rows) * 2 // 3 :]
    return {"state_max": max(rows), "state_plateau": _median(tail), "batches": len(rows)}


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    impressions = int(ctx.param("impressions", 100_000, 1_000_000))
    files = int(ctx.param("files", 4, 4))
    reps = ctx.param("reps", 1, 1)
    root = ctx.scratch("ads-input")
    ctx.log(f"  generating about {impressions:,} impressions over 8 hours of event time")
    events, catalog = write_stream(root, impressions)
    result.params = {"impressions": impressions, "events (both streams)": events,
                     "files per stream per batch": files, "repetitions": reps,
                     "watermarks": "2h impressions, 3h clicks", "within": "1h"}  # fmt: skip
    variants = [SLIP, STAGED, BARE, "batch"]
    variants = [v for v in variants if v in ctx.param("variants", variants, variants)]

    def one(variant: str, rep: int) -> dict[str, Any]:
        return measure(ctx, variant, root / "streams", catalog, events, files)

    metrics = {"seconds": "seconds", "events_per_s": "events_per_s", "cpu_s": "cpu_s",
               "state_max": "state_max", "state_plateau": "state_plateau",
               "batches": "batches"}  # fmt: skip
    pairs = [(SLIP, "batch"), (STAGED, "batch"), (BARE, "batch"), (SLIP, BARE), (STAGED, SLIP)]
    by = Comparison(metrics, "events_per_s", pairs, "events/s", warmup=False)
    runs = by.run(ctx, result, variants, one, reps, events=events)
    for a, b in ((SLIP, BARE), (STAGED, BARE), (BARE, "batch"), (SLIP, "batch")):
        if a in variants and b in variants:
            cpu = paired_ratios(runs, "cpu_s", a, b)
            result.headline[f"{a} / {b}, CPU s"] = summarize_ratio(cpu)
    result.notes.append(
        "slipstream without the stage runs five queries (three outputs, two quarantines), each "
        "reading and parsing its inputs; with the ingest stage two ingest queries parse each "
        "stream once and the three outputs read their typed rows; the batch job reads each "
        "stream once per join"
    )
    return result
