"""Spark's own sinks: console, memory, noop and the exactly-once file sinks (parquet, json, csv).

File sinks are exactly-once through the `_spark_metadata` log Spark keeps beside the files: a
reader of the directory (Spark's batch reader) sees only files of committed batches. They take
append mode only (validated before start)."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import DataStreamWriter

from slipstream.checkpoint.lifecycle import last_planned_batch, not_ours
from slipstream.core.specs import SinkSpec
from slipstream.errors import ConfigError
from slipstream.sinks.base import Sink, SinkContext


class ConsoleSink(Sink):
    kind = "console"
    continuous = True
    real_time = True
    connect_refusal = (
        "the console sink prints on the server's standard output, not here",
        "use --sink sqlite or memory, or run without --remote to see the rows here",
    )

    writer_options = ("numRows", "truncate")

    def __init__(self, spec: SinkSpec) -> None:
        super().__init__(spec)
        rows, truncate = spec.option_map.get("numRows", "50"), spec.option_map.get("truncate")
        if not rows.isdigit() or int(rows) < 1:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"console sink option numRows={rows} is not a positive whole number",
                "give console?numRows=N with N >= 1",
            )
        if truncate is not None and truncate.lower() not in ("true", "false"):
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"console sink option truncate={truncate} is not true or false",
                "give console?truncate=true or console?truncate=false",
            )

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        options = {"truncate": "false", "numRows": "50", **self.spec.option_map}
        return writer.format("console").options(**options)

    def describe(self, ctx: SinkContext | None = None) -> str:
        return "console (for watching; not exactly-once)"


class NoopSink(Sink):
    kind = "noop"

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        return writer.format("noop")

    def describe(self, ctx: SinkContext | None = None) -> str:
        return "noop (discards rows; for benchmarks)"


class MemorySink(Sink):
    """An in-memory table named after the output; for tests and notebooks. It cannot recover
    from a checkpoint in update or append mode (Spark's limitation)."""

    kind = "memory"
    continuous = True

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        return writer.format("memory").queryName(ctx.table)

    def describe(self, ctx: SinkContext | None = None) -> str:
        name = ctx.table if ctx else "the output"
        return f"memory table {name} (tests and notebooks; does not survive restarts)"

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        return spark.table(ctx.table)


#: the mark slipstream leaves in a file sink's folder (hidden: Spark's readers skip it), so
#: that `reset --outputs` deletes only folders slipstream wrote. It names the query checkpoint
#: that writes the folder (absolute, and relative to the folder: a state dir copied or moved
#: whole keeps the pair), so that a reset deletes only its own checkpoint's outputs; a mark of
#: an older version is empty and names none.
OUTPUT_MARK = ".slipstream-output"


def partition_columns(spec: SinkSpec) -> list[str]:
    """The columns a file or table sink's `partitionBy` option names."""
    text = spec.option_map.get("partitionBy", "")
    return [c.strip() for c in text.split(",") if c.strip()]


def refuse_unknown_partitions(spec: SinkSpec, frame: DataFrame, ctx: SinkContext) -> None:
    """`partitionBy` naming a column the output does not have, refused before start."""
    missing = [c for c in partition_columns(spec) if c not in frame.columns]
    if missing:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{spec.kind} sink option partitionBy names {', '.join(missing)}, not "
            f"columns of output {ctx.table} ({', '.join(frame.columns)})",
            "give partitionBy=COLUMN[,COLUMN...] of the output's columns",
        )


def write_mark(folder: Path, checkpoint: Path) -> None:
    """Mark `folder` as the output of the query checkpoint `checkpoint`."""
    folder.mkdir(parents=True, exist_ok=True)
    target = Path(checkpoint).resolve()
    named = {"checkpoint": str(target), "relative": os.path.relpath(target, folder.resolve())}
    temporary = folder / f"{OUTPUT_MARK}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(named))
    os.replace(temporary, folder / OUTPUT_MARK)


def mark_names(folder: Path) -> list[Path]:
    """The query checkpoint `folder`'s mark names, resolved as the folder lies now (the
    relative one first); empty for no mark, or an empty one (older versions)."""
    try:
        named = json.loads((Path(folder) / OUTPUT_MARK).read_text() or "{}")
    except (OSError, ValueError):
        return []
    if not isinstance(named, dict):
        return []
    found = []
    if isinstance(named.get("relative"), str):
        found.append((Path(folder).resolve() / named["relative"]).resolve())
    if isinstance(named.get("checkpoint"), str):
        found.append(Path(named["checkpoint"]))
    return found


