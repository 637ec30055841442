"""Files landing in a directory (json, csv, text lines; parquet typed).

Parquet files are listed with Spark's `binaryFile` format and each is read whole by pyarrow
after it is judged (sources/parquet_files.py): a corrupt file, or one whose columns do not fit
the declared schema, becomes one quarantine record instead of failing the query.

Files must appear atomically (write elsewhere, then rename in): Spark lists the directory each
trigger and reads a file once. Line formats are read as text so that a malformed line can be
quarantined with its raw text instead of being silently turned into NULLs.

A file deleted after Spark listed it and before a batch read it is skipped (Spark's
`ignoreMissingFiles`) instead of failing the query: its records were taken back before they
were read; slipstream says so after the batch (runtime/landed.py).
tests/spark/ingest/test_hostile.py deletes one at that moment. Spark takes "permission denied"
for "deleted": runtime/landed.py checks every file of each batch and stops the run with
FILE_UNREADABLE instead of silence.

A landed file is read whatever its modification time: Spark's `maxFileAge` (default 7 days,
counted back from the newest file it has seen) skips older files after the first batch, so a
`cp -p`, `rsync -a`, `tar x` or `mv` of old files would vanish. MAX_FILE_AGE makes it 1000
years. The cost: the file source's map of seen files (a path and a time per file on the
driver; estimated at 150-200 bytes a file from JVM object sizes, not measured) is never purged,
where 7 days would drop entries a week older than the newest file; Spark's source log
(`sources/0`) holds every file either way. docs/concepts/guarantees.md."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.checkpoint.start import InputStart
from slipstream.core import values
from slipstream.core.files import local_path
from slipstream.core.options import Option
from slipstream.core.words import count
from slipstream.errors import ConfigError
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions
from slipstream.sources.parquet_files import LISTING, parquet_rows

if TYPE_CHECKING:
    from slipstream.checkpoint.old import OldPosition

#: Spark's `maxFileAge` for the files source: files of any age are read (see the docstring)
MAX_FILE_AGE = "365000d"


def skipping(frame: DataFrame, binding: Binding) -> DataFrame:
    """Leave out the files another checkpoint read (`--from-checkpoint`). A filter on
    `_metadata.file_path` only: Spark applies it to the file index of each batch (the plan's
    `DataFilters`; its scan's `numFiles` counts the others only), so a skipped file is listed
    and logged as seen, but not opened."""
    if not binding.skip_files:
        return frame
    return frame.filter(~_path_in(frame.sparkSession, sorted(binding.skip_files)))


def _path_in(spark: SparkSession, paths: list[str]) -> Column:
    """`_metadata.file_path IN (paths)`. In a classic session the list crosses to the JVM as one
    string: PySpark's `isin` makes one py4j call per value (100,000 paths: a 31 s build; this:
    15 s, most of it Spark analysing the filter). Spark Connect builds the plan here, without
    py4j."""
    jvm = getattr(spark, "_jvm", None)
    if jvm is None or not hasattr(spark, "_jsparkSession"):
        return F.col("_metadata.file_path").isin(paths)
    from pyspark.sql.classic.column import Column as ClassicColumn

    listed = jvm.java.util.regex.Pattern.compile("\n").splitAsStream("\n".join(paths)).toList()
    column = jvm.org.apache.spark.sql.functions.col("_metadata.file_path")
    return ClassicColumn(column.isInCollection(listed))


@functools.lru_cache(maxsize=16)
def folder_bytes(folder: str, mtime_ns: int) -> int:
    """The bytes of the files under `folder` that Spark's file source reads (not hidden),
    walked once for the folder as it stands: `mtime_ns` is its own, so a file landed in it or
    gone since is a new key (one in a subfolder is not: the figure only sizes a run's state)."""
    total = 0
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_"))]
        for name in files:
            if not name.startswith((".", "_")):
                with contextlib.suppress(OSError):  # gone meanwhile
                    total += os.stat(os.path.join(root, name)).st_size
    return total


def _under(uri: str, folder: Path) -> bool:
    local = local_path(uri)
    return local is not None and folder in local.resolve().parents


class FilesSource(Source):
    kind = "files"
    reads_files = True
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
            most = int(options["max_files_per_trigger"])
            extra.append(f"max {count(most, 'file')} per batch")
        if options["latest_first"]:
            extra.append("latest first")
        more = f" ({', '.join(extra)})" if extra else ""
        return f"files {binding.path} as {binding.format}{more}"

    def backlog_bytes(self, binding: Binding, options: SourceOptions) -> int | None:
        """The sizes of the files under the folder, as Spark lists them (names starting with
        `.` or `_` are hidden, at any depth)."""
        if binding.path is None or not Path(binding.path).is_dir():
            return None
        folder = str(Path(binding.path).resolve())
        return folder_bytes(folder, os.stat(folder).st_mtime_ns)

    def start_from_old(self, binding: Binding, old: OldPosition) -> InputStart | None:
        """Every file OLD's committed batches read in this input's folder: skipped."""
        if binding.path is None:
            return None
        folder = Path(binding.path).resolve()
        mine = sorted(f for f in old.files if _under(f, folder))
        return InputStart(binding.name, self.kind, tuple(mine))

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        fmt, schema = binding.format, binding.schema
        reader = spark.readStream.option("ignoreMissingFiles", "true")
        reader = reader.option("maxFileAge", MAX_FILE_AGE)  # never skip an old file
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
            listing = skipping(reader.format("binaryFile").schema(LISTING).load(path), binding)
            return RawInput(parquet_rows(listing, schema, binding.required), "parquet", True)
        frame = skipping(reader.format("text").load(path), binding)
        frame = frame.select(F.col("value"), F.col("_metadata.file_path").alias(SOURCE))
        return RawInput(frame, fmt, True)
