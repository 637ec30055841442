"""`DatabaseSink`: a BatchSink (sinks/base.py) for transactional databases, and the SQL names
and types the database sinks share.

Exactly-once comes from one rule: a batch's rows and a ledger row `(query_id, batch_id)` commit
in one transaction, and a batch whose ledger row exists is skipped. Spark replays a batch after
a crash with the same batch id and the same offsets (its offset log is written before the batch
runs), so skipping it is safe. A new database sink implements `connect`, `ensure_schema`,
`merge` and the ledger hooks; see `sqlite.py`.
"""

from __future__ import annotations

import logging
import re
from abc import abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext
from typing import Any, ClassVar

from pyspark.sql import DataFrame
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegralType,
    StructType,
)

from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.checkpoint.logs import query_id
from slipstream.core.words import count
from slipstream.errors import SlipstreamError
from slipstream.sinks.base import (
    BatchInfo,
    BatchSink,
    SinkContext,
    drain,
    fault_point,
    with_iso_timestamps,
)

log = logging.getLogger("slipstream.sinks")

LEDGER_TABLE = "_slipstream_batches"


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

    database = True
    real_time = True
    real_time_writer = (
        "upserted on the output's key by slipstream's JVM ForeachWriter over JDBC: the latest "
        "row per key, written as one batch and one commit every few milliseconds "
        "(slipstream.realtime.flushMs), so its database work follows the keys that change, "
        "not the events (under Spark Connect the Python one, which writes at the epoch's end; "
        "idempotent upserts by key: a replayed epoch converges to the same rows)"
    )
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
                    fault_point("before-commit", info.batch_id)
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
