"""3. Flagship throughput: `trending` over pre-generated files, streaming vs a batch job.

Both read the same JSON-lines files (the trending generator's output, with its dirt: malformed
lines, duplicates, out-of-order and late events, unknown articles) and write the same table,
`article_views`, into a SQLite file:

- **streaming (no stage)** and **streaming, ingest stage**: slipstream's runner with the
  trending pipeline, `--trigger available-now`, the default sink (SQLite) -- exactly what
  `slipstream run trending --input DIR --input catalog=FILE --trigger available-now
  --ingest-stage false|true` runs, in the benchmark's JVM so all variants share it (the other
  streaming variants below run without the stage);
- **bare streaming query**: the engine's own cost (issue 40): a plain PySpark streaming query
  of the same shape, written as a user of Spark alone would: `readStream.schema(...).json`,
  the pipeline's rules as filters, `dropDuplicatesWithinWatermark(event_id)` under a 10-minute
  watermark, the sliding window count, the broadcast catalog join, update mode, each batch's
  rows upserted into SQLite in one transaction (`foreachBatch`); Spark's own (HDFS-backed) state
  store and file listing (`inproc.SPARK_OWN`), and the shuffle partitions slipstream chooses
  for the run (runtime/partitions.py);
- **batch job**: a plain Spark batch job written for the same result: `spark.read.json` with the
  schema, the pipeline's rules as filters, `dropDuplicates(event_id)`, sliding windows, the
  catalog join, rows written to SQLite with `executemany`.

With no `maxFilesPerTrigger` the available-now run takes every file in one micro-batch, where
nothing is late, so both must produce identical rows; the benchmark checks that. A third
variant caps the files per micro-batch (the `--max-files-per-trigger` setting), which is what a
backfill of a large landing folder looks like; its results differ by design (late events are
dropped at batch boundaries).

CPU seconds per run: the JVM's (its /proc stat, read before and after) and this process's;
the streaming variants run with the shuffle partitions slipstream's CLI chooses for the run."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from bench import inproc
from bench.core import Context, Result, Stopwatch, alternate, median, paired_ratios, summarize_ratio
from bench.inproc import cpu_seconds
from bench.workloads import TrendingInput, generate_trending, land_all

NAME = "flagship"
TITLE = "flagship throughput: trending available-now vs a Spark batch job, same files"

EVENT_SCHEMA = "event_id STRING, article_id STRING, user_id STRING, ts TIMESTAMP"
CATALOG_SCHEMA = "article_id STRING, title STRING, section STRING, published_at STRING"
COLUMNS = ("window_start", "window_end", "article_id", "title", "section", "views", "in_catalog")


def batch_job(
    spark: SparkSession, input_dir: Path, catalog: Path, parser: str = "spark"
) -> DataFrame:
    """The same result as the trending pipeline, written as an ordinary batch job. `parser`
    "spark" reads with Spark's JSON reader; "slipstream" reads lines as text and parses them
    with slipstream's quality parser, as the pipeline does (to split the gap into parsing and
    the rest)."""
    if parser == "spark":
        events = spark.read.schema(EVENT_SCHEMA).json(str(input_dir))
    else:
        from slipstream.pipelines.trending import TrendingPipeline

        spec = TrendingPipeline.input("events")
        events = inproc.parsed_lines(spark, input_dir, spec.schema, spec.required)
    return with_titles(spark, counted(valid_events(events).dropDuplicates(["event_id"])), catalog)


def bare_streaming(spark: SparkSession, input_dir: Path, catalog: Path) -> DataFrame:
    """The trending query as a user of plain PySpark writes it (the engine's own cost)."""
    events = spark.readStream.schema(EVENT_SCHEMA).json(str(input_dir))
    deduplicated = (
        valid_events(events)
        .withWatermark("ts", "10 minutes")
        .dropDuplicatesWithinWatermark(["event_id"])
    )
    return with_titles(spark, counted(deduplicated), catalog)


def valid_events(events: DataFrame) -> DataFrame:
    """The pipeline's rules as filters."""
    return events.where(
        F.col("event_id").isNotNull()
        & F.col("article_id").isNotNull()
        & F.col("ts").isNotNull()
        & F.col("article_id").rlike("^a[0-9]+$")
        & (F.col("ts") <= F.current_timestamp() + F.expr("INTERVAL 1 DAY"))
    )


def counted(events: DataFrame) -> DataFrame:
    """Views per article in 10-minute windows sliding by 1 minute."""
    return events.groupBy(F.window("ts", "10 minutes", "1 minute"), "article_id").agg(
        F.count(F.lit(1)).alias("views")
    )


def with_titles(spark: SparkSession, counts: DataFrame, catalog: Path) -> DataFrame:
    """The counts with the catalog's titles (a broadcast join), as the table's columns."""
    titles = (
        spark.read.schema(CATALOG_SCHEMA)
        .option("header", "true")
        .csv(str(catalog))
        .select("article_id", "title", "section", F.lit(True).alias("in_catalog"))
    )
    iso = "yyyy-MM-dd'T'HH:mm:ss'Z'"
    return counts.join(F.broadcast(titles), "article_id", "left").select(
        F.date_format("window.start", iso).alias("window_start"),
        F.date_format("window.end", iso).alias("window_end"),
        "article_id",
        "title",
        "section",
        "views",
        F.coalesce("in_catalog", F.lit(False)).alias("in_catalog"),
    )


def table_rows(db: Path) -> set[tuple[Any, ...]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        cols = ", ".join(COLUMNS)
        return {(*r[:6], bool(r[6])) for r in conn.execute(f"SELECT {cols} FROM article_views")}


def run_streaming(
    ctx: Context,
    landing: Path,
    data: TrendingInput,
    max_files: int | None,
    label: str,
    conf: dict[str, str] | None = None,
    late: str = "on",
    *,
    ingest_stage: bool,
) -> dict[str, Any]:
    """`late`: the dead-letter as it is, or "off" (`--late-rows false`). `ingest_stage` is
    always passed (bench/stage.py)."""
    from slipstream.runtime import partitions, runner
    from slipstream.settings.config import load_settings

    spark = inproc.session()
    scratch = ctx.scratch("runs") / f"{label}-{inproc.unique()}"
    db = scratch / "trending.db"
    flags: dict[str, Any] = {
        "input": [str(landing), f"catalog={data.catalog}"],
        "trigger": "available-now",
        "state_dir": scratch,
        "sink": f"sqlite:{db}",
        "ingest_stage": ingest_stage,
    }
    if max_files:
        flags["max_files_per_trigger"] = max_files
    if late == "off":
        flags["late_rows"] = False
    per_query = {k: v for k, v in (conf or {}).items() if k in inproc.PER_QUERY}
    if per_query:  # set while each query starts, as --conf is
        flags["conf"] = per_query
    prepared = runner.prepare(load_settings("trending", flags, environ={}))
    conf = {**partitions.choose(prepared).conf(), **(conf or {})}  # as the CLI's session has
    with inproc.sql_conf(spark, conf):
        cpu = cpu_seconds(spark)
        watch = Stopwatch()
        run = runner.start(spark, prepared)
    run.wait()
    seconds = watch.seconds()
    totals = run.totals.by_query.get("trending.views", {})
    return {
        "seconds": seconds,
        "cpu_s": cpu_seconds(spark) - cpu,
        "events_per_s": data.total_lines / seconds,
        "batches": int(totals.get("batches", 0)),
        "db": str(db),
    }


def run_batch(
    ctx: Context, landing: Path, data: TrendingInput, parser: str = "spark"
) -> dict[str, Any]:
    from slipstream.testing import article_views_db

    spark = inproc.session()
    scratch = ctx.scratch(f"runs/batch-{parser}-{inproc.unique()}")
    db = scratch / "trending.db"
    cpu = cpu_seconds(spark)
    watch = Stopwatch()
    rows = [tuple(r) for r in batch_job(spark, landing, data.catalog, parser).collect()]
    article_views_db(db, rows)
    seconds = watch.seconds()
    return {
        "seconds": seconds,
        "cpu_s": cpu_seconds(spark) - cpu,
        "events_per_s": data.total_lines / seconds,
        "batches": 1,
        "db": str(db),
    }


def start_bare(
    spark: SparkSession, landing: Path, catalog: Path, scratch: Path, batches: list[int]
) -> StreamingQuery:
    """The bare streaming query started available-now, each batch's rows upserted into
    scratch/trending.db in one transaction and its id appended to `batches`; with Spark's own
    state store and file listing (what a plain PySpark job gets) and the partitions slipstream
    would choose (one per core: a backfill), set while it starts."""
    from slipstream.testing import article_views_db

    db = article_views_db(scratch / "trending.db", [])

    def upsert(frame: DataFrame, batch_id: int) -> None:
        rows = [tuple(r) for r in frame.collect()]  # a batch's changed windows: small
        with sqlite3.connect(db) as conn:
            conn.executemany("INSERT OR REPLACE INTO article_views VALUES (?,?,?,?,?,?,?)", rows)
        batches.append(batch_id)

    conf = {inproc.PARTITIONS_KEY: str(os.cpu_count() or 1), **inproc.SPARK_OWN}
    with inproc.sql_conf(spark, conf):
        return (
            bare_streaming(spark, landing, catalog)
            .writeStream.outputMode("update")
            .option("checkpointLocation", str(scratch / "checkpoint"))
            .foreachBatch(upsert)
            .trigger(availableNow=True)
            .start()
        )


def run_bare(ctx: Context, landing: Path, data: TrendingInput) -> dict[str, Any]:
    """The bare streaming query (start_bare) over the landed files, timed to its end."""
    spark = inproc.session()
    scratch = ctx.scratch(f"runs/bare-{inproc.unique()}")
    batches: list[int] = []
    cpu = cpu_seconds(spark)
    watch = Stopwatch()
    query = start_bare(spark, landing, data.catalog, scratch, batches)
    query.awaitTermination()
    seconds = watch.seconds()
    return {
        "seconds": seconds,
        "cpu_s": cpu_seconds(spark) - cpu,
        "events_per_s": data.total_lines / seconds,
        "batches": len(batches),
        "db": str(scratch / "trending.db"),
    }


PLAIN, STAGED = "streaming (no stage)", "streaming, ingest stage"
NO_CLOSING = "streaming, no closing batch"
BARE = "bare streaming query"
SLIP_BATCH = "batch job, slipstream parser"
DEAD_LETTER = {"streaming, --late-rows false": "off"}
BY_STORE = {f"streaming, {name} state store": conf for name, conf in inproc.STATE_STORES.items()}
#: runs of its own variant that a process started for one (`isolate`) makes before the measured
#: one: the JVM's first run compiles Spark's hot code
ISOLATED_WARMUP = 2


def capped_names(cap: int) -> tuple[str, str]:
    return f"streaming, {cap} files/batch", f"streaming, {cap} files/batch, ingest stage"


def partition_names(partitions: list[str]) -> dict[str, str]:
    return {f"streaming, {p} shuffle partitions": p for p in partitions}


def run_variant(
    ctx: Context,
    landing: Path,
    data: TrendingInput,
    variant: str,
    cap: int,
    partitions: list[str],
    *,
    isolated: bool = False,
) -> dict[str, Any]:
    """One run of `variant` in this process's JVM, or `isolated` in one of its own."""
    if isolated:
        return run_isolated(ctx, landing, data, variant, cap, partitions)
    capped, capped_staged = capped_names(cap)
    by_partitions = partition_names(partitions)
    if variant in by_partitions:
        conf = {inproc.PARTITIONS_KEY: by_partitions[variant]}
        return run_streaming(ctx, landing, data, None, "partitions", conf, ingest_stage=False)
    if variant in BY_STORE:
        conf = BY_STORE[variant]
        return run_streaming(ctx, landing, data, None, "store", conf, ingest_stage=False)
    if variant == NO_CLOSING:
        conf = {inproc.NO_DATA_KEY: "false"}
        return run_streaming(ctx, landing, data, None, "closing", conf, ingest_stage=False)
    if variant in (PLAIN, STAGED):
        on = variant == STAGED
        label = "staged" if on else "stream"
        return run_streaming(ctx, landing, data, None, label, ingest_stage=on)
    if variant in DEAD_LETTER:
        late = DEAD_LETTER[variant]
        return run_streaming(ctx, landing, data, None, "late", late=late, ingest_stage=False)
    if variant == BARE:
        return run_bare(ctx, landing, data)
    if variant == "batch job":
        return run_batch(ctx, landing, data)
    if variant == SLIP_BATCH:
        return run_batch(ctx, landing, data, "slipstream")
    if variant == capped_staged:  # the outputs run beside the ingest query
        return run_streaming(ctx, landing, data, cap, "capped-staged", ingest_stage=True)
    if variant == capped:
        return run_streaming(ctx, landing, data, cap, "capped", ingest_stage=False)
    raise ValueError(f"no flagship variant {variant!r}")


def run_isolated(
    ctx: Context, landing: Path, data: TrendingInput, variant: str, cap: int, partitions: list[str]
) -> dict[str, Any]:
    """One measured run of `variant` in a JVM of its own (`python -m bench.worker flagship`),
    after ISOLATED_WARMUP runs of the same variant there: no other variant's state in its heap
    or its code in the JIT's profiles (docs/benchmarks.md section 43)."""
    command = [
        sys.executable, "-m", "bench.worker", "flagship", "--variant", variant,
        "--landing", str(landing), "--catalog", str(data.catalog),
        "--lines", str(data.total_lines), "--work", str(ctx.scratch(f"isolated-{inproc.unique()}")),
        "--cap", str(cap), "--partitions", ",".join(partitions),
        "--warmup", str(ISOLATED_WARMUP),
    ]  # fmt: skip
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    events = ctx.param("events", 200_000, 1_000_000)
    rate = 2000.0  # the generator's default: one file per second of event time
    reps = ctx.param("reps", 1, 2)
    cap = ctx.param("cap", 25, 100)
    partitions = [str(p) for p in ctx.param("partitions", [], [2, 8])]
    data = generate_trending(ctx.work / "input", events, rate, markers=False)
    landing = ctx.work / "landing"
    land_all(data, landing)
    result.params = {
        "events": data.total_lines,
        "files": len(data.files),
        "events_per_file": int(rate),
        "repetitions": reps,
        "max_files_per_trigger_variant": cap,
        "shuffle_partition_variants": partitions,
        "window": "10 min sliding by 1 min, watermark 10 min (trending defaults)",
    }
    ctx.log(f"  {data.total_lines:,} events in {len(data.files)} files")
    capped, capped_staged = capped_names(cap)
    slip_batch = SLIP_BATCH
    by_partitions = partition_names(partitions)
    dead_letter = DEAD_LETTER
    by_store = BY_STORE
    plain, staged, no_closing, bare = PLAIN, STAGED, NO_CLOSING, BARE
    variants = [
        plain, staged, bare, "batch job", slip_batch, capped, capped_staged, *by_partitions,
        *dead_letter, *by_store, no_closing,
    ]  # fmt: skip
    variants = [v for v in variants if v in ctx.param("variants", variants, variants)]
    isolate = bool(ctx.param("isolate", False, False))
    result.params["isolated"] = isolate

    def one(variant: str, rep: int) -> dict[str, Any]:
        return run_variant(ctx, landing, data, variant, cap, partitions, isolated=isolate)

    runs = alternate(variants, one, reps, warmup=not isolate, log=ctx.log)
    tables = {
        v: table_rows(Path(next(r["db"] for r in runs if r["variant"] == v))) for v in variants
    }
    for v in variants:
        mine = [r for r in runs if r["variant"] == v]
        rows = tables[v]
        result.add(
            variant=v,
            events=data.total_lines,
            batches=mine[0]["batches"],
            seconds=median([r["seconds"] for r in mine]),
            events_per_s=median([r["events_per_s"] for r in mine]),
            cpu_s=median([r["cpu_s"] for r in mine]),
            output_rows=len(rows),
            views=sum(r[5] for r in rows),
            runs=len(mine),
        )
    default_partitions = inproc.session().conf.get(inproc.PARTITIONS_KEY)
    for a, b, label in (
        (plain, bare, "slipstream / the bare streaming query"),
        (staged, bare, "slipstream with the ingest stage / the bare streaming query"),
        (bare, "batch job", "the bare streaming query / batch job"),
        (plain, "batch job", "slipstream / batch job"),
    ):
        if a in variants and b in variants:
            result.headline[f"{label}, CPU s"] = summarize_ratio(paired_ratios(runs, "cpu_s", a, b))
    pairs = [
        (plain, "batch job", "streaming / batch job"),
        (bare, "batch job", "the bare streaming query / batch job"),
        (plain, bare, "slipstream / the bare streaming query"),
        (staged, "batch job", "streaming with the ingest stage / batch job"),
        (staged, plain, "ingest stage / without"),
        (slip_batch, "batch job", "batch job: slipstream parser / Spark's JSON reader"),
        (plain, slip_batch, "streaming / batch job with the same (slipstream) parser"),
        (capped, plain, f"{cap} files/batch / one batch"),
        (capped_staged, capped, f"{cap} files/batch: ingest stage / without"),
        (capped_staged, "batch job", f"{cap} files/batch with the ingest stage / batch job"),
        *((v, plain, f"{v} / {default_partitions} (default)") for v in by_partitions),
        *((plain, v, f"streaming (dead-letter skips) / {v}") for v in dead_letter),
    ]
    for a, b, label in pairs:
        if a in variants and b in variants:
            result.headline[f"{label}, events/s"] = summarize_ratio(
                paired_ratios(runs, "events_per_s", a, b)
            )
    one_batch = [
        v for v in (plain, staged, bare, "batch job", slip_batch, *dead_letter) if v in tables
    ]
    same = all(tables[v] == tables[one_batch[0]] for v in one_batch)
    if len(one_batch) > 1:
        result.headline[f"rows identical across {', '.join(one_batch)}"] = same
    if not same:
        first, *rest = (tables[v] for v in one_batch)
        odd = next(t for t in rest if t != first)
        result.notes.append(
            f"rows differ: {len(first - odd)} only in {one_batch[0]}, {len(odd - first)} in "
            f"another; e.g. {sorted(first ^ odd)[:2]}"
        )
    result.notes.append(
        "events/s = input lines (all of them, dirt included) / wall time from query start to "
        "the last row committed in SQLite; the streaming run also writes its quarantine"
    )
    return result
