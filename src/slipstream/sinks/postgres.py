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
     executors: one `COPY` per partition, in its own transaction that first takes an advisory
     lock on (query, batch, attempt, partition) and deletes that partition's rows, so a task that
     Spark retries (or runs speculatively twice) leaves exactly one copy.
   - Small batches are copied from the driver inside the merge transaction (no extra round of
     tasks and connections for a handful of rows).
3. ONE driver transaction: check the ledger again, check that the staging table holds exactly
   the rows the executors reported (an UNLOGGED table is emptied if PostgreSQL crashes; a merge
   of a half-empty staging table would lose rows, so it aborts and the batch is retried), merge
   into the target (`INSERT ... ON CONFLICT (key) DO UPDATE` for update/complete, plain `INSERT`
   for append), insert the ledger row, delete this query's staging rows up to this batch, commit.

Leftovers of a crashed attempt stay in staging under their own attempt id: they are never merged
(the merge reads only its own attempt), and the next attempt of that batch deletes them, before
staging and again when it commits.

The password
------------
It lives in a `Secret` (its repr is `***`) from parsing to the moment `psycopg.connect` needs it,
and is passed as a keyword, never inside a DSN string. `describe()` (shown by `check`, the run
header and errors) prints `postgresql://user@host:port/db`. Every psycopg error is scrubbed of the
password before it is re-raised. To reach the executors the password travels inside the pickled
function that Spark sends with each staging task, as Spark's own JDBC source ships its `password`
option. Spark does not log task closures (a Python function is opaque bytes to the JVM; a failing
task logs its traceback, which holds source lines and our scrubbed message, never local values),
but the bytes do pass through Spark's RPC and block manager: on a shared cluster enable
`spark.network.crypto.enabled` / `spark.io.encryption.enabled`, or keep the password out of the
job entirely with a `~/.pgpass` file on each executor host. The password given on the command
line is visible to other local users in `ps`; prefer PGPASSWORD or ~/.pgpass.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType, TimestampNTZType, TimestampType

from slipstream.errors import SlipstreamError, find_error
from slipstream.sinks.base import (
    LEDGER_TABLE,
    BatchInfo,
    DatabaseSink,
    SinkContext,
    _fault,
    drain,
    quote_ident,
    sql_type,
    with_iso_timestamps,
)
from slipstream.specs import Secret, SinkSpec

if TYPE_CHECKING:
    import psycopg

PARALLEL_ROWS = 10_000
STAGE_PREFIX = "_slipstream_stage_"
STAGE_COLUMNS = ("_query_id", "_batch_id", "_attempt", "_part", "_seq")
CONNECT_TIMEOUT_S = 10
FIX_CONNECT = (
    "check that PostgreSQL runs and accepts TCP connections there (listen_addresses, "
    "pg_hba.conf); correct --sink postgresql://USER@HOST:PORT/DB or PGHOST, PGPORT, PGDATABASE, "
    "PGUSER; give the password in PGPASSWORD or ~/.pgpass rather than on the command line"
)


# --- where to connect ------------------------------------------------------------------------


