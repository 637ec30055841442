"""Files landing in a directory (json, csv, text lines; parquet typed).

Files must appear atomically (write elsewhere, then rename in): Spark lists the directory each
trigger and reads a file once. Line formats are read as text so that a malformed line can be
quarantined with its raw text instead of being silently turned into NULLs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from slipstream.errors import ConfigError
from slipstream.quality.parse import SOURCE
from slipstream.sources.base import RawInput, Source, register

if TYPE_CHECKING:
    from slipstream.config import Settings


@register
class FilesSource(Source):
    kind = "files"

    def validate(self, settings: Settings) -> None:
        if settings.input is None:
            raise ConfigError(
                "CONFIG_MISSING",
                "the files source needs an input directory",
                "pass --input DIR (the folder new files land in)",
            )
        if not settings.input.is_dir():
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--input {settings.input} is not a directory",
                "create the landing directory first, or fix the path given to --input",
            )

    def describe(self, settings: Settings) -> str:
        extra = []
        if settings.max_files_per_trigger:
            extra.append(f"max {settings.max_files_per_trigger} files per batch")
        if settings.latest_first:
            extra.append("latest first")
        more = f" ({', '.join(extra)})" if extra else ""
        return f"files {settings.input} as {settings.format}{more}"

    def read(
        self, spark: SparkSession, settings: Settings, fmt: str, schema: StructType | None
    ) -> RawInput:
        reader = spark.readStream
        if settings.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", settings.max_files_per_trigger)
        if settings.latest_first:
            reader = reader.option("latestFirst", "true")
        path = str(settings.input)
        frame: DataFrame
        if fmt == "parquet":
            if schema is None:
                raise ConfigError(
                    "CONFIG_BAD_VALUE",
                    "parquet input needs a declared schema",
                    "declare the pipeline's input schema",
                )
            frame = reader.schema(schema).parquet(path)
            frame = frame.withColumn(SOURCE, F.col("_metadata.file_path"))
            return RawInput(frame, "typed", True)
        frame = reader.format("text").load(path)
        frame = frame.select(F.col("value"), F.col("_metadata.file_path").alias(SOURCE))
        return RawInput(frame, fmt, True)
