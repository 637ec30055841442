"""A table as a stream (`spark.readStream.table`), e.g. one written by another query's `toTable`."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.core import values
from slipstream.core.options import Option
from slipstream.errors import ConfigError
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions, as_declared


class TableSource(Source):
    kind = "table"
    options = (
        Option(
            "source_table",
            values.text,
            "table to read with the table source",
            "a table name",
            metavar="NAME",
        ),
    )

    def validate(self, binding: Binding, options: SourceOptions, conf: Mapping[str, str]) -> None:
        if not options["source_table"]:
            raise ConfigError(
                "CONFIG_MISSING", "the table source needs a table name", "pass --source-table NAME"
            )

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        return f"table {options['source_table']}"

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        table = str(options["source_table"])
        where = F.lit(f"table:{table}").alias(SOURCE)
        return as_declared(spark.readStream.table(table), binding, where, f"table {table}")
