"""PostgreSQL: exactly-once through a staging table and the batch ledger (see base.py).

    --sink postgresql://user@host:5432/db          password from PGPASSWORD or ~/.pgpass
    --sink postgresql                              everything from PGHOST, PGPORT, PGUSER,
                                                   PGPASSWORD, PGDATABASE (libpq's variables)
    --sink 'postgresql://user@host/db?sslmode=require&parallel_rows=50000'

How one micro-batch is written
------------------------------
1. Driver: create the target table (the batch's schema; primary key = the pipeline's key in
   update and complete modes), the ledger `_slipstream_batches` and an UNLOGGED staging table
   `_slipstream_stage_<table>` if missing. If the ledger already holds (query id, batch id), the
   batch is a replay after a crash: skip it.
2. Rows reach the staging table, each tagged (query id, batch id, attempt, partition, seq), where
   `attempt` is a fresh random id for this call of the sink.
   - Large batches (more than `parallel_rows`, default 10,000) are written in parallel from the
     executors (`mapInArrow`, classic and Connect alike): one `COPY` per partition, in its own
     transaction that first takes an advisory lock on (query, batch, attempt, partition) and
     deletes that partition's rows, so a task that Spark retries (or runs speculatively twice)
     leaves exactly one copy.
   - Small batches are copied from the driver inside the merge transaction (no extra round of
     tasks and connections for a handful of rows).
3. ONE driver transaction: check the ledger again, check that the staging table holds exactly
   the rows the executors reported (an UNLOGGED table is emptied if PostgreSQL crashes; a merge
   of a half-empty staging table would lose rows, so it aborts and the batch is retried), merge
   into the target (`INSERT ... ON CONFLICT (key) DO UPDATE` for update/complete, plain `INSERT`
   for append), insert the ledger row, delete this query's staging rows up to this batch, commit.

Text PostgreSQL cannot hold: a NUL character (U+0000) in a text value is stored as U+FFFD (the
replacement character), on the executors before staging. PostgreSQL refuses NUL in text, so
every replay of the batch would fail the same way and block the query for good.

Leftovers of a crashed attempt stay in staging under their own attempt id: they are never merged
(the merge reads only its own attempt), and the next attempt of that batch deletes them, before
staging and again when it commits.

The password
------------
It lives in a `Secret` (its repr is `***`) from parsing to the moment `psycopg.connect` needs it,
and is passed as a keyword, never inside a DSN string. `describe()` (shown by `check`, the run
header and errors) prints `postgresql://user@host:port/db`. Every psycopg error is scrubbed of the
password before it is re-raised. To reach the executors the password travels inside the pickled
function of `mapInArrow` that Spark sends with each staging task (under Spark Connect, also
inside the `foreachBatch` function the client sends to the server), as Spark's own JDBC source
ships its `password` option. Plans, the UI and the event log name that function `stage(...)`
and show none of its bytes (tests/e2e/connect/test_connect.py searches the server's event
log); a failing task's traceback holds source lines and our scrubbed message, never local
values. The bytes do pass through Spark's RPC and block manager: on a shared cluster enable
`spark.network.crypto.enabled` / `spark.io.encryption.enabled` (and TLS for Connect), or keep
the password out of the job with a `~/.pgpass` file on each executor host. A password given on
the command line is visible to other local users in `ps`; prefer PGPASSWORD or ~/.pgpass.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructType

from slipstream.checkpoint.lifecycle import not_ours
from slipstream.core.specs import SinkSpec
from slipstream.core.words import count
from slipstream.errors import SlipstreamError, find_error
from slipstream.sinks.base import BatchInfo, SinkContext, with_iso_timestamps
from slipstream.sinks.database import LEDGER_TABLE, DatabaseSink, quote_ident
from slipstream.sinks.postgres_io import (
    FIX_CONNECT,
    PG_DRIVER,
    STAGE_COLUMNS,
    STAGED_COUNT,
    PgTarget,
    cause,
    connect,
    copy_partition,
    copy_rows,
    pg_type,
    plain,
    read_table,
    reason,
    retry_advice,
    scrub,
    stage_arrow_batches,
    staging_table,
)

__all__ = [  # what tests and callers import from here
    "PgTarget", "PostgresSink", "copy_partition", "connect", "read_table", "scrub",
    "staging_table",
]  # fmt: skip

if TYPE_CHECKING:
    import psycopg


def without_nul(frame: DataFrame) -> DataFrame:
    """Text columns with each NUL (which PostgreSQL text refuses) as U+FFFD."""
    return frame.select(
        *[
            F.translate(F.col(f.name), "\u0000", "\ufffd").alias(f.name)
            if isinstance(f.dataType, StringType)
            else F.col(f.name)
            for f in frame.schema.fields
        ]
    )


@dataclass
class Staged:
    """A batch on its way in: persisted, with the attempt id of its staging rows and their
    count once staged (None: not yet, a small batch the merge stages from the driver)."""

    frame: DataFrame
    attempt: str
    rows: int | None = None


class PostgresSink(DatabaseSink):
    kind = "postgresql"
    target_grammar = "url"
    usage = "postgresql[://user[:password]@host[:port]/db]"
    jdbc = PG_DRIVER
    placeholder = "%s"

    def __init__(self, spec: SinkSpec, environ: Mapping[str, str] | None = None) -> None:
        super().__init__(spec)
        self.target = PgTarget.from_spec(spec, environ)
        self.parallel_batches = 0  # batches staged from the executors (tests, the summary)

    def describe(self, ctx: SinkContext | None = None) -> str:
        table = f" table {ctx.table}" if ctx else ""
        return f"postgresql {self.target.describe()}{table} (exactly-once: staging + batch ledger)"

    # -- the DatabaseSink template -------------------------------------------------------------
    def connect(self) -> psycopg.Connection:
        return connect(self.target)

    def ensure_schema(
        self, conn: psycopg.Connection, table: str, schema: StructType, ctx: SinkContext
    ) -> None:
        clash = [f.name for f in schema.fields if f.name in STAGE_COLUMNS]
        if clash:
            raise SlipstreamError(
                "SINK_BAD_TARGET",
                f"column names {clash} are reserved by the PostgreSQL sink's staging table",
                "rename those columns in the pipeline",
            )
        cols = [f"{quote_ident(f.name)} {pg_type(f.dataType)}" for f in schema.fields]
        key = ""
        if ctx.mode != "append" and ctx.key:
            key = f", PRIMARY KEY ({', '.join(quote_ident(k) for k in ctx.key)})"
        staging = staging_table(table)
        stage_cols = [
            "_query_id TEXT NOT NULL",
            "_batch_id BIGINT NOT NULL",
            "_attempt TEXT NOT NULL",
            "_part INTEGER NOT NULL",
            "_seq BIGINT NOT NULL",
            *cols,
        ]
        with conn.transaction():
            # Two pipelines starting on one database at once must not race on CREATE TABLE.
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('slipstream.ddl', 0))")
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {quote_ident(table)} ({', '.join(cols)}{key})"
            )
            conn.execute(
                f"CREATE TABLE IF NOT EXISTS {LEDGER_TABLE} (query_id TEXT NOT NULL, "
                "batch_id BIGINT NOT NULL, pipeline TEXT, target_table TEXT, rows BIGINT, "
                "committed_at TIMESTAMPTZ, PRIMARY KEY (query_id, batch_id))"
            )
            existing = [
                r[0]
                for r in conn.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                    "current_schema() AND table_name = %s ORDER BY ordinal_position",
                    (staging,),
                ).fetchall()
            ]
            wanted = [*STAGE_COLUMNS, *schema.fieldNames()]
            if existing and existing != wanted:  # the pipeline's schema changed: scratch table
                conn.execute(f"DROP TABLE {quote_ident(staging)}")
                existing = []
            if not existing:
                conn.execute(
                    f"CREATE UNLOGGED TABLE {quote_ident(staging)} ({', '.join(stage_cols)})"
                )
                conn.execute(
                    f"CREATE INDEX ON {quote_ident(staging)} (_query_id, _batch_id, _attempt)"
                )

    def row_frame(self, frame: DataFrame) -> DataFrame:
        return without_nul(with_iso_timestamps(frame, nested_as_json=True))

    def row_connection(self) -> partial[psycopg.Connection]:
        return partial(connect, self.target)  # pickled as the staging tasks carry it

    def clear_stage(self, conn: psycopg.Connection, info: BatchInfo) -> None:
        """Leftovers of an earlier attempt of this batch (a crash before its merge), or of any
        earlier batch of this query."""
        conn.execute(
            f"DELETE FROM {quote_ident(staging_table(info.ctx.table))} "
            "WHERE _query_id = %s AND _batch_id <= %s",
            (info.query_id, info.batch_id),
        )

    @contextmanager
    def staged(self, batch: DataFrame, info: BatchInfo) -> Iterator[Staged]:
        """A batch larger than `parallel_rows` is COPYed into staging from the executors, each
        partition in its own connection, before the merge transaction; a smaller one is staged
        from the driver inside it (`merge`)."""
        stored = without_nul(with_iso_timestamps(batch, nested_as_json=True)).persist()
        try:
            staged = Staged(stored, uuid.uuid4().hex)
            if stored.count() > self.target.parallel_rows:
                staged.rows = self._stage_on_executors(stored, info, staged.attempt)
            yield staged
        finally:
            stored.unpersist()

    def merge(self, conn: psycopg.Connection, info: BatchInfo, staged: Staged) -> int:
        if staged.rows is None:  # small: COPY from the driver, in this transaction
            staged.rows = copy_rows(
                conn,
                staging_table(info.ctx.table),
                staged.frame.columns,
                (info.query_id, info.batch_id, staged.attempt, 0),
                staged.frame.collect(),  # at most parallel_rows rows
            )
        return self.merge_staging(
            conn, info.ctx.table, staged.frame.columns, info, staged.attempt, staged.rows
        )

    def merge_staging(
        self,
        conn: psycopg.Connection,
        table: str,
        columns: list[str],
        info: BatchInfo,
        attempt: str,
        staged: int,
    ) -> int:
        """Staging rows of this attempt -> the target, then drop this query's staging rows."""
        staging = quote_ident(staging_table(table))
        ids = (info.query_id, info.batch_id, attempt)
        mine = "_query_id = %s AND _batch_id = %s AND _attempt = %s"
        present = conn.execute(f"SELECT count(*) FROM {staging} WHERE {mine}", ids).fetchone()
        if present is None or present[0] != staged:
            raise SlipstreamError(
                "SINK_WRITE_FAILED",
                f"staging table {staging_table(table)} holds "
                f"{count(present[0] if present else 0, 'row')} "
                f"of batch {info.batch_id}, expected {staged} (PostgreSQL restarted and emptied "
                "the UNLOGGED staging table?); nothing was merged",
                "restart the query: the batch is staged again and merged once",
            )
        cols = ", ".join(quote_ident(c) for c in columns)
        target = quote_ident(table)
        key = info.ctx.key if info.ctx.mode != "append" else ()
        if key:
            keys = ", ".join(quote_ident(k) for k in key)
            updates = ", ".join(
                f"{quote_ident(c)} = EXCLUDED.{quote_ident(c)}" for c in columns if c not in key
            )
            # DISTINCT ON: should a batch carry one key twice, the last row wins (as in SQLite).
            sql = (
                f"INSERT INTO {target} ({cols}) SELECT {cols} FROM (SELECT DISTINCT ON ({keys}) "
                f"* FROM {staging} WHERE {mine} ORDER BY {keys}, _part DESC, _seq DESC) s "
                f"ON CONFLICT ({keys}) DO " + (f"UPDATE SET {updates}" if updates else "NOTHING")
            )
        else:
            sql = f"INSERT INTO {target} ({cols}) SELECT {cols} FROM {staging} WHERE {mine}"
        merged = conn.execute(sql, ids).rowcount
        conn.execute(
            f"DELETE FROM {staging} WHERE _query_id = %s AND _batch_id <= %s",
            (info.query_id, info.batch_id),
        )
        return merged

    @contextmanager
    def errors(self, info: BatchInfo) -> Iterator[None]:
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            unreachable = isinstance(exc, psycopg.OperationalError)
            raise SlipstreamError(
                "SINK_UNREACHABLE" if unreachable else "SINK_WRITE_FAILED",
                f"PostgreSQL at {self.target.where()} failed while writing batch "
                f"{info.batch_id} into {info.ctx.table}: {reason(exc, self.target.password)}",
                FIX_CONNECT if unreachable else retry_advice(exc),
            ) from None

    def _stage_on_executors(self, stored: DataFrame, info: BatchInfo, attempt: str) -> int:
        stage = stage_arrow_batches(
            self.target,
            staging_table(info.ctx.table),
            stored.columns,
            info.query_id,
            info.batch_id,
            attempt,
        )
        try:  # one row per partition: its count (mapInArrow: no RDD, so Connect runs it too)
            counts = [row[0] for row in stored.mapInArrow(stage, STAGED_COUNT).collect()]
        except Exception as exc:  # a task failed: surface our own error, scrubbed
            text = scrub(str(exc), self.target.password)
            found = find_error(text)
            if found is not None:
                raise found from None
            raise SlipstreamError(
                "SINK_WRITE_FAILED",
                f"staging batch {info.batch_id} from the executors failed: {cause(text, exc)}",
                "see the executor log: a restart retries the batch, and fails the same way if "
                "the batch's data is the cause",
            ) from None
        self.parallel_batches += 1
        return sum(counts)

    # -- reading and resetting ---------------------------------------------------------------
    def preview(
        self, ctx: SinkContext, *, limit: int = 50, order_by: str | None = None
    ) -> dict[str, Any] | None:
        """The first `limit` rows in `order_by` order (default: physical order, newest pages
        first), read in a read-only transaction; None when the database cannot be reached."""
        import psycopg

        view: dict[str, Any] = {"columns": [], "rows": [], "updated": None}
        try:
            with connect(self.target) as conn:
                conn.read_only = True
                exists = conn.execute("SELECT to_regclass(%s)", (quote_ident(ctx.table),))
                if not (found := exists.fetchone()) or not found[0]:
                    return view
                cursor = conn.execute(
                    f"SELECT * FROM {quote_ident(ctx.table)} "
                    f"ORDER BY {order_by or 'ctid DESC'} LIMIT %s",
                    (limit,),
                )
                view["columns"] = [d.name for d in cursor.description or []]
                view["rows"] = [[plain(v) for v in row] for row in cursor.fetchall()]
                ledger = conn.execute("SELECT to_regclass(%s)", (LEDGER_TABLE,)).fetchone()
                if ledger and ledger[0]:
                    (updated,) = conn.execute(
                        f"SELECT max(committed_at) FROM {LEDGER_TABLE} WHERE target_table = %s",
                        (ctx.table,),
                    ).fetchone() or (None,)
                    view["updated"] = plain(updated)
        except psycopg.Error:
            return None  # the dashboard shows no table rather than failing its poll
        return view

    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        rows = read_table(self.target, ctx.table)
        return spark.createDataFrame(rows) if rows else None

    def ledger_exists(self, conn: psycopg.Connection) -> bool:
        found = conn.execute("SELECT to_regclass(%s)", (LEDGER_TABLE,)).fetchone()
        return bool(found and found[0])

    def location(self, ctx: SinkContext) -> str | None:
        return self.spec.target or "postgresql"  # never the password: it is not in target

    def owns(self, ctx: SinkContext) -> bool:
        """No such table, or the ledger lists batches slipstream wrote to it."""
        with self.connect() as conn:
            table = conn.execute("SELECT to_regclass(%s)", (quote_ident(ctx.table),)).fetchone()
            if not table or not table[0]:
                return True
            ledger = conn.execute("SELECT to_regclass(%s)", (LEDGER_TABLE,)).fetchone()
            return (
                bool(ledger and ledger[0])
                and conn.execute(
                    f"SELECT 1 FROM {LEDGER_TABLE} WHERE target_table = %s LIMIT 1", (ctx.table,)
                ).fetchone()
                is not None
            )

    def reset(self, ctx: SinkContext) -> list[str]:
        """Drop the output's table, only if the ledger shows slipstream wrote it."""

        if not self.owns(ctx):
            raise not_ours(f"{self.target.describe()} table {ctx.table}", "database output")
        with self.connect() as conn, conn.transaction():
            conn.execute(f"DROP TABLE IF EXISTS {quote_ident(ctx.table)}")
            conn.execute(f"DROP TABLE IF EXISTS {quote_ident(staging_table(ctx.table))}")
            exists = conn.execute("SELECT to_regclass(%s)", (LEDGER_TABLE,)).fetchone()
            if exists and exists[0]:
                conn.execute(f"DELETE FROM {LEDGER_TABLE} WHERE target_table = %s", (ctx.table,))
        return [f"table {ctx.table} in {self.target.describe()}"]
