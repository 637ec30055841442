"""An input's quarantine folder, as a sink: what is in it, whose it is, and reading it back.

Three writers may have put records there, each exactly-once in its own way:

- the first output whose query reads the input (ingest/quarantine.py): each task's file is
  renamed in as `batch-B.APP.part-P.json` when the task succeeds; a batch run again after a
  crash (not committed, so its offsets are read again) writes the same records under its new
  application APP. Committed: the batches at or below the last commit of the checkpoint the
  folder's mark names (`.slipstream-output`, as on an output folder), and of each batch the
  files of the application that wrote it last;
- the ingest stage's query (runtime/ingest_stage.py): `batch-N.json`, renamed in whole, once;
- an older version's quarantine query, through Spark's file sink (its `_spark_metadata` log,
  against that query's checkpoint `quarantine.INPUT`).

A folder whose batches no checkpoint of this run planned is refused before any query starts,
as an output folder is (runtime/ownership.py)."""

from __future__ import annotations

import re
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from slipstream.checkpoint.lifecycle import last_committed_batch, last_planned_batch
from slipstream.ingest.quarantine import LAYOUT
from slipstream.sinks.base import SinkContext
from slipstream.sinks.spark_sinks import JsonSink, committed_files, mark_names

#: a task's file: batch B, application APP, partition P
_TASK_FILE = re.compile(r"batch-(\d+)\.(.+)\.part-\d+\.json")
_SCHEMA = ", ".join(f"{c} {t}" for c, t in LAYOUT.items())


class QuarantineFolder(JsonSink):
    """An input's quarantine folder of JSON records (no `kind` of its own: bound by
    runtime/bind.py for each input that parses, never given to `--sink`)."""

    def describe(self, ctx: SinkContext | None = None) -> str:
        return f"quarantine folder {self.directory} (exactly-once: the commit log of its writer)"

    def foreign_batches(self, ctx: SinkContext) -> str | None:
        """Beside the file sink's log and the ingest stage's files (the file sink's check,
        against `ctx.checkpoint`), the task files: foreign unless the folder's mark names a
        checkpoint of this run's root that planned them."""
        held = super().foreign_batches(ctx)
        if held is not None:
            return held
        batches = [b for b, _ in task_files(self.directory)]
        if not batches:
            return None
        root = Path(ctx.checkpoint).resolve().parent
        writer = next((c for c in mark_names(self.directory) if c.parent == root), None)
        planned = last_planned_batch(writer) if writer is not None else None
        if planned is not None and max(batches) <= planned:
            return None
        ran = "no checkpoint of this run wrote them" if writer is None else f"{writer} planned"
        ran += "" if writer is None else (" no batch" if planned is None else f" up to {planned}")
        return f"batches up to {max(batches)} as the quarantine's task files, and {ran}"

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        files = quarantine_files(self.directory)
        return read_files(spark, files) if files else None


def task_files(directory: Path) -> list[tuple[int, Path]]:
    """The files the owner query's tasks renamed in, by batch."""
    found = [(_TASK_FILE.fullmatch(p.name), p) for p in Path(directory).glob("batch-*.json")]
    return sorted((int(m[1]), p) for m, p in found if m is not None)


def quarantine_files(directory: Path) -> list[Path]:
    """Every committed file of the folder: the file sink's or the ingest stage's
    (`spark_sinks.committed_files`), then the task files of the committed batches, of each
    batch the last application's. A folder whose writer's checkpoint is gone (reset without
    its outputs: the folder is refused to a new checkpoint until it is reset too) shows every
    batch it holds."""
    directory = Path(directory)
    if not directory.is_dir():
        return []
    files = committed_files(directory)
    tasks = task_files(directory)
    if not tasks:
        return files
    writers = [c for c in mark_names(directory) if c.is_dir()]
    last = last_committed_batch(writers[0]) if writers else tasks[-1][0]
    for batch, paths in sorted(last_runs(tasks).items()):
        if last is not None and batch <= last:
            files.extend(paths)
    return files


def last_runs(tasks: list[tuple[int, Path]]) -> dict[int, list[Path]]:
    """Of each batch's task files (`task_files`), those of the application that wrote it
    last (a batch run again after a crash writes the same records under its new one)."""
    runs: dict[int, dict[str, list[Path]]] = {}
    for batch, path in tasks:
        app = _TASK_FILE.fullmatch(path.name)[2]  # type: ignore[index]
        runs.setdefault(batch, {}).setdefault(app, []).append(path)
    return {
        batch: sorted(max(apps.values(), key=lambda ps: max(p.stat().st_mtime for p in ps)))
        for batch, apps in runs.items()
    }


def read_files(spark: SparkSession, files: list[Path]) -> DataFrame:
    """Quarantine records from JSON files. A raw record may be longer than the 20 million
    characters Spark's JSON reader takes by default."""
    reader = spark.read.schema(_SCHEMA).option("maxStringLen", str(2**31 - 1))
    return reader.json([str(f) for f in files])


def read_quarantine(spark: SparkSession, directory: Path) -> DataFrame:
    """The quarantined records written so far (committed batches only), from JSON files or,
    for `--quarantine delta:DIR`, a Delta table (a session with Delta: its versions are its
    commits)."""
    directory = Path(directory)
    if (directory / "_delta_log").is_dir():
        return spark.read.format("delta").load(str(directory)).select(*LAYOUT)
    files = quarantine_files(directory)
    return read_files(spark, files) if files else spark.createDataFrame([], _SCHEMA)
