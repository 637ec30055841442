"""Any streaming format Spark can load: `--input [NAME=]format:FORMAT[:PATH][?OPTION=VALUE&...]`
(core/spark_format.py has the grammar). A built-in format (`orc`), a source jar's, or a Python
data source the pipeline registers (`Pipeline.data_sources`; runtime/inputs.py registers them on
the session before the inputs are read).

Each record's `_source` (what the quarantine and the dead-letter keep) is its file when Spark's
file source reads the format (`_metadata.file_path`, as the files source gives it), otherwise
the format's description.

The records are what the format gives, read as the pipeline's input declares them:

- a declared schema the format's columns hold: those columns, cast to the declared types (a
  file format reads with that schema), then judged like any typed input: required fields, the
  event-time guard, expectations and the quarantine apply;
- a declared schema the columns do not hold and a `value` column (a json or csv input): lines,
  parsed into the declared columns, a malformed one quarantined;
- no declared schema and a `value` column: text lines;
- otherwise every column the format gives.

Replay: Spark re-reads a failed batch's offsets from the source itself; a file format and a
Python data source (its `read` of an offset range) can, a third-party format only if it
implements it. `--from-checkpoint` has no position to carry from such a source (refused)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from slipstream.core.spark_format import SparkFormat
from slipstream.errors import ConfigError
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions, as_declared


class SparkFormatSource(Source):
    kind = "format"
    binds_formats = True

    def validate(self, binding: Binding, options: SourceOptions, conf: Mapping[str, str]) -> None:
        spark_format = _format(binding)
        if spark_format.reads_files:
            binding.existing(
                f"a folder for Spark's {spark_format.name} files source", "DIR", directory=True
            )
        if spark_format.needs_schema and binding.schema is None:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"input {binding.name} reads {spark_format.name} files, and Spark's streaming "
                f"{spark_format.name} source needs their schema; the input declares none",
                "declare the input's schema (Input(..., schema=...)), or read text lines",
            )

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        spark_format = _format(binding)
        replay = (
            "replayable"
            if spark_format.reads_files
            else "replayable if the format re-reads an offset range"
        )
        return f"Spark format {spark_format.describe()} ({replay})"

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        spark_format = _format(binding)
        reader = spark.readStream.format(spark_format.name).options(**spark_format.option_map)
        if binding.schema is not None and spark_format.reads_files:
            reader = reader.schema(binding.schema)
        raw = reader.load(spark_format.path) if spark_format.path else reader.load()
        return as_declared(raw, binding, _where(spark_format), spark_format.describe())


def _where(spark_format: SparkFormat) -> Column:
    """A record's `_source`: its file, as the files source gives it, when Spark's file source
    reads the format (`_metadata.file_path`); otherwise the format's description."""
    if spark_format.reads_files and spark_format.path:
        return F.col("_metadata.file_path").alias(SOURCE)
    return F.lit(spark_format.describe()).alias(SOURCE)


def _format(binding: Binding) -> SparkFormat:
    if binding.spark_format is None:
        raise ConfigError(
            "CONFIG_MISSING",
            f"input {binding.name} reads the format source, which needs the format",
            f"pass {binding.flag} format:FORMAT[:PATH][?OPTION=VALUE&...]",
        )
    return binding.spark_format
