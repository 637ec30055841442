"""SQLite: the embedded serving database, exactly-once through the ledger (see base.py).

Rows are brought to the driver batch by batch with `base.local_rows` (one partition at a
time, never the whole batch at once; not `DataFrame.toLocalIterator`, which leaks each batch's
plan in Spark 4.3): SQLite is a local file with a single writer, so the driver
is where it must be written. The next partition is computed while this one is written
(`prefetchPartitions`), so at most two partitions are on the driver; measured 5-6% less time
per trending batch (docs/benchmarks.md). Update and complete modes upsert on the pipeline's key
(`INSERT ... ON CONFLICT DO UPDATE`); append mode inserts. Timestamps are ISO-8601 UTC text;
SQLite has no exact decimal and no date type, so decimals are stored as their exact text (a
TEXT column: `CAST(x AS REAL)` to compute) and dates as ISO text; arrays, maps and structs as
their JSON text."""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DateType, DecimalType, StructField, StructType

from slipstream.checkpoint.lifecycle import not_ours
from slipstream.core.specs import SinkSpec
from slipstream.errors import SlipstreamError, disk_full
from slipstream.settings.jdbc_drivers import JdbcDriver
from slipstream.sinks.base import BatchInfo, SinkContext, local_rows, with_iso_timestamps
from slipstream.sinks.database import LEDGER_TABLE, DatabaseSink, quote_ident, sql_type

CHUNK = 5000
# SQLite's primary result codes that a later try can outlive: another process holds the file
# (BUSY, LOCKED), the disk is full or failed (FULL, IOERR), the file cannot be opened now
# (CANTOPEN), memory ran out (NOMEM), the call was interrupted (INTERRUPT), a lock protocol race
# (PROTOCOL). Anything else (CONSTRAINT, MISMATCH, TOOBIG, ERROR: no such table or column,
# READONLY, CORRUPT, ...) is the data, the table or the file, and fails the same batch again.
TRANSIENT_CODES = frozenset(
    {"BUSY", "LOCKED", "FULL", "IOERR", "CANTOPEN", "NOMEM", "INTERRUPT", "PROTOCOL"}
)


