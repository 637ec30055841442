"""A pipeline's results as the dashboard shows them: `{"title", "columns", "rows", "updated"}`.

`Pipeline.results_view(settings)` returns one of these (or None); the default reads the main
table of a SQLite sink through `sqlite_view`. Rows are lists in column order (JSON-friendly);
`updated` is when the sink last committed a batch to that table (from its ledger)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from slipstream.config import Settings
from slipstream.sinks.base import LEDGER_TABLE, quote_ident
from slipstream.sinks.sqlite import has_table, read_only

ROWS_SHOWN = 50
ResultsView = dict[str, Any]


def sqlite_database(settings: Settings) -> Path | None:
    """The database file of a `sqlite` sink, None for other sinks. `settings` resolved."""
    sink = settings.sink
    if sink is None or sink.kind != "sqlite":
        return None
    return Path(sink.target) if sink.target else settings.default_database


def sqlite_view(
    db: Path,
    table: str,
    *,
    title: str,
    order_by: str = "rowid DESC",
    limit: int = ROWS_SHOWN,
) -> ResultsView:
    """The first `limit` rows of `table` in `order_by` order; no rows while it does not exist.

    `order_by` is SQL written by the pipeline (never user input)."""
    view: ResultsView = {"title": title, "columns": [], "rows": [], "updated": None}
    with read_only(db) as conn:
        if conn is None:
            return view
        tables = {
            name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        }
        if table not in tables:
            return view
        cursor = conn.execute(
            f"SELECT * FROM {quote_ident(table)} ORDER BY {order_by} LIMIT ?", (limit,)
        )
        view["columns"] = [d[0] for d in cursor.description]
        view["rows"] = [list(row) for row in cursor.fetchall()]
        if LEDGER_TABLE in tables:
            view["updated"] = _last_commit(conn, table)
    return view


def last_commit(db: Path, table: str) -> str | None:
    """When the sink last committed a batch to `table` (ISO-8601 UTC), from its ledger."""
    with read_only(db) as conn:
        return _last_commit(conn, table) if conn and has_table(conn, LEDGER_TABLE) else None


def _last_commit(conn: sqlite3.Connection, table: str) -> str | None:
    (updated,) = conn.execute(
        f"SELECT max(committed_at) FROM {LEDGER_TABLE} WHERE target_table = ?", (table,)
    ).fetchone()
    return _iso_utc(updated)


def _iso_utc(value: Any) -> str | None:
    """SQLite's CURRENT_TIMESTAMP ('2026-01-15 09:30:00', UTC) as ISO-8601 with its zone."""
    if not isinstance(value, str) or not value:
        return None
    return value.replace(" ", "T") + ("" if value.endswith("Z") else "Z")
