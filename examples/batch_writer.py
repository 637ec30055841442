"""A batch writer of your own (`--sink batch:examples.batch_writer:to_sqlite`): each batch of
`mobile`'s counts into a SQLite table, idempotent by batch id (docs/howto/batch-writer.md).

    SLIPSTREAM_BATCH_DB=counts.db slipstream run mobile --mode update \
        --sink batch:examples.batch_writer:to_sqlite

In one transaction per batch it (1) replaces the batch's rows in an audit table keyed by the
batch id (delete, then insert), and (2) upserts the counts into the current table on the
output's key. Running it twice for one batch leaves both tables as once: that is what makes the
one replay slipstream's ledger cannot rule out (a crash after this function and before the
ledger's record) harmless.
"""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame

from slipstream.sinks.base import BatchInfo

DB_ENV = "SLIPSTREAM_BATCH_DB"

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS counts ("
    " window_start TEXT NOT NULL, action TEXT NOT NULL, count INTEGER NOT NULL,"
    " batch_id INTEGER NOT NULL, PRIMARY KEY (window_start, action))",
    "CREATE TABLE IF NOT EXISTS changes ("
    " query_id TEXT NOT NULL, batch_id INTEGER NOT NULL,"
    " window_start TEXT NOT NULL, action TEXT NOT NULL, count INTEGER NOT NULL)",
)


def _text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return value


def to_sqlite(frame: DataFrame, info: BatchInfo) -> None:
    """Write one batch of `mobile`'s counts; safe to call twice with the same batch id."""
    rows = [
        (_text(r["window_start"]), r["action"], int(r["count"]))
        for r in frame.select("window_start", "action", "count").collect()
    ]
    conn = sqlite3.connect(os.environ[DB_ENV], timeout=30)
    try:
        with conn:  # one transaction: committed on success, rolled back on an exception
            for statement in SCHEMA:
                conn.execute(statement)
            conn.execute(
                "DELETE FROM changes WHERE query_id = ? AND batch_id = ?",
                (info.query_id, info.batch_id),
            )
            conn.executemany(
                "INSERT INTO changes VALUES (?, ?, ?, ?, ?)",
                [(info.query_id, info.batch_id, *row) for row in rows],
            )
            conn.executemany(
                "INSERT INTO counts VALUES (?, ?, ?, ?) ON CONFLICT (window_start, action) "
                "DO UPDATE SET count = excluded.count, batch_id = excluded.batch_id",
                [(*row, info.batch_id) for row in rows],
            )
    finally:
        conn.close()
