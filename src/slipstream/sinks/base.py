"""The sink extension points, in two tiers.

- `Sink`: configures a DataStreamWriter (format, path, options). Spark's own sinks (console,
  memory, files) are this small.
- `BatchSink`: owns the `foreachBatch` plumbing: the stable query id, batch ids, conversion of
  timestamps to ISO-8601 UTC text, fault-injection points for crash tests, and retries. A
  subclass writes one batch.
- `DatabaseSink`: a BatchSink for transactional databases. Exactly-once comes from one rule:
  a batch's rows and a ledger row `(query_id, batch_id)` commit in one transaction, and a batch
  whose ledger row exists is skipped. Spark replays a batch after a crash with the same batch id
  and the same offsets (its offset log is written before the batch runs), so skipping it is safe.
  A new database sink implements `connect`, `ensure_schema`, `write_rows` and the two ledger
  statements; see `sqlite.py`.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegralType,
    MapType,
    StructField,
    StructType,
    TimestampType,
)

from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.checkpoint.logs import query_id
from slipstream.core.specs import OutputMode, SinkSpec
from slipstream.core.words import count
from slipstream.errors import SlipstreamError
from slipstream.settings.connect import is_connect

log = logging.getLogger("slipstream.sinks")

LEDGER_TABLE = "_slipstream_batches"
FAULT_ENV = "SLIPSTREAM_FAULT"  # testing hook, see slipstream.testing.fault


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

    def __init__(self, spec: SinkSpec) -> None:
        self.spec = spec

    @classmethod
    def from_spec(cls, spec: SinkSpec, default_database: Path) -> Sink:
        """The sink for `spec`; `default_database` is where a database sink without a target
        keeps its file (SQLite under the state dir)."""
        return cls(spec)

    @abstractmethod
    def attach(self, writer: DataStreamWriter, ctx: SinkContext) -> DataStreamWriter:
        """Configure the writer; the runner sets mode, trigger, checkpoint and starts it."""

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


def iso_utc(column: str) -> Any:
    """A timestamp as ISO-8601 UTC text; microseconds only when present. Session TZ is UTC."""
    c = F.col(column)
    whole = F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss'Z'")
    fraction = F.date_format(c, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'")
    return F.when(F.unix_micros(c) % 1_000_000 == 0, whole).otherwise(fraction)


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

    return df.select(*[column(f) for f in df.schema.fields])


def _fault(point: str, batch_id: int) -> None:
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
    return batch.rdd.toLocalIterator(prefetchPartitions=True)  # type: ignore[no-any-return]


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
        _fault("before-write", batch_id)
        self.write_batch(batch, info)
        _fault("after-write", batch_id)

    @abstractmethod
    def write_batch(self, batch: DataFrame, info: BatchInfo) -> None: ...


class DatabaseSink(BatchSink):
    """A transactional database, exactly-once through a ledger `(query id, batch id)` committed
    in the same transaction as the batch's rows. The protocol is written once, here:

    1. `ensure_schema`: the output table (keyed when rows are upserted) and the ledger;
    2. in a transaction: a batch already in the ledger is a replay (a restart after the sink
       committed and before Spark did) and is skipped; otherwise `clear_stage` removes what an
       earlier attempt left;
    3. `staged`: whatever must happen outside the transaction, around it (PostgreSQL COPYs a
       large batch into a staging table from the executors);
    4. in one transaction: the ledger is checked again (another writer may have won), `merge`
       puts the rows into the table, the ledger row is recorded, and both commit.

    A database implements the hooks; `errors` turns its driver's exceptions into ours."""

    placeholder: ClassVar[str] = "?"

    @abstractmethod
    def connect(self) -> Any: ...

    @abstractmethod
    def ensure_schema(self, conn: Any, table: str, schema: StructType, ctx: SinkContext) -> None:
        """Create the output table (with the key when rows are upserted) and the ledger."""

    @abstractmethod
    def merge(self, conn: Any, info: BatchInfo, staged: Any) -> int:
        """Inside the batch's transaction: insert (append) or upsert (update/complete) the
        staged rows into the table; return how many."""

    def clear_stage(self, conn: Any, info: BatchInfo) -> None:
        """Inside a transaction, before staging: drop leftovers of earlier attempts."""

    @contextmanager
    def staged(self, batch: DataFrame, info: BatchInfo) -> Iterator[Any]:
        """Around the merge transaction: stage the batch; yield what `merge` takes. Default:
        the batch itself, timestamps as ISO-8601 UTC text, read when merged."""
        yield with_iso_timestamps(batch, nested_as_json=True)

    def errors(self, info: BatchInfo) -> AbstractContextManager[Any]:
        """Around the whole batch: the database driver's errors as SlipstreamErrors."""
        return nullcontext()

    @contextmanager
    def transaction(self, conn: Any) -> Iterator[Any]:
        try:
            yield conn
            conn.commit()
        except BaseException:
            conn.rollback()
            raise

    def ledger_exists(self, conn: Any) -> bool:
        """Whether the database has slipstream's ledger table."""
        raise NotImplementedError

    # real-time mode: rows upserted one at a time by a ForeachWriter (sinks/rows.py)
    def row_frame(self, frame: DataFrame) -> DataFrame:
        """The rows as this database binds them (timestamps as ISO-8601 UTC text, ...)."""
        return with_iso_timestamps(frame, nested_as_json=True)

    def row_connection(self) -> Any:
        """A picklable function that opens a connection on an executor."""
        raise NotImplementedError

    def foreign_batches(self, ctx: SinkContext) -> str | None:
        """Ledger rows of another query id for this table, while this checkpoint has
        committed no batch (new, or reset without its outputs): the new query's batch ids
        start at 0 under a new id, so the ledger would let every re-read row in again."""

        if last_committed_batch(ctx.checkpoint) is not None:
            return None  # a resume: this query's own rows
        mine = query_id(ctx.checkpoint) or ""
        p = self.placeholder
        with closing(self.connect()) as conn:
            if not self.ledger_exists(conn):
                return None
            cur = conn.cursor()
            cur.execute(
                f"SELECT count(DISTINCT query_id), count(*) FROM {LEDGER_TABLE} "
                f"WHERE target_table = {p} AND query_id <> {p}",
                (ctx.table, mine),
            )
            queries, batches = cur.fetchone() or (0, 0)
        if not batches:
            return None
        return (
            f"{count(batches, 'batch')} of {count(queries, 'other query', 'other queries')} in its "
            "ledger; a new query would write every row it reads again (duplicates in append "
            "mode, older values in update mode)"
        )

    def ledger_queries(self, ctx: SinkContext) -> set[str]:
        """The query ids the ledger lists batches of for this output's table (a reset checks
        that its own checkpoint's is among them)."""
        with closing(self.connect()) as conn:
            if not self.ledger_exists(conn):
                return set()
            cur = conn.cursor()
            cur.execute(
                f"SELECT DISTINCT query_id FROM {LEDGER_TABLE} WHERE target_table = "
                f"{self.placeholder}",
                (ctx.table,),
            )
            return {str(row[0]) for row in cur.fetchall()}

    def committed(self, conn: Any, info: BatchInfo) -> bool:
        cur = conn.cursor()
        p = self.placeholder
        cur.execute(
            f"SELECT 1 FROM {LEDGER_TABLE} WHERE query_id = {p} AND batch_id = {p}",
            (info.query_id, info.batch_id),
        )
        return cur.fetchone() is not None

    def record(self, conn: Any, info: BatchInfo, rows: int) -> None:
        p = self.placeholder
        conn.cursor().execute(
            f"INSERT INTO {LEDGER_TABLE} (query_id, batch_id, pipeline, target_table, rows, "
            f"committed_at) VALUES ({p}, {p}, {p}, {p}, {p}, CURRENT_TIMESTAMP)",
            (info.query_id, info.batch_id, info.ctx.pipeline, info.ctx.table, rows),
        )

    def write_batch(self, batch: DataFrame, info: BatchInfo) -> None:
        quote_ident(info.ctx.table)
        with self.errors(info), closing(self.connect()) as conn:
            # the batch's own types: SQLite stores timestamps as ISO text, PostgreSQL as
            # timestamptz (both receive ISO-8601 UTC text)
            self.ensure_schema(conn, info.ctx.table, batch.schema, info.ctx)
            with self.transaction(conn):
                replay = self.committed(conn, info)
                if not replay:
                    self.clear_stage(conn, info)
            if replay:
                self._skip(info)
                drain(batch)  # outside the transaction: nothing is written
                self._written[info.ctx.query_name] = (info.batch_id, 0)
                return
            won = False
            with self.staged(batch, info) as staged, self.transaction(conn):
                won = self.committed(conn, info)  # another writer won meanwhile
                if not won:
                    rows = self.merge(conn, info, staged)
                    self.record(conn, info, rows)
                    _fault("before-commit", info.batch_id)
            if won:
                self._skip(info)
                drain(batch)
            self._written[info.ctx.query_name] = (info.batch_id, 0 if won else rows)

    def _skip(self, info: BatchInfo) -> None:
        self.skipped_batches += 1
        log.warning(
            "%s batch %d was already committed to %s (a replay after a restart); skipped",
            info.ctx.query_name,
            info.batch_id,
            info.ctx.table,
        )


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def quote_ident(name: str) -> str:
    """Validate an SQL identifier (letters, digits, underscore) and quote it."""
    if not _IDENT.match(name):
        raise SlipstreamError(
            "SINK_BAD_TARGET",
            f"{name!r} is not a valid table or column name",
            "use letters, digits and underscores, starting with a letter or underscore",
        )
    return f'"{name}"'


