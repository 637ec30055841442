"""PostgreSQL plumbing for the sink (sinks/postgres.py): where to connect and how, without
ever showing the password; the staging table; COPY from the driver and from the executors.

Executors run `stage_arrow_batches`' function (through `DataFrame.mapInArrow`, which classic
Spark and Spark Connect both offer): it takes the connection parameters (with the password,
which Spark ships inside the pickled function, never in plans or logs) and COPYs its
partition into the staging table in its own transaction."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlsplit

from pyspark.sql.types import TimestampNTZType, TimestampType

from slipstream.core.specs import Secret, SinkSpec
from slipstream.errors import SlipstreamError
from slipstream.settings.jdbc_drivers import JdbcDriver
from slipstream.sinks.database import quote_ident, sql_type

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

#: the JDBC driver of the real-time JVM writer (sinks/jvm_rows.py); a user's `postgresql-*.jar`
#: is one too
PG_DRIVER = JdbcDriver(
    "org.postgresql:postgresql:42.7.14", "org.postgresql.Driver", "org.postgresql", "postgresql-"
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


def reason(exc: BaseException, password: Secret | None) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return scrub(" / ".join(lines[:3]) or type(exc).__name__, password)


#: SQLSTATE classes a later attempt can get past: connection (08), transaction rollback such as
#: a deadlock or serialization failure (40), resources (53), operator intervention (57)
TRANSIENT_CLASSES = ("08", "40", "53", "57")


def retry_advice(exc: BaseException) -> str:
    """What a restart does about a psycopg error, said truthfully: a data or schema error
    (a value the column refuses, a constraint, a changed table) fails the same batch the same
    way on every restart."""
    state = str(getattr(exc, "sqlstate", "") or "")
    if not state or state[:2] in TRANSIENT_CLASSES:
        return "a restart retries the batch (the error is transient: nothing was committed)"
    return (
        f"a restart will fail on this batch the same way (SQLSTATE {state}: the data or the "
        "table is refused, not the connection); fix the table (or reset the output) first, "
        "see the PostgreSQL server log"
    )


def cause(text: str, exc: BaseException) -> str:
    """The innermost `SomeError: message` line of a (Python worker's) traceback."""
    lines: list[str] = re.findall(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception): .+)$", text, re.M)
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
            f"cannot connect to PostgreSQL at {target.where()}: {reason(exc, target.password)}",
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


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


#: the schema of what each staging task of `stage_arrow_batches` returns: its row count
STAGED_COUNT = "rows long"


def stage_arrow_batches(
    target: PgTarget, staging: str, columns: list[str], query_id: str, batch_id: int, attempt: str
) -> Any:
    """The function of `DataFrame.mapInArrow` each staging task runs (classic and Spark
    Connect alike: no RDD): it COPYs its partition's Arrow batches into the staging table and
    returns one row, its count. Pickled with its arguments (see the module doc)."""

    def stage(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()  # set in every Python worker of a task
        assert context is not None, "a staging function runs inside a Spark task"
        part = context.partitionId()  # stable across retries: the key of the task's rows
        first = next(batches, None)
        count = 0
        if first is not None:
            rows = _arrow_rows(_chain(first, batches))
            count = copy_partition(
                target, staging, columns, query_id, batch_id, attempt, part, rows
            )
        yield pa.RecordBatch.from_pydict({"rows": pa.array([count], pa.int64())})

    return stage


def _arrow_rows(batches: Iterable[Any]) -> Iterator[tuple[Any, ...]]:
    """Rows as tuples of Python values (the same values a `Row` holds), batch by batch."""
    for batch in batches:
        yield from zip(*(column.to_pylist() for column in batch.columns), strict=True)


def copy_partition(
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
            count = copy_rows(conn, staging, columns, (query_id, batch_id, attempt, part), rows)
        return count
    except psycopg.Error as exc:
        raise SlipstreamError(
            "SINK_WRITE_FAILED",
            f"staging partition {part} of batch {batch_id} into {staging} at {target.where()} "
            f"failed: {reason(exc, target.password)}",
            "see the PostgreSQL server log; the batch is retried when the query restarts",
        ) from None
    finally:
        conn.close()


def copy_rows(
    conn: psycopg.Connection,
    staging: str,
    columns: list[str],
    stamp: tuple[str, int, str, int],
    rows: Iterable[Any],
) -> int:
    """COPY `rows` into the staging table, each after its stamp (query id, batch id, attempt,
    partition) and its sequence number in the partition: the STAGE_COLUMNS."""
    names = ", ".join(quote_ident(c) for c in [*STAGE_COLUMNS, *columns])
    count = 0
    with conn.cursor().copy(f"COPY {quote_ident(staging)} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row((*stamp, count, *row))
            count += 1
    return count


# --- reading back ------------------------------------------------------------------------------


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


def plain(value: Any) -> Any:
    """JSON-friendly: timestamps as ISO-8601 UTC text, decimals as numbers."""
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
        return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, Decimal):
        return float(value)
    return value
