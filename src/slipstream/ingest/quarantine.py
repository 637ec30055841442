"""The quarantine: rejected records, with the raw record, the reason and where it came from.

Rejected rows are written by their own streaming query into JSON-lines files through Spark's file
sink, so they are exactly-once (its `_spark_metadata` log) and survive restarts like the results;
with `--quarantine delta:DIR`, into a Delta table per input through the Delta sink (exactly-once
by Delta's txnAppId/txnVersion, sinks/delta.py).
The main query counts them per batch with `observe()`, so the batch line can show them."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.ingest.parse import RAW, REASON, SOURCE

QUALITY_METRICS = "quality"
#: a quarantined record's columns and types, in files and Delta tables alike
LAYOUT = {"raw": "string", "reason": "string", "source": "string", "quarantined_at": "timestamp"}


def rejected(parsed: DataFrame) -> DataFrame:
    """The rows to quarantine, in the quarantine's record layout."""
    return parsed.filter(F.col(REASON).isNotNull()).select(
        F.col(RAW).alias("raw"),
        F.col(REASON).alias("reason"),
        F.col(SOURCE).alias("source"),
        F.current_timestamp().alias("quarantined_at"),
    )


def accepted(parsed: DataFrame) -> DataFrame:
    return parsed.filter(F.col(REASON).isNull()).drop(RAW, REASON)


def quality_metrics() -> list[Column]:
    """Per-batch counts carried by `observe()` into the query's progress, and one of the
    batch's reasons (the least: a replayed batch shows the same one), so that a batch that
    quarantines nearly everything can say why."""
    return [
        F.count(F.lit(1)).alias("input"),
        F.count(F.col(REASON)).alias("quarantined"),
        F.min(F.col(REASON)).alias("reason"),
    ]


def read_quarantine(spark: SparkSession, directory: Path) -> DataFrame:
    """The quarantined records written so far (committed batches only), from JSON files or,
    for `--quarantine delta:DIR`, a Delta table (a session with Delta: its versions are its
    commits). A raw record may be longer than the 20 million characters Spark's JSON reader
    takes by default."""
    if (Path(directory) / "_delta_log").is_dir():
        return spark.read.format("delta").load(str(directory)).select(*LAYOUT)
    return (
        spark.read.schema(", ".join(f"{c} {t}" for c, t in LAYOUT.items()))
        .option("maxStringLen", str(2**31 - 1))
        .json(str(directory))
    )