@dataclass(frozen=True)
class PgTarget:
    """Connection parameters without the password (safe to print), plus the password apart."""

    host: str | None
    port: int | None
    user: str | None
    dbname: str | None
    params: tuple[tuple[str, str], ...] = ()  # other libpq keywords (sslmode, ...)
    password: Secret | None = field(default=None, compare=False, repr=False)
    parallel_rows: int = PARALLEL_ROWS

    @classmethod
    def from_spec(cls, spec: SinkSpec, environ: Mapping[str, str] | None = None) -> PgTarget:
        env = os.environ if environ is None else environ
        env_password = Secret(env["PGPASSWORD"]) if env.get("PGPASSWORD") else None
        if not spec.target:  # `--sink postgresql`: libpq's environment variables
            port = env.get("PGPORT")
            return cls(
                host=env.get("PGHOST"),
                port=_port(port) if port else None,
                user=env.get("PGUSER"),
                dbname=env.get("PGDATABASE"),
                password=env_password,
            )
        parts = urlsplit(spec.target)
        params = dict(parse_qsl(parts.query))
        parallel = params.pop("parallel_rows", None)
        if any("password" in name.lower() for name in params):  # password, sslpassword
            raise SlipstreamError(
                "SINK_BAD_TARGET",
                "the sink URL carries a password parameter (it would be printed)",
                "give the password in PGPASSWORD or ~/.pgpass (or as user:password@host)",
            )
        return cls(
            host=parts.hostname,
            port=parts.port,
            user=unquote(parts.username) if parts.username else env.get("PGUSER"),
            dbname=unquote(parts.path.strip("/")) or None,
            params=tuple(sorted(params.items())),
            password=spec.password or env_password,
            parallel_rows=_count(parallel) if parallel is not None else PARALLEL_ROWS,
        )

    def describe(self) -> str:
        """postgresql://user@host:port/db: never the password."""
        user = f"{self.user}@" if self.user else ""
        port = f":{self.port}" if self.port else ""
        query = "&".join(f"{k}={v}" for k, v in self.params)
        return f"postgresql://{user}{self.host or 'localhost'}{port}/{self.dbname or ''}" + (
            f"?{query}" if query else ""
        )

    def where(self) -> str:
        return (
            f"{self.host or 'localhost'}:{self.port or 5432}, database "
            f"{self.dbname or self.user or '(default)'}, user {self.user or '(default)'}"
        )

    def keywords(self) -> dict[str, Any]:
        """libpq keywords; unset ones fall back to libpq's defaults where the code runs."""
        kw: dict[str, Any] = {
            k: v
            for k, v in (
                ("host", self.host),
                ("port", self.port),
                ("user", self.user),
                ("dbname", self.dbname),
            )
            if v is not None
        }
        kw.update(dict(self.params))
        kw.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
        kw.setdefault("application_name", "slipstream")
        return kw


def _port(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise SlipstreamError(
            "SINK_BAD_TARGET", f"PGPORT {text!r} is not a port number", "set PGPORT to e.g. 5432"
        ) from None


def _count(text: str) -> int:
    if not text.isdigit():
        raise SlipstreamError(
            "SINK_BAD_TARGET",
            f"parallel_rows={text!r} is not a row count",
            "give parallel_rows a whole number (0: always write from the executors)",
        )
    return int(text)


def scrub(text: str, password: Secret | None) -> str:
    """Remove the password (plain or URL-quoted) and anything DSN-shaped that may hold one."""
    if password is not None and password.reveal():
        from urllib.parse import quote

        secret = password.reveal()
        for form in {secret, quote(secret, safe=""), quote(secret)}:
            text = text.replace(form, "***")
    text = re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", text, flags=re.I)
    return re.sub(r"(postgres(?:ql)?://[^:/@\s]+):[^@\s]*@", r"\1:***@", text)


def _reason(exc: BaseException, password: Secret | None) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return scrub(" / ".join(lines[:3]) or type(exc).__name__, password)


def _cause(text: str, exc: BaseException) -> str:
    """The innermost `SomeError: message` line of a (Python worker's) traceback."""
    lines = re.findall(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception): .+)$", text, re.M)
    if lines:
        return lines[-1].strip()
    first = text.strip().splitlines()
    return first[0] if first else type(exc).__name__


def connect(target: PgTarget, *, autocommit: bool = False) -> psycopg.Connection:
    """Open a connection (driver or executor). Failures name host, port, database and the fix."""
    import psycopg

    kw = target.keywords()
    try:
        if target.password is not None:
            return psycopg.connect(autocommit=autocommit, password=target.password.reveal(), **kw)
        return psycopg.connect(autocommit=autocommit, **kw)
    except psycopg.Error as exc:
        raise SlipstreamError(
            "SINK_UNREACHABLE",
            f"cannot connect to PostgreSQL at {target.where()}: {_reason(exc, target.password)}",
            FIX_CONNECT,
        ) from None


