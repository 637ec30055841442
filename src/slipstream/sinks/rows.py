"""The database sinks in Spark's real-time mode: a ForeachWriter that upserts by key.

slipstream's JVM writer (sinks/jvm_rows.py, JDBC) does this wherever there is a JVM to hand it
to: it keeps the latest row per key and writes them as one batch and one commit every few
milliseconds. The Python writer below, whose rows reach it in batches at the epoch's end, is
kept for Spark Connect, and writes each row as it comes. Both share `upsert_statement` and the
contract:

Real-time mode (`--trigger real-time:5s`) has no micro-batches to hand to `foreachBatch`, so
the batch ledger of database.DatabaseSink cannot apply. Each task instead holds one connection for
its epoch and upserts every row as it arrives, on the output's key, in its own short
transaction:

    open(partition, epoch)   connect (the sink's `row_connection`); always True
    process(row)             INSERT ... ON CONFLICT (key) DO UPDATE SET every other column;
                             the Python writer commits at once, the JVM writer within its
                             flush interval (the key's newest row, the older ones skipped)
    close(error)             commit what is left (none after an error), close the connection

Real-time mode runs update mode only, and an update-mode row is the latest value of its key.
A replayed epoch (after a crash, Spark re-reads the same offsets) emits the same rows for the
same keys again: upserting them converges to the rows of a run without the crash, so the table
ends exact although a row may be written twice (at-least-once delivery, exact end state).
Within an epoch the rows of one key come from one partition, in order, so the last upsert of a
key (the row the JVM writer keeps) is its newest value.

The Python writer is pickled to the executors: it holds the statement, the column order and a
picklable `connect` (SQLite: the file's path; PostgreSQL: the target, password in its Secret)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from contextlib import closing
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql.streaming import DataStreamWriter

from slipstream.sinks.base import SinkContext
from slipstream.sinks.database import LEDGER_TABLE, DatabaseSink, quote_ident
from slipstream.sinks.jvm_rows import foreach_jvm, jvm_writer

log = logging.getLogger("slipstream.sinks")

#: the ledger's batch id for "this query writes here row by row" (never a real batch id)
REAL_TIME_MARK = -1


def upsert_statement(
    table: str, columns: Sequence[str], key: Sequence[str], placeholder: str
) -> str:
    """INSERT of one row that updates every non-key column of an existing key."""
    cols = ", ".join(quote_ident(c) for c in columns)
    marks = ", ".join(placeholder for _ in columns)
    keys = ", ".join(quote_ident(k) for k in key)
    updates = ", ".join(
        f"{quote_ident(c)} = excluded.{quote_ident(c)}" for c in columns if c not in key
    )
    action = f"UPDATE SET {updates}" if updates else "NOTHING"
    return (
        f"INSERT INTO {quote_ident(table)} ({cols}) VALUES ({marks}) "
        f"ON CONFLICT ({keys}) DO {action}"
    )


@dataclass
class UpsertWriter:
    """Spark's ForeachWriter contract (open, process, close), one row at a time."""

    connect: Callable[[], Any]  # a DB-API connection whose `commit` makes a row visible
    statement: str
    columns: tuple[str, ...]

    def open(self, partition_id: int, epoch_id: int) -> bool:
        self._conn = self.connect()
        return True

    def process(self, row: Any) -> None:
        values = row.asDict()
        self._conn.execute(self.statement, tuple(values[c] for c in self.columns))
        self._conn.commit()

    def close(self, error: BaseException | None) -> None:
        conn = getattr(self, "_conn", None)
        if conn is not None:
            if error is not None:
                conn.rollback()
            conn.close()


def attach_rows(
    sink: DatabaseSink, frame: DataFrame, ctx: SinkContext
) -> tuple[DataFrame, Callable[[DataStreamWriter], DataStreamWriter]]:
    """An output into a database sink, for real-time mode: the frame as the database stores
    it, the table created now (on the driver, before the query starts), and what configures
    the query's writer: `foreach` of slipstream's JVM writer (sinks/jvm_rows.py), or of an
    UpsertWriter where there is none (Spark Connect), said in a line."""
    stored = sink.row_frame(frame)
    with closing(sink.connect()) as conn:
        sink.ensure_schema(conn, ctx.table, stored.schema, ctx)
    columns = tuple(stored.columns)
    statement = upsert_statement(ctx.table, columns, ctx.key, "?")
    jvm, why = jvm_writer(sink, stored, statement, columns, ctx.key)
    if jvm is not None:
        log.info("%s: rows upserted from the JVM by key, in batches (%s)", ctx.query_name, jvm)
        return stored, foreach_jvm(jvm)
    log.warning(
        "%s: real-time rows are written by the Python ForeachWriter, whose rows wait for "
        "the epoch's end (seconds): %s",
        ctx.query_name,
        why,
    )
    writer = UpsertWriter(
        sink.row_connection(),
        upsert_statement(ctx.table, columns, ctx.key, sink.placeholder),
        columns,
    )
    return stored, lambda stream: stream.foreach(writer)


def mark_real_time(sink: DatabaseSink, ctx: SinkContext, query_id: str) -> None:
    """A ledger row (batch id -1) saying this query writes `ctx.table`: what `reset --outputs`
    reads as slipstream's mark and what tells another checkpoint's query the table is taken."""
    p = sink.placeholder
    with closing(sink.connect()) as conn, sink.transaction(conn):
        cur = conn.cursor()
        cur.execute(
            f"INSERT INTO {LEDGER_TABLE} (query_id, batch_id, pipeline, target_table, rows, "
            f"committed_at) VALUES ({p}, {p}, {p}, {p}, 0, CURRENT_TIMESTAMP) "
            "ON CONFLICT (query_id, batch_id) DO NOTHING",
            (query_id, REAL_TIME_MARK, ctx.pipeline, ctx.table),
        )