#: table names a data output may not take (compared without case: SQLite's names ignore it):
#: slipstream's own tables (the ledger `_slipstream_batches`, PostgreSQL's staging tables
#: `_slipstream_stage_*`), SQLite's (`sqlite_master`, `sqlite_sequence`...: CREATE TABLE IF NOT
#: EXISTS passes over them, the first batch then fails) and PostgreSQL's catalogs (`pg_class`
#: is found in pg_catalog before the output's schema)
RESERVED_TABLE_PREFIXES = ("_slipstream_", "sqlite_", "pg_")


def check_table(name: str) -> str:
    """A data output's table name: a valid identifier (quote_ident) that is not reserved, so a
    data table can never take the ledger's place. Returns it quoted."""
    quoted = quote_ident(name)
    reserved = next((p for p in RESERVED_TABLE_PREFIXES if name.lower().startswith(p)), None)
    if reserved is not None:
        raise SlipstreamError(
            "SINK_RESERVED_TABLE",
            f"table {name!r} is a reserved name (names starting with {reserved!r} belong to "
            f"{'slipstream' if reserved == '_slipstream_' else 'the database'})",
            "choose another --table; reserved prefixes: " + ", ".join(RESERVED_TABLE_PREFIXES),
        )
    return quoted


def sql_type(data_type: DataType) -> str:
    """The column type used by the SQL sinks (timestamps arrive as ISO text)."""
    if isinstance(data_type, BooleanType):
        return "BOOLEAN"
    if isinstance(data_type, IntegralType):
        return "BIGINT"
    if isinstance(data_type, FloatType | DoubleType):
        return "DOUBLE PRECISION"
    if isinstance(data_type, DecimalType):
        return f"NUMERIC({data_type.precision},{data_type.scale})"
    if isinstance(data_type, DateType):
        return "DATE"
    return "TEXT"