#: options of every file sink: `partitionBy` (comma-separated columns of the output: one
#: folder level each, `COLUMN=VALUE`) and Spark's file writer's own
FILE_OPTIONS: tuple[str, ...] = ("partitionBy", "compression", "maxRecordsPerFile")
#: options that shape the folder's layout, not its files' contents (not given to a reader)
LAYOUT_OPTIONS = frozenset({"partitionBy", "compression", "maxRecordsPerFile"})


class FileSink(Sink):
    """Spark's file sink in one format (the kind: parquet, orc, json, csv), into a folder.

    Options (`parquet:DIR?compression=zstd&partitionBy=action`) are Spark's names for its
    writer of that format; `partitionBy` names columns of the output, checked before the query
    starts."""

    target_grammar = "required"
    file = True
    local_path = True
    writer_options: ClassVar[tuple[str, ...]] = FILE_OPTIONS

    @property
    def partition_columns(self) -> list[str]:
        return partition_columns(self.spec)

    def shape(self, frame: DataFrame, ctx: SinkContext) -> DataFrame:
        refuse_unknown_partitions(self.spec, frame, ctx)
        return frame

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        if "://" not in str(self.spec.target):  # a local folder: mark it before Spark writes
            write_mark(self.directory, ctx.checkpoint)
        writer = writer.format(self.spec.kind).option("path", str(self.directory))
        if self.spec.kind == "csv":
            writer = writer.option("header", "true")
        options = {k: v for k, v in self.spec.options if k != "partitionBy"}
        if options:
            writer = writer.options(**options)
        if self.partition_columns:
            writer = writer.partitionBy(*self.partition_columns)
        return writer

    @property
    def directory(self) -> Path:
        return self.spec.path()

    def describe(self, ctx: SinkContext | None = None) -> str:
        return f"{self.spec.kind} files in {self.directory} (exactly-once: _spark_metadata log)"

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        reader = spark.read.format(self.spec.kind)
        if self.spec.kind == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        contents = {k: v for k, v in self.spec.options if k not in LAYOUT_OPTIONS}
        if contents:
            reader = reader.options(**contents)
        if (self.directory / "_spark_metadata").exists():
            return reader.load(str(self.directory))
        staged = committed_files(self.directory)  # a quarantine the ingest stage wrote
        return reader.load([str(f) for f in staged]) if staged else None

    def preview(
        self, ctx: SinkContext, *, limit: int = 50, order_by: str | None = None
    ) -> dict[str, Any] | None:
        """The rows of the newest committed files (newest first), read with pyarrow: only the
        files Spark's `_spark_metadata` log lists, never a half-written one. `order_by` (SQL)
        does not apply to files."""
        files = committed_files(self.directory)
        view: dict[str, Any] = {"columns": [], "rows": [], "updated": None}
        rows: list[list[Any]] = []
        for path in reversed(files):
            if len(rows) >= limit:
                break
            if not path.exists():  # compacted away or reset meanwhile
                continue
            table = _read_arrow(self.spec.kind, path)
            view["columns"] = view["columns"] or table.column_names
            rows += [list(r.values()) for r in reversed(table.to_pylist())]
            if view["updated"] is None:
                view["updated"] = _iso_mtime(path)
        view["rows"] = [[_plain(v) for v in row] for row in rows[:limit]]
        return view

    def reset(self, ctx: SinkContext) -> list[str]:
        """Delete the folder, if slipstream's mark is in it (an empty folder goes too)."""

        folder = self.directory
        if not folder.exists():
            return []
        if not self.owns(ctx):
            raise not_ours(folder, f"output folder of {ctx.query_name}")
        shutil.rmtree(folder)
        return [str(folder)]

    def location(self, ctx: SinkContext) -> str | None:
        return f"{self.spec.kind}:{self.directory.resolve()}"

    def foreign_batches(self, ctx: SinkContext) -> str | None:
        """Batches in the `_spark_metadata` log that this checkpoint never planned: Spark's
        file sink skips every batch id at or below the highest in its log, so a new query
        (batch ids from 0) would lose its first batches without a word. A resume, or a restart
        after a crash between the sink's commit and the checkpoint's, has planned them."""

        logged = last_sink_batch(self.directory)
        # a quarantine the ingest stage writes: its `batch-N.json` files, each skipped by a
        # replay that finds it (runtime/ingest_stage.py), so the same silent skip
        staged = max((n for n, _ in _staged_files(self.directory)), default=None)
        held = max((b for b in (logged, staged) if b is not None), default=None)
        if held is None:
            return None
        planned = last_planned_batch(ctx.checkpoint)
        if planned is not None and held <= planned:
            return None
        ran = "has planned no batch" if planned is None else f"planned batches up to {planned}"
        where = "in its _spark_metadata log" if held == logged else "as batch-N.json files"
        return (
            f"batches up to {held} {where} while checkpoint {ctx.checkpoint} {ran}: the new "
            f"batches up to {held} would be skipped without a word"
        )

    def owns(self, ctx: SinkContext) -> bool:
        folder = self.directory
        if not folder.exists():
            return True
        return folder.is_dir() and (not any(folder.iterdir()) or (folder / OUTPUT_MARK).is_file())


