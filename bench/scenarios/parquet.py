"""15. Parquet input: what judging each file whole costs against Spark's own parquet reader.

A parquet stream input is listed with Spark's `binaryFile` format and each file is read by
pyarrow in a Python worker (`sources/parquet_files.py`), so that a corrupt file, or one whose
columns do not fit the declared schema, becomes a quarantine record instead of failing the
query. This scenario measures that price on good files alone, as batch jobs over the same
Parquet files that keep the accepted rows and write all their columns to the noop sink,
alternated:

- **spark reader**: `spark.read.schema(S).parquet(dir)`, Spark's vectorised reader (which fails
  the job on the first bad file);
- **slipstream judged**: the `binaryFile` listing + `parquet_rows` + `accepted` (what a parquet
  stream input reads in each batch)."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from bench import inproc
from bench.core import Comparison, Context, Result, Stopwatch
from bench.workloads import MOBILE_ACTIONS
from slipstream.pipelines.mobile import MobilePipeline

NAME = "parquet"
TITLE = "Parquet input: each file judged whole by pyarrow vs Spark's parquet reader, same files"
#: the mobile pipeline's record, as in scenario 8
SCHEMA = MobilePipeline.input("actions").schema
REQUIRED = MobilePipeline.input("actions").required


def write_parquet_files(directory: Path, files: int, rows_per_file: int, seed: int = 7) -> int:
    """`files` Parquet files of mobile actions (id, action, ts in microseconds UTC), event time
    1 ms apart, written aside and renamed in. Returns the row count."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    start = int(datetime(2026, 1, 1, tzinfo=UTC).timestamp() * 1_000_000)
    n = 0
    for f in range(files):
        table = pa.table(
            {
                "id": [f"phone{rng.randrange(10_000)}" for _ in range(rows_per_file)],
                "action": [rng.choice(MOBILE_ACTIONS) for _ in range(rows_per_file)],
                "ts": pa.array(
                    [start + (n + i) * 1_000 for i in range(rows_per_file)],
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        )
        n += rows_per_file
        tmp = directory / f".part-{f:05d}.parquet.tmp"
        pq.write_table(table, tmp)
        os.replace(tmp, directory / f"part-{f:05d}.parquet")
    return n


def frame(variant: str, input_dir: Path) -> DataFrame:
    from slipstream.ingest.quarantine import accepted
    from slipstream.sources.parquet_files import LISTING, parquet_rows

    spark = inproc.session()
    if variant == "spark reader":
        return spark.read.schema(SCHEMA).parquet(str(input_dir))
    listing = spark.read.format("binaryFile").schema(LISTING).load(str(input_dir))
    return accepted(parquet_rows(listing, SCHEMA, REQUIRED))  # type: ignore[arg-type]


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    files, per_file = ctx.param("files", (4, 50_000), (20, 100_000))
    reps = ctx.param("reps", 3, 5)
    input_dir = ctx.scratch("input")
    rows = write_parquet_files(input_dir, files, per_file)
    result.params = {
        "rows": rows,
        "files": files,
        "fields": "id string, action string, ts timestamp (all required)",
        "repetitions": reps,
    }
    ctx.log(f"  {rows:,} rows in {files} Parquet files")

    def one(variant: str, rep: int) -> dict[str, Any]:
        watch = Stopwatch()
        frame(variant, input_dir).write.format("noop").mode("overwrite").save()
        seconds = watch.seconds()
        return {"seconds": seconds, "rows_per_s": rows / seconds}

    metrics = {"seconds": "seconds", "rows_per_s": "rows_per_s"}
    pairs = [("slipstream judged", "spark reader")]
    Comparison(metrics, "rows_per_s", pairs, "rows/s").run(
        ctx, result, ["spark reader", "slipstream judged"], one, reps, rows=rows
    )
    result.notes.append(
        "rows/s = rows / wall time of a batch job keeping the accepted rows in noop; ratios are "
        "paired within one repetition, median (min-max)"
    )
    return result
