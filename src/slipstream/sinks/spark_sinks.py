"""Spark's own sinks: console, memory, noop and the exactly-once file sinks (parquet, json, csv).

File sinks are exactly-once through the `_spark_metadata` log Spark keeps beside the files: a
reader of the directory (Spark's batch reader) sees only files of committed batches. They take
append mode only (validated before start)."""

from __future__ import annotations

import shutil
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter

from slipstream.sinks.base import Sink, SinkContext


class ConsoleSink(Sink):
    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        return writer.format("console").option("truncate", "false").option("numRows", 50)

    def describe(self, ctx: SinkContext | None = None) -> str:
        return "console (for watching; not exactly-once)"


class NoopSink(Sink):
    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        return writer.format("noop")

    def describe(self, ctx: SinkContext | None = None) -> str:
        return "noop (discards rows; for benchmarks)"


class MemorySink(Sink):
    """An in-memory table named after the output; for tests and notebooks. It cannot recover
    from a checkpoint in update or append mode (Spark's limitation)."""

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        return writer.format("memory").queryName(ctx.table)

    def describe(self, ctx: SinkContext | None = None) -> str:
        name = ctx.table if ctx else "the output"
        return f"memory table {name} (tests and notebooks; does not survive restarts)"

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        return spark.table(ctx.table)


class FileSink(Sink):
    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        writer = writer.format(self.spec.kind).option("path", str(self.directory))
        if self.spec.kind == "csv":
            writer = writer.option("header", "true")
        return writer

    @property
    def directory(self) -> Path:
        return self.spec.path()

    def describe(self, ctx: SinkContext | None = None) -> str:
        return f"{self.spec.kind} files in {self.directory} (exactly-once: _spark_metadata log)"

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        if not (self.directory / "_spark_metadata").exists():
            return None
        reader = spark.read.format(self.spec.kind)
        if self.spec.kind == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        return reader.load(str(self.directory))

    def reset(self, ctx: SinkContext) -> list[str]:
        if self.directory.exists():
            shutil.rmtree(self.directory)
            return [str(self.directory)]
        return []