def pg_type(data_type: Any) -> str:
    """Column types in PostgreSQL: timestamps as timestamptz (they arrive as ISO-8601 UTC text)."""
    if isinstance(data_type, TimestampType):
        return "TIMESTAMPTZ"
    if isinstance(data_type, TimestampNTZType):
        return "TIMESTAMP"
    return sql_type(data_type)


def staging_table(table: str) -> str:
    name = STAGE_PREFIX + table
    if len(name) > 63:  # PostgreSQL's identifier limit
        digest = hashlib.sha1(table.encode()).hexdigest()[:8]
        name = f"{name[: 63 - 9]}_{digest}"
    return name


# --- executor side ---------------------------------------------------------------------------


def stage_partitions(
    target: PgTarget, staging: str, columns: list[str], query_id: str, batch_id: int, attempt: str
) -> Any:
    """The function each staging task runs (pickled with its arguments; see the module doc)."""

    def stage(part: int, rows: Iterator[Any]) -> Iterator[int]:
        first = next(rows, None)
        if first is None:
            yield 0
            return
        yield _copy_partition(
            target, staging, columns, query_id, batch_id, attempt, part, _chain(first, rows)
        )

    return stage


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _copy_partition(
    target: PgTarget,
    staging: str,
    columns: list[str],
    query_id: str,
    batch_id: int,
    attempt: str,
    part: int,
    rows: Iterable[Any],
) -> int:
    import psycopg

    conn = connect(target)
    try:
        with conn.transaction():
            # One writer per (query, batch, attempt, partition): a retried or speculative copy
            # of this task waits here, then replaces what the other wrote.
            conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                (f"{staging}/{query_id}/{batch_id}/{attempt}/{part}",),
            )
            conn.execute(
                f"DELETE FROM {quote_ident(staging)} WHERE _query_id = %s AND _batch_id = %s "
                "AND _attempt = %s AND _part = %s",
                (query_id, batch_id, attempt, part),
            )
            count = _copy_rows(conn, staging, columns, query_id, batch_id, attempt, part, rows)
        return count
    except psycopg.Error as exc:
        raise SlipstreamError(
            "SINK_WRITE_FAILED",
            f"staging partition {part} of batch {batch_id} into {staging} at {target.where()} "
            f"failed: {_reason(exc, target.password)}",
            "see the PostgreSQL server log; the batch is retried when the query restarts",
        ) from None
    finally:
        conn.close()