def retry_advice(exc: sqlite3.Error) -> str:
    """What a restart does about a sqlite3 error, said truthfully (its result code)."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")  # SQLITE_BUSY_SNAPSHOT, ...
    primary = name.split("_")[1] if name.count("_") >= 1 else ""
    if not name or primary in TRANSIENT_CODES:
        return (
            f"a restart retries the batch once the cause is gone ({name or 'no result code'}: "
            "another writer, a full or failing disk; nothing was committed)"
        )
    return (
        f"a restart will fail on this batch the same way ({name}: the data, the table or the "
        "file is refused); fix the table or the file (or reset the output) first"
    )


#: free bytes under which SQLite's I/O error on the database's disk is taken for a full disk
#: (SQLite says SQLITE_IOERR, not SQLITE_FULL, when a journal or page write meets ENOSPC)
NEARLY_FULL = 64 * 1024


def full_disk(path: Path, exc: sqlite3.Error) -> SlipstreamError | None:
    """DISK_FULL (naming the database's folder and the room left on its disk) when SQLite's
    error is a full disk: SQLITE_FULL, or an I/O error on a disk with almost no room left."""
    name = str(getattr(exc, "sqlite_errorname", "") or "")
    folder = path.resolve().parent
    if not name.startswith("SQLITE_FULL"):
        if not name.startswith("SQLITE_IOERR"):
            return None
        try:
            if shutil.disk_usage(folder).free >= NEARLY_FULL:
                return None
        except OSError:
            return None
    return disk_full(f"No space left on device ({name}: {exc})", folder)


def _sqlite_type(data_type: DataType) -> str:
    return "TEXT" if isinstance(data_type, DecimalType | DateType) else sql_type(data_type)


def _as_text(field: StructField) -> Column:
    if isinstance(field.dataType, DecimalType | DateType):
        return F.col(field.name).cast("string").alias(field.name)
    return F.col(field.name)


class SqliteSink(DatabaseSink):
    kind = "sqlite"
    target_grammar = "optional"
    usage = "sqlite[:PATH]"
    local_path = True
    jdbc = JdbcDriver("org.xerial:sqlite-jdbc:3.54.1.0", "org.sqlite.JDBC", "sqlite-jdbc")
    placeholder = "?"

    def __init__(self, spec: SinkSpec, default_path: Path) -> None:
        super().__init__(spec)
        self.path = Path(spec.target) if spec.target else default_path

    @classmethod
    def from_spec(cls, spec: SinkSpec, default_database: Path) -> SqliteSink:
        return cls(spec, default_database)

    @contextmanager
    def errors(self, info: BatchInfo) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            full = full_disk(self.path, exc)
            if full is not None:
                raise full from None
            raise SlipstreamError(
                "SINK_WRITE_FAILED",
                f"SQLite {self.path} failed while writing batch {info.batch_id} into "
                f"{info.ctx.table}: {exc}",
                retry_advice(exc),
            ) from None

    def describe(self, ctx: SinkContext | None = None) -> str:
        table = f" table {ctx.table}" if ctx else ""
        return f"sqlite {self.path}{table} (exactly-once: batch ledger)"

    def preview(
        self, ctx: SinkContext, *, limit: int = 50, order_by: str | None = None
    ) -> dict[str, Any] | None:
        return table_view(self.path, ctx.table, order_by=order_by or "rowid DESC", limit=limit)

    def connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=30, isolation_level="DEFERRED")
        wal(conn)
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    def ensure_schema(
        self, conn: sqlite3.Connection, table: str, schema: StructType, ctx: SinkContext
    ) -> None:
        cols = ", ".join(f"{quote_ident(f.name)} {_sqlite_type(f.dataType)}" for f in schema.fields)
        key = ""
        if ctx.mode != "append" and ctx.key:
            key = f", PRIMARY KEY ({', '.join(quote_ident(k) for k in ctx.key)})"
        conn.execute(f"CREATE TABLE IF NOT EXISTS {quote_ident(table)} ({cols}{key})")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {LEDGER_TABLE} (query_id TEXT NOT NULL, "
            "batch_id INTEGER NOT NULL, pipeline TEXT, target_table TEXT, rows INTEGER, "
            "committed_at TEXT, PRIMARY KEY (query_id, batch_id))"
        )
        conn.commit()

    @contextmanager
    def staged(self, batch: DataFrame, info: BatchInfo) -> Iterator[Any]:
        """The batch as SQLite can bind it: timestamps, dates and decimals as text (exact),
        nested values as JSON text. Converted on the executors, before any row is read."""
        yield self.row_frame(batch)

    def row_frame(self, frame: DataFrame) -> DataFrame:
        frame = with_iso_timestamps(frame, nested_as_json=True)
        if any(isinstance(f.dataType, DecimalType | DateType) for f in frame.schema.fields):
            frame = frame.select(*[_as_text(f) for f in frame.schema.fields])
        return frame

    def row_connection(self) -> partial[sqlite3.Connection]:
        """Real-time mode: each task's connection (sinks/rows.py), WAL like the driver's."""
        return partial(row_connect, str(self.path))

    def merge(self, conn: sqlite3.Connection, info: BatchInfo, staged: DataFrame) -> int:
        """The batch's rows, read partition by partition on the driver, inserted or upserted."""
        names = staged.columns
        cols = ", ".join(quote_ident(n) for n in names)
        marks = ", ".join("?" for _ in names)
        sql = f"INSERT INTO {quote_ident(info.ctx.table)} ({cols}) VALUES ({marks})"
        if info.ctx.mode != "append" and info.ctx.key:
            keys = ", ".join(quote_ident(k) for k in info.ctx.key)
            updates = ", ".join(
                f"{quote_ident(n)} = excluded.{quote_ident(n)}"
                for n in names
                if n not in info.ctx.key
            )
            sql += f" ON CONFLICT ({keys}) DO " + (
                f"UPDATE SET {updates}" if updates else "NOTHING"
            )
        count = 0
        chunk: list[tuple[Any, ...]] = []
        for row in local_rows(staged):
            chunk.append(tuple(row))
            if len(chunk) >= CHUNK:
                conn.executemany(sql, chunk)
                count += len(chunk)
                chunk.clear()
        if chunk:
            conn.executemany(sql, chunk)
            count += len(chunk)
        return count

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        rows = read_table(self.path, ctx.table)
        if not rows:
            return None
        return spark.createDataFrame(rows)

    def ledger_exists(self, conn: sqlite3.Connection) -> bool:
        return has_table(conn, LEDGER_TABLE)

    def foreign_batches(self, ctx: SinkContext) -> str | None:
        return super().foreign_batches(ctx) if self.path.exists() else None

    def ledger_queries(self, ctx: SinkContext) -> set[str]:
        return super().ledger_queries(ctx) if self.path.exists() else set()

    def location(self, ctx: SinkContext) -> str | None:
        return f"sqlite:{self.path.resolve()}"

    def owns(self, ctx: SinkContext) -> bool:
        """No such table, or the ledger lists batches slipstream wrote to it."""
        if not self.path.exists():
            return True
        with closing(sqlite3.connect(self.path)) as conn:

            def exists(name: str) -> bool:
                found = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
                ).fetchone()
                return found is not None

            if not exists(ctx.table):
                return True
            return (
                exists(LEDGER_TABLE)
                and conn.execute(
                    f"SELECT 1 FROM {LEDGER_TABLE} WHERE target_table = ? LIMIT 1", (ctx.table,)
                ).fetchone()
                is not None
            )

    def reset(self, ctx: SinkContext) -> list[str]:
        """Drop the output's table, only if the ledger shows slipstream wrote it."""

        if not self.path.exists():
            return []
        if not self.owns(ctx):
            raise not_ours(f"{self.path} table {ctx.table}", "database output")
        with sqlite3.connect(self.path) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {quote_ident(ctx.table)}")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {LEDGER_TABLE} (query_id TEXT, batch_id "
                "INTEGER, pipeline TEXT, target_table TEXT, rows INTEGER, "
                "committed_at TEXT, PRIMARY KEY (query_id, batch_id))"
            )
            conn.execute(f"DELETE FROM {LEDGER_TABLE} WHERE target_table = ?", (ctx.table,))
        return [f"table {ctx.table} in {self.path}"]