def last_sink_batch(directory: Path) -> int | None:
    """The highest batch id in a file sink's `_spark_metadata` log (`N`, `N.compact`)."""
    log = directory / "_spark_metadata"
    if not log.is_dir():
        return None
    ids = [int(p.name.split(".")[0]) for p in log.iterdir() if p.name.split(".")[0].isdigit()]
    return max(ids, default=None)


def _staged_files(directory: Path) -> list[tuple[int, Path]]:
    """The ingest stage's quarantine files in `directory`, oldest first: (N, `batch-N.json`)."""
    found = [(p.stem.split("-", 1)[1], p) for p in Path(directory).glob("batch-*.json")]
    return sorted((int(n), p) for n, p in found if n.isdigit())


def committed_files(directory: Path) -> list[Path]:
    """The data files Spark's file sink committed to `directory`, oldest batch first, from its
    `_spark_metadata` log (`N` and `N.compact` files: a `v1` line, then one JSON entry a file).
    A quarantine the ingest stage writes (runtime/ingest_stage.py) has no such log: each of its
    `batch-N.json` files is renamed in whole, so every one there is committed."""
    log = directory / "_spark_metadata"
    if not log.is_dir():
        return [p for _, p in _staged_files(directory)]
    batches = sorted(
        (int(p.name.split(".")[0]), p)
        for p in log.iterdir()
        if p.name.split(".")[0].isdigit() and not p.name.startswith(".")
    )
    start = max((i for i, (_, p) in enumerate(batches) if p.name.endswith(".compact")), default=0)
    files: dict[str, Path] = {}
    for _, entry_file in batches[start:]:
        for line in entry_file.read_text().splitlines()[1:]:
            entry = json.loads(line)
            path = Path(urlparse(entry["path"]).path)
            if entry.get("action", "add") == "delete":
                files.pop(str(path), None)
            else:
                files[str(path)] = path
    return list(files.values())


def _read_arrow(kind: str, path: Path) -> Any:
    if kind == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path)
    if kind == "orc":
        import pyarrow.orc as po

        return po.read_table(path)
    if kind == "json":
        import pyarrow.json as pj

        return pj.read_json(path)
    import pyarrow.csv as pc

    return pc.read_csv(path)


def _plain(value: Any) -> Any:
    """JSON-friendly: timestamps as ISO-8601 UTC text."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return value


def _iso_mtime(path: Path) -> str:
    moment = datetime.fromtimestamp(path.stat().st_mtime, UTC).replace(microsecond=0)
    return moment.isoformat().replace("+00:00", "Z")


class ParquetSink(FileSink):
    kind = "parquet"
    usage = "parquet:DIR"


class OrcSink(FileSink):
    kind = "orc"
    usage = "orc:DIR"


class JsonSink(FileSink):
    kind = "json"
    usage = "json:DIR"
    writer_options = (
        *FILE_OPTIONS, "dateFormat", "timestampFormat", "timeZone", "ignoreNullFields",
        "encoding", "lineSep",
    )  # fmt: skip


class CsvSink(FileSink):
    kind = "csv"
    usage = "csv:DIR"
    writer_options = (
        *FILE_OPTIONS, "header", "sep", "quote", "escape", "escapeQuotes", "quoteAll",
        "nullValue", "emptyValue", "dateFormat", "timestampFormat", "timeZone", "encoding",
        "lineSep",
    )  # fmt: skip