def _copy_rows(
    conn: psycopg.Connection,
    staging: str,
    columns: list[str],
    query_id: str,
    batch_id: int,
    attempt: str,
    part: int,
    rows: Iterable[Any],
) -> int:
    names = ", ".join(quote_ident(c) for c in [*STAGE_COLUMNS, *columns])
    count = 0
    with conn.cursor().copy(f"COPY {quote_ident(staging)} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row((query_id, batch_id, attempt, part, count, *row))
            count += 1
    return count


# --- the sink --------------------------------------------------------------------------------


class PostgresSink(DatabaseSink):
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

    def write_rows(
        self, conn: psycopg.Connection, table: str, batch: DataFrame, info: BatchInfo
    ) -> int:
        """Driver path: copy a small batch into staging, then merge (same transaction)."""
        attempt = uuid.uuid4().hex
        staging = staging_table(table)
        staged = _copy_rows(
            conn,
            staging,
            batch.columns,
            info.query_id,
            info.batch_id,
            attempt,
            0,
            batch.collect(),  # at most parallel_rows rows (larger batches stage in parallel)
        )
        return self.merge(conn, table, batch.columns, info, attempt, staged)

    def merge(
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
                f"staging table {staging_table(table)} holds {present[0] if present else 0} rows "
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

    # -- one batch --------------------------------------------------------------------------
    def write_batch(self, batch: DataFrame, info: BatchInfo) -> None:
        import psycopg

        table = info.ctx.table
        quote_ident(table)
        try:
            self._write_batch(batch, info)
        except SlipstreamError:
            raise
        except psycopg.Error as exc:
            raise SlipstreamError(
                "SINK_UNREACHABLE"
                if isinstance(exc, psycopg.OperationalError)
                else "SINK_WRITE_FAILED",
                f"PostgreSQL at {self.target.where()} failed while writing batch "
                f"{info.batch_id} into {table}: {_reason(exc, self.target.password)}",
                FIX_CONNECT
                if isinstance(exc, psycopg.OperationalError)
                else "see the PostgreSQL server log; the batch is retried when the query restarts",
            ) from None

    def _write_batch(self, batch: DataFrame, info: BatchInfo) -> None:
        table = info.ctx.table
        staging = staging_table(table)
        with self.connect() as conn:
            self.ensure_schema(conn, table, batch.schema, info.ctx)
            with conn.transaction():
                replay = self.committed(conn, info)
                # Leftovers of an earlier attempt of this batch (a crash before its merge), or
                # of any earlier batch of this query.
                conn.execute(
                    f"DELETE FROM {quote_ident(staging)} WHERE _query_id = %s AND _batch_id <= %s",
                    (info.query_id, info.batch_id),
                )
        if replay:
            self.skipped_batches += 1
            drain(batch)  # stateful queries must still run it (see base.drain)
            return
        stored = with_iso_timestamps(batch).persist()
        try:
            large = stored.count() > self.target.parallel_rows
            attempt = uuid.uuid4().hex
            staged = self._stage_on_executors(stored, info, attempt) if large else 0
            with self.connect() as conn, conn.transaction():
                if self.committed(conn, info):  # another writer won meanwhile: nothing to do
                    self.skipped_batches += 1
                    return
                if large:
                    rows = self.merge(conn, table, stored.columns, info, attempt, staged)
                else:
                    rows = self.write_rows(conn, table, stored, info)
                self.record(conn, info, rows)
                _fault("before-commit", info.batch_id)
        finally:
            stored.unpersist()

    def _stage_on_executors(self, stored: DataFrame, info: BatchInfo, attempt: str) -> int:
        stage = stage_partitions(
            self.target,
            staging_table(info.ctx.table),
            stored.columns,
            info.query_id,
            info.batch_id,
            attempt,
        )
        try:
            counts = stored.rdd.mapPartitionsWithIndex(stage).collect()
        except Exception as exc:  # a task failed: surface our own error, scrubbed
            text = scrub(str(exc), self.target.password)
            found = find_error(text)
            if found is not None:
                raise found from None
            raise SlipstreamError(
                "SINK_WRITE_FAILED",
                f"staging batch {info.batch_id} from the executors failed: {_cause(text, exc)}",
                "see the executor log; the batch is retried when the query restarts",
            ) from None
        self.parallel_batches += 1
        return sum(counts)

    # -- reading and resetting ---------------------------------------------------------------
    def read(self, spark: SparkSession, ctx: SinkContext) -> DataFrame | None:
        rows = read_table(self.target, ctx.table)
        return spark.createDataFrame(rows) if rows else None

    def reset(self, ctx: SinkContext) -> list[str]:
        with self.connect() as conn, conn.transaction():
            conn.execute(f"DROP TABLE IF EXISTS {quote_ident(ctx.table)}")
            conn.execute(f"DROP TABLE IF EXISTS {quote_ident(staging_table(ctx.table))}")
            exists = conn.execute("SELECT to_regclass(%s)", (LEDGER_TABLE,)).fetchone()
            if exists and exists[0]:
                conn.execute(f"DELETE FROM {LEDGER_TABLE} WHERE target_table = %s", (ctx.table,))
        return [f"table {ctx.table} in {self.target.describe()}"]


def read_table(target: PgTarget, table: str, order_by: str | None = None) -> list[dict[str, Any]]:
    """Rows of a table as dicts ([] when it does not exist): tests, the terminal view."""
    from psycopg.rows import dict_row

    with connect(target) as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (quote_ident(table),)).fetchone()
        if not exists or not exists[0]:
            return []
        order = f" ORDER BY {order_by}" if order_by else ""
        with conn.cursor(row_factory=dict_row) as cur:
            return list(cur.execute(f"SELECT * FROM {quote_ident(table)}{order}"))