#: the pauses between attempts to switch a new file to WAL (about 10 s in all)
WAL_PAUSES = tuple(0.01 * 2**i for i in range(10))


def wal(conn: sqlite3.Connection, pauses: tuple[float, ...] = WAL_PAUSES) -> None:
    """Put `conn`'s database in WAL mode. Switching a new file takes an exclusive lock that
    SQLite does not wait for (no busy handler): the first batches of several outputs writing
    one new file at once would fail with "database is locked". Attempted again after each
    pause; any other error, or the last attempt's, is raised."""
    for pause in (*pauses, None):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if pause is None or "locked" not in str(exc):
                raise
            time.sleep(pause)


def row_connect(path: str) -> sqlite3.Connection:
    """A connection for a real-time task: WAL, so readers never wait for it, and a busy
    timeout, so the tasks of one query take turns on the file."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=30, isolation_level="DEFERRED")
    wal(conn)
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


@contextmanager
def read_only(path: Path | str) -> Iterator[sqlite3.Connection | None]:
    """The one read-only connection to a SQLite sink's database (rows as `sqlite3.Row`), closed
    after use; None while the file does not exist. Readers never block the writer (WAL)."""
    if not Path(path).exists():
        yield None
        return
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    conn.row_factory = sqlite3.Row
    try:
        yield conn
    finally:
        conn.close()


def has_table(conn: sqlite3.Connection, table: str) -> bool:
    found = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (table,))
    return found.fetchone() is not None


def read_table(path: Path, table: str, order_by: str | None = None) -> list[dict[str, Any]]:
    """Rows of a table as dicts (small serving tables: the terminal view, tests, dashboard)."""
    with read_only(path) as conn:
        if conn is None or not has_table(conn, table):
            return []
        order = f" ORDER BY {order_by}" if order_by else ""
        return [dict(r) for r in conn.execute(f"SELECT * FROM {quote_ident(table)}{order}")]


def table_view(db: Path, table: str, *, order_by: str, limit: int = 50) -> dict[str, Any]:
    """The first `limit` rows of `table` in `order_by` order (SQL a pipeline writes, never user
    input), as `{"columns", "rows", "updated"}`; no rows while it does not exist. `updated` is
    when the sink last committed a batch to it (its ledger), ISO-8601 UTC."""
    view: dict[str, Any] = {"columns": [], "rows": [], "updated": None}
    with read_only(db) as conn:
        if conn is None or not has_table(conn, table):
            return view
        cursor = conn.execute(
            f"SELECT * FROM {quote_ident(table)} ORDER BY {order_by} LIMIT ?", (limit,)
        )
        view["columns"] = [d[0] for d in cursor.description]
        view["rows"] = [list(row) for row in cursor.fetchall()]
        view["updated"] = _last_commit(conn, table)
    return view


def last_commit(db: Path, table: str) -> str | None:
    """When the sink last committed a batch to `table` (ISO-8601 UTC), from its ledger."""
    with read_only(db) as conn:
        return None if conn is None else _last_commit(conn, table)


def _last_commit(conn: sqlite3.Connection, table: str) -> str | None:
    if not has_table(conn, LEDGER_TABLE):
        return None
    (updated,) = conn.execute(
        f"SELECT max(committed_at) FROM {LEDGER_TABLE} WHERE target_table = ?", (table,)
    ).fetchone()
    if not isinstance(updated, str) or not updated:
        return None  # SQLite's CURRENT_TIMESTAMP ('2026-01-15 09:30:00') is UTC
    return updated.replace(" ", "T") + ("" if updated.endswith("Z") else "Z")
