"""The sink extension points, in two tiers.

- `Sink`: configures a DataStreamWriter (format, path, options). Spark's own sinks (console,
  memory, files) are this small.
- `BatchSink`: owns the `foreachBatch` plumbing: the stable query id, batch ids, conversion of
  timestamps to ISO-8601 UTC text, fault-injection points for crash tests, and retries. A
  subclass writes one batch.
- `DatabaseSink` (sinks/database.py): a BatchSink for transactional databases.

To add a sink: write one module in this folder with a subclass of one of them that declares its
`kind` (the scheme `--sink` takes: `KIND[:TARGET]`), its `target_grammar` and `usage`, and the
capabilities below that differ from the defaults (continuous, real-time, a database with the
batch ledger, files, JDBC driver...). sinks/registry.py finds it (core/registry.py) and tells
core/specs.py its grammar; nothing else to edit: the rest of slipstream asks the class, never
names a kind. A sink defined elsewhere (a test's, a plugin's) is added with
`sinks.registry.register(cls)`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import weakref
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery
from pyspark.sql.types import (
    ArrayType,
    MapType,
    StructField,
    StructType,
    TimestampType,
)

from slipstream.core.specs import OutputMode, SinkKind, SinkSpec
from slipstream.ingest.quarantine import BATCH_SETTING
from slipstream.settings.connect import is_connect
from slipstream.settings.jdbc_drivers import JdbcDriver

log = logging.getLogger("slipstream.sinks")

FAULT_ENV = "SLIPSTREAM_FAULT"  # crash tests set it: slipstream.testing.fault


@dataclass(frozen=True)
class SinkContext:
    """What a sink knows about the query it serves."""

    pipeline: str
    query_name: str
    table: str
    key: tuple[str, ...]
    mode: OutputMode
    checkpoint: Path


@dataclass(frozen=True)
class BatchInfo:
    query_id: str  # stable across restarts of one checkpoint (Spark's query id)
    batch_id: int
    ctx: SinkContext


class Sink(ABC):
    spec: SinkSpec
    #: the scheme `--sink` takes (`KIND[:TARGET]`); a class without its own is not registered
    kind: ClassVar[str]
    #: what follows the scheme: nothing, an optional or a required path, a URL, module:attr
    target_grammar: ClassVar[Literal["none", "optional", "required", "url", "module"]] = "none"
    usage: ClassVar[str] = ""  # how `--help` shows the spec (default: the kind)
    #: it writes files into the folder its target names (append mode only, a folder each)
    file: ClassVar[bool] = False
    #: its target is a path on this machine (made absolute for a Spark Connect server)
    local_path: ClassVar[bool] = False
    #: why a Spark Connect client cannot write it, and the fix; None when it can
    connect_refusal: ClassVar[tuple[str, str] | None] = None
    #: Spark's continuous trigger can write it (Spark: console, memory, kafka, foreach)
    continuous: ClassVar[bool] = False
    #: Spark's real-time mode can write it (Spark's allow-list, and slipstream's database
    #: sinks through a ForeachWriter: analysis/realtime.py)
    real_time: ClassVar[bool] = False
    #: how real-time mode writes it (`check` shows it); None: Spark's own sink of this kind
    real_time_writer: ClassVar[str | None] = None
    #: a database table with slipstream's batch ledger: upserts on the output's key in update
    #: and complete modes, a table name checked before start (sinks/database.py)
    database: ClassVar[bool] = False
    #: the JDBC driver of its real-time JVM writer (sinks/jvm_rows.py); None: no JVM writer
    jdbc: ClassVar[JdbcDriver | None] = None
    #: a session writing it needs Spark's Kafka connector (settings/kafka_connector.py)
    needs_kafka_connector: ClassVar[bool] = False
    #: a session writing it needs Delta Lake's jar and SQL extension (settings/delta_package.py)
    delta: ClassVar[bool] = False
    #: the options its spec takes after `?` (`KIND[:TARGET]?NAME=VALUE&...`), Spark's own names
    #: for its writer; a name not here is refused when the spec is parsed (CONFIG_BAD_VALUE)
    writer_options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, spec: SinkSpec) -> None:
        self.spec = spec

    @classmethod
    def grammar(cls) -> SinkKind:
        """What core/specs.py and settings/ need to know of this kind (they cannot import it)."""
        return SinkKind(
            cls.target_grammar,
            cls.usage or cls.kind,
            cls.file,
            cls.local_path,
            cls.connect_refusal,
            cls.writer_options,
        )

    @classmethod
    def real_time_how(cls) -> str:
        """How real-time mode writes this sink, for `check`."""
        return cls.real_time_writer or f"Spark's {cls.kind} sink"

    @classmethod
    def from_spec(cls, spec: SinkSpec, default_database: Path) -> Sink:
        """The sink for `spec`; `default_database` is where a database sink without a target
        keeps its file (SQLite under the state dir)."""
        return cls(spec)

    @abstractmethod
    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        """Configure the writer; the runner sets mode, trigger, checkpoint and starts it."""

    def start(self, writer: DataStreamWriter) -> StreamingQuery:
        """Start the configured writer (Spark's `start`; a table sink: `toTable`)."""
        return writer.start()

    def shape(self, frame: DataFrame, ctx: SinkContext) -> DataFrame:
        """The output's rows as this sink writes them (Kafka: key and value columns); the
        runner applies it to the query's frame just before `writeStream`."""
        return frame

    def describe(self, ctx: SinkContext | None = None) -> str:
        return self.spec.describe()

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        """The results written so far, for tests, the terminal view and the dashboard."""
        return None

    def reset(self, ctx: SinkContext) -> list[str]:
        """Delete the outputs (for `slipstream reset --outputs`); return what was removed.
        Sinks that keep data refuse (RESET_NOT_OURS) what `owns` does not claim."""
        return []

    def owns(self, ctx: SinkContext) -> bool:
        """Whether this output's data, if any, carries slipstream's mark (checked for every
        output before `reset` deletes anything)."""
        return True

    def foreign_batches(self, ctx: SinkContext) -> str | None:
        """What this output holds of another query's batches, which a query on
        `ctx.checkpoint` would silently skip or write a second time; None when nothing (a
        sink that keeps no record of batches, a resume, a restart after a crash)."""
        return None

    def location(self, ctx: SinkContext) -> str | None:
        """The output as `--sink` takes it, never with a password (recorded in the checkpoint
        so that `reset --outputs` finds it later); None for sinks that keep nothing."""
        return None

    def preview(
        self, ctx: SinkContext, *, limit: int = 50, order_by: str | None = None
    ) -> dict[str, Any] | None:
        """An output's latest rows for the dashboard, asked of the sink without Spark:
        `{"columns": [...], "rows": [[...], ...], "updated": ISO time or None}`, or None when
        this sink cannot be read back. `order_by` is SQL a pipeline writes (never user input);
        sinks that are not SQL keep their own order."""
        return None


def checkpoint_query_id(checkpoint: Path) -> str:
    """Spark's persistent query id, from the checkpoint's `metadata` file (written at start)."""
    return str(json.loads((checkpoint / "metadata").read_text().splitlines()[0])["id"])


def iso_utc(column: str) -> Column:
    """A timestamp as ISO-8601 UTC text; microseconds only when present. Session TZ is UTC."""
    c = F.col(column)
    whole = F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss'Z'")
    fraction = F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")
    return F.when(F.unix_micros(c) % 1_000_000 == 0, whole).otherwise(fraction)


#: with_iso_timestamps' columns by session, then by (schema, nested_as_json): a batch sink asks
#: for the same ones every batch, and building them is about 20 calls into PySpark's functions
#: (50 ms a batch of trending's output here, on the batch's own path); Columns are expressions,
#: valid for any DataFrame of their session
_ISO_COLUMNS: weakref.WeakKeyDictionary[SparkSession, dict[tuple[str, bool], list[Column]]] = (
    weakref.WeakKeyDictionary()
)


def with_iso_timestamps(df: DataFrame, nested_as_json: bool = False) -> DataFrame:
    """Timestamps as ISO-8601 UTC text; with `nested_as_json`, arrays, maps and structs as
    their JSON text too (what a database column of type TEXT can hold, e.g. a sorted set of
    error codes as `["E01","E17"]`)."""

    def column(f: StructField) -> Column:
        if isinstance(f.dataType, TimestampType):
            return iso_utc(f.name).alias(f.name)
        if nested_as_json and isinstance(f.dataType, ArrayType | MapType | StructType):
            return F.to_json(F.col(f.name)).alias(f.name)
        return F.col(f.name)

    schema = df.schema
    known = _ISO_COLUMNS.setdefault(df.sparkSession, {})
    key = (schema.json(), nested_as_json)
    if key not in known:
        known[key] = [column(f) for f in schema.fields]
    return df.select(*known[key])


def fault_point(point: str, batch_id: int) -> None:
    """Crash tests set SLIPSTREAM_FAULT=point@batch to SIGKILL this process at that point."""
    wanted = os.environ.get(FAULT_ENV)
    if wanted and wanted == f"{point}@{batch_id}":
        os.kill(os.getpid(), signal.SIGKILL)


def local_rows(batch: DataFrame) -> Iterator[Any]:
    """A micro-batch's rows on the driver, one partition at a time (the next one is computed
    while this one is consumed), never the whole batch at once.

    Not `DataFrame.toLocalIterator()`: in Spark 4.3 it starts a short SQL execution that ends
    before its serving thread submits the per-partition jobs. Those jobs then carry an execution
    id that has already been cleaned up, so `DAGScheduler.activeQueryToJobs` keeps them, and
    with them each batch's stages, RDDs and physical plan (the broadcast catalog of a join
    included), for the life of the application: about 2.7 MiB of driver heap per trending batch,
    which filled the default 1 GiB heap in 20 minutes (issue 16; the path from the GC root was
    read from a heap dump). The RDD's iterator runs its jobs under the micro-batch's own
    execution id, which Spark cleans when the batch ends. The rows are the same `Row`s.
    Consume the iterator fully before returning from the batch: a stateful batch commits its
    state stores only when every partition ran.

    Under Spark Connect (the function runs in the server's Python worker, and a Connect
    DataFrame has no RDD) it is `DataFrame.toLocalIterator`, which streams the result's Arrow
    batches from the server; the leak above is one of the JVM's classic `toLocalIterator`."""
    if is_connect(batch):
        return iter(batch.toLocalIterator(prefetchPartitions=True))
    return batch.rdd.toLocalIterator(prefetchPartitions=True)


def drain(batch: DataFrame) -> None:
    """Run a batch's plan without keeping its rows.

    A batch the ledger skips must still be computed: its stateful operators commit their state
    stores while the plan runs, and Spark (4.x) fails the query when a foreachBatch function
    returns without having run every partition ("Missing commits ... (operator=0,
    partition=0)"), which is what a replay after a crash between the sink's commit and Spark's
    would hit."""
    batch.write.format("noop").mode("overwrite").save()


class BatchSink(Sink):
    """A sink written through `foreachBatch`. Subclasses implement `write_batch`."""

    def __init__(self, spec: SinkSpec) -> None:
        super().__init__(spec)
        self._query_ids: dict[Path, str] = {}
        self.skipped_batches = 0  # replays recognised by the ledger, for tests and the summary
        self._written: dict[str, tuple[int, int]] = {}  # query name -> (batch id, rows written)

    def rows_written(self, query: str, batch_id: int) -> int | None:
        """The rows this sink wrote in batch `batch_id` of `query`, by its own count (0 for a
        replay it skipped); None when it has not counted that batch (not the latest, or a sink
        that does not count, or one that ran elsewhere: Spark Connect's server)."""
        batch, rows = self._written.get(query, (-1, 0))
        return rows if batch == batch_id else None

    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        def handle(batch: DataFrame, batch_id: int) -> None:
            self._handle(batch, batch_id, ctx)

        return writer.foreachBatch(handle)

    def _handle(self, batch: DataFrame, batch_id: int, ctx: SinkContext) -> None:
        if ctx.checkpoint not in self._query_ids:
            self._query_ids[ctx.checkpoint] = checkpoint_query_id(ctx.checkpoint)
        info = BatchInfo(self._query_ids[ctx.checkpoint], batch_id, ctx)
        if is_connect(batch):
            # its jobs run off the query's thread: the quarantine's writer reads the batch here
            batch.sparkSession.conf.set(BATCH_SETTING, str(batch_id))
        fault_point("before-write", batch_id)
        self.write_batch(batch, info)
        fault_point("after-write", batch_id)

    @abstractmethod
    def write_batch(self, batch: DataFrame, info: BatchInfo) -> None: ...
