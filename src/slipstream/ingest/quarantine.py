"""The quarantine: rejected records, with the raw record, the reason and where it came from.

The query that reads an input writes its rejected records itself, from the same read: the
filter that keeps the valid rows calls the JVM function `slipstream_quarantine` (java/src/
slipstream/jvm/Quarantine.java), which writes each rejected row to its task's file and drops
it. A task's file is renamed in as `batch-B.APP.part-P.json` when the task succeeds; a batch run
again after a crash writes the same records under its new application. So the records are read
and parsed once, and no second query reads them again.

Which query writes input I's quarantine: the first output whose plan reads I (its owner), given
the folder in the session setting `spark.sql.slipstream.quarantine.I` while it starts, which
Spark carries to its tasks; the others drop those rows. Reading it back, committed batches
only: sinks/quarantine.py.

With `--quarantine delta:DIR`, the ingest stage's query writes a Delta table per input
(exactly-once by Delta's txnAppId/txnVersion, sinks/delta.py).
The outputs count rejected rows per batch with `observe()`, so the batch line can show them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.errors import ConfigError
from slipstream.ingest.jvm_parse import available
from slipstream.ingest.parse import RAW, REASON, SOURCE
from slipstream.jvm import jar_path

QUALITY_METRICS = "quality"
#: the JVM function that writes rejected rows (java/src/slipstream/jvm/Quarantine.java)
FUNCTION = "slipstream_quarantine"
#: the session setting, per input, naming the folder its owner query writes
SETTING = "spark.sql.slipstream.quarantine."
#: the batch id a foreachBatch function sets in its session under Spark Connect, where its
#: jobs run off the query's thread (Quarantine.java reads it when Spark's own is missing)
BATCH_SETTING = "spark.sql.slipstream.batch"
#: the Connect server's setting that gives its sessions the function
EXTENSION = "slipstream.jvm.QuarantineExtension"

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
    """The valid rows, the rejected ones dropped (an ingest query writes those itself)."""
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


def tapped(parsed: DataFrame, name: str) -> DataFrame:
    """The valid rows of input `name`, their raw record and source still there (the late-row
    function reads them, runtime/late_rows.py; then `.drop(RAW, REASON)`); its rejected rows
    are written to its quarantine by the query that owns it (the module's docstring), in the
    same pass."""
    write = F.call_function(
        FUNCTION,
        F.lit(name),
        F.col(REASON),
        F.col(RAW).cast("string"),
        F.col(SOURCE).cast("string"),
    )
    # only a rejected row has its raw record and source copied out of Spark's memory into the
    # function (a branch of a CASE is evaluated only when taken); a valid row is kept
    return parsed.filter(F.when(F.col(REASON).isNull(), F.lit(True)).otherwise(write))


def register(spark: SparkSession) -> None:
    """Give `spark` the function `tapped` calls: registered in a classic session; a Spark
    Connect server has it from its extension, or the run is refused before any query starts."""
    if getattr(spark, "_jvm", None) is not None and hasattr(spark, "_jsparkSession"):
        if not available(spark):  # a JVM spark-submit started without the jar
            raise ConfigError(
                "JVM_PARSER_MISSING",
                "slipstream's jar is not on this Spark session's classpath: the quarantine is "
                "written by a function in it (slipstream.jvm.Quarantine)",
                f"give Spark the jar: --jars {jar_path()} (spark-submit) or --conf "
                f"spark.jars={jar_path()}",
            )
        if not spark.__dict__.get("_slipstream_quarantine"):
            spark._jvm.slipstream.jvm.Quarantine.register(spark._jsparkSession)  # type: ignore[union-attr]
            spark.__dict__["_slipstream_quarantine"] = True
        return
    known = spark.sql(f"SHOW FUNCTIONS LIKE '{FUNCTION}'").count()  # a Connect server
    if not known:
        raise ConfigError(
            "CONNECT_NOT_SUPPORTED",
            f"the Spark Connect server has no {FUNCTION}: slipstream's quarantine is written by "
            "the query that reads the records, through a function in slipstream's jar",
            f"start the server with --jars {jar_path()} --conf spark.sql.extensions={EXTENSION}",
        )


def owned(folders: Mapping[str, Path]) -> dict[str, str]:
    """The session settings that make a query write the quarantines of these inputs."""
    return {SETTING + name: str(Path(folder).resolve()) for name, folder in folders.items()}
