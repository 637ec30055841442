"""A Delta Lake table as a stream: `--input [NAME=]delta:PATH[?OPTION=VALUE&...]`, e.g. another
pipeline's `--sink delta:PATH` (bronze -> silver) or a table delta-rs wrote.

Delta's streaming source reads the table's commits in order; its options are Delta's names as
URL query parameters (`startingVersion`, `startingTimestamp`, `maxFilesPerTrigger`,
`maxBytesPerTrigger`, `ignoreDeletes`, `ignoreChanges`, `skipChangeCommits`,
`withEventTimeOrder`, `readChangeFeed`), each checked when the input is parsed
(core/spark_format.py), an unknown one refused. The table must be there before start (Spark
fails a stream over a folder without `_delta_log`). The rows are read as the pipeline's input
declares them (sources/base.py `as_declared`): the declared columns cast to their types, then
the required fields, the event-time guard, the expectations and the quarantine apply as to any
typed input. Replayable: Spark re-reads a failed batch's table versions.

Delta runs on the Spark 4.2 line only (core/spark_line.py): on another, DELTA_UNAVAILABLE before
the JVM starts; a session reading it gets Delta's jar and settings (settings/delta_package.py)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.core import spark_line
from slipstream.core.delta_log import has_commit
from slipstream.core.spark_format import DELTA_USAGE, SparkFormat
from slipstream.errors import ConfigError
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions, as_declared


class DeltaSource(Source):
    kind = "delta"
    delta = True
    #: an input given as `delta:PATH` reads this source (runtime/bind.py)
    reads_format = "delta"

    def validate(self, binding: Binding, options: SourceOptions, conf: Mapping[str, str]) -> None:
        spark_line.require_delta()
        table = binding.existing("a Delta table's folder", "DIR", directory=True)
        if not has_commit(table):
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"{binding.flag} {table}: not a Delta table (no commit in a _delta_log folder)",
                f"give {DELTA_USAGE} of a Delta table: another pipeline's --sink delta:PATH once "
                "it has written a batch, or a table another Delta writer made",
            )

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        return f"Delta table {_table(binding).describe()} (replayable)"

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        table = _table(binding)
        assert table.path is not None
        raw = spark.readStream.format("delta").options(**table.option_map).load(table.path)
        where = F.lit(table.describe()).alias(SOURCE)
        return as_declared(raw, binding, where, f"Delta table {table.path}")


def _table(binding: Binding) -> SparkFormat:
    """The bound table: `delta:PATH?...`, or a plain path with `--source delta`."""
    if binding.spark_format is not None:
        return binding.spark_format
    if binding.path is None:
        raise ConfigError(
            "CONFIG_MISSING",
            f"input {binding.name} reads a Delta table, and no table was given",
            f"pass {binding.flag} {DELTA_USAGE}",
        )
    return SparkFormat("delta", str(binding.path))
