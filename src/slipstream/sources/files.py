"""Files landing in a directory (json, csv, text lines; parquet typed).

Parquet files are listed with Spark's `binaryFile` format and each is read whole by pyarrow
after it is judged (sources/parquet_files.py): a corrupt file, or one whose columns do not fit
the declared schema, becomes one quarantine record instead of failing the query.

Files must appear atomically (write elsewhere, then rename in): Spark lists the directory each
trigger and reads a file once. Line formats are read as text so that a malformed line can be
quarantined with its raw text instead of being silently turned into NULLs.

A file deleted after Spark listed it and before a batch read it is skipped (Spark's
`ignoreMissingFiles`, with a warning in Spark's log naming it) instead of failing the query: its
records were taken back before they were read. tests/test_hostile.py deletes one at that moment."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.core import values
from slipstream.core.options import Option
from slipstream.errors import ConfigError
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions
from slipstream.sources.parquet_files import LISTING, parquet_rows


class FilesSource(Source):
    kind = "files"
    options = (
        Option(
            "max_files_per_trigger",
            values.positive_int,
            "cap on new files per micro-batch (files source)",
            f"an integer from 1 to {values.MAX_COUNT:,}",
            metavar="N",
        ),
        Option(
            "latest_first",
            values.boolean,
            "process the newest files first (files source)",
            "true or false",
            default=False,
            kind="bool",
        ),
    )

    def validate(self, binding: Binding, options: SourceOptions, conf: Mapping[str, str]) -> None:
        binding.existing(
            "a directory for the files source (the folder new files land in)", "DIR", directory=True
        )

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        extra = []
        if options["max_files_per_trigger"]:
            extra.append(f"max {options['max_files_per_trigger']} files per batch")
        if options["latest_first"]:
            extra.append("latest first")
        more = f" ({', '.join(extra)})" if extra else ""
        return f"files {binding.path} as {binding.format}{more}"

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        fmt, schema = binding.format, binding.schema
        reader = spark.readStream.option("ignoreMissingFiles", "true")
        if options["max_files_per_trigger"]:
            reader = reader.option("maxFilesPerTrigger", options["max_files_per_trigger"])
        if options["latest_first"]:
            reader = reader.option("latestFirst", "true")
        path = str(binding.path)
        frame: DataFrame
        if fmt == "parquet":
            if schema is None:
                raise ConfigError(
                    "CONFIG_BAD_VALUE",
                    "parquet input needs a declared schema",
                    "declare the pipeline's input schema",
                )
            listing = reader.format("binaryFile").schema(LISTING).load(path)
            return RawInput(parquet_rows(listing, schema, binding.required), "parquet", True)
        frame = reader.format("text").load(path)
        frame = frame.select(F.col("value"), F.col("_metadata.file_path").alias(SOURCE))
        return RawInput(frame, fmt, True)
