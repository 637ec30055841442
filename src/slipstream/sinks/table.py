"""A table of Spark's catalog (`--sink table:NAME`): Spark's `toTable`, which creates the table
when it does not exist (a managed one, in `spark.sql.warehouse.dir`) or appends to it. Another
pipeline can read it as a stream: `--source table --source-table NAME` (sources/table.py).

Exactly-once as the table's format gives it: a file table (parquet, the default) is written by
Spark's file sink, with its `_spark_metadata` log in the table's folder."""

from __future__ import annotations

import re
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError
from slipstream.sinks.base import Sink, SinkContext

#: a table name as Spark's parser takes it unquoted: NAME, DATABASE.NAME or CATALOG.DB.NAME
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,2}$")


class TableSink(Sink):
    kind = "table"
    target_grammar = "required"
    usage = "table:NAME"
    #: Spark's options of `toTable`: the format of a table it creates, and its partitioning
    writer_options = ("format", "partitionBy")

    def __init__(self, spec: SinkSpec) -> None:
        super().__init__(spec)
        if not _NAME.match(str(spec.target)):
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--sink table:{spec.target}: not a table name",
                "give table:NAME, table:DATABASE.NAME or table:CATALOG.DATABASE.NAME (letters, "
                "digits and _)",
            )

    @property
    def table(self) -> str:
        return str(self.spec.target)

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        options = self.spec.option_map
        if "format" in options:
            writer = writer.format(options["format"])
        if options.get("partitionBy"):
            writer = writer.partitionBy(*[c.strip() for c in options["partitionBy"].split(",")])
        return writer

    def start(self, writer: DataStreamWriter) -> StreamingQuery:
        return writer.toTable(self.table)

    def describe(self, ctx: SinkContext | None = None) -> str:
        return f"Spark table {self.table} (toTable; exactly-once as its format writes it)"

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        return spark.table(self.table) if spark.catalog.tableExists(self.table) else None

    def location(self, ctx: SinkContext) -> str | None:
        return f"table:{self.table}"

    def preview(
        self, ctx: SinkContext, *, limit: int = 50, order_by: str | None = None
    ) -> dict[str, Any] | None:
        return None
