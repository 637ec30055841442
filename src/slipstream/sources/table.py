"""A table as a stream (`spark.readStream.table`), e.g. one written by another query's `toTable`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.errors import ConfigError
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, register

if TYPE_CHECKING:
    from slipstream.settings.config import Settings


@register
class TableSource(Source):
    kind = "table"

    def validate(self, settings: Settings, binding: Binding) -> None:
        if not settings.source_table:
            raise ConfigError(
                "CONFIG_MISSING", "the table source needs a table name", "pass --source-table NAME"
            )

    def describe(self, settings: Settings, binding: Binding) -> str:
        return f"table {settings.source_table}"

    def read(self, spark: SparkSession, settings: Settings, binding: Binding) -> RawInput:
        fmt = binding.format
        frame = spark.readStream.table(str(settings.source_table))
        frame = frame.withColumn(SOURCE, F.lit(f"table:{settings.source_table}"))
        if "value" in frame.columns and fmt in ("json", "csv", "text"):
            return RawInput(frame.select("value", SOURCE), fmt, True)
        return RawInput(frame, "typed", True)
