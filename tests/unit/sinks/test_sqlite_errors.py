"""SQLite write errors say truthfully whether a restart can help (issue 13), from real
sqlite3 errors: another writer holding the file passes, a refused row or a missing table does
not. No Spark: the sink's error boundary is exercised directly."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from slipstream.core.specs import SinkSpec
from slipstream.errors import SlipstreamError
from slipstream.sinks.sqlite import SqliteSink


def _error_of(sink: SqliteSink, write: Callable[[], Any]) -> SlipstreamError:
    info = SimpleNamespace(batch_id=7, ctx=SimpleNamespace(table="views"))
    with pytest.raises(SlipstreamError) as caught, sink.errors(info):  # type: ignore[arg-type]
        write()
    return caught.value


def test_sqlite_errors_say_whether_a_restart_can_help(tmp_path: Path) -> None:
    path = tmp_path / "out.db"
    sink = SqliteSink(SinkSpec("sqlite", str(path)), tmp_path / "default.db")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE views (k TEXT PRIMARY KEY)")
        conn.execute("INSERT INTO views VALUES ('a')")

    def duplicate() -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("INSERT INTO views VALUES ('a')")

    def missing_table() -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("INSERT INTO nowhere VALUES ('a')")

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer holds the file

    def busy() -> None:
        with sqlite3.connect(path, timeout=0) as conn:
            conn.execute("INSERT INTO views VALUES ('b')")

    try:
        held = _error_of(sink, busy)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    refused, missing = _error_of(sink, duplicate), _error_of(sink, missing_table)

    for error in (held, refused, missing):
        assert error.code == "SINK_WRITE_FAILED"
        assert f"SQLite {path} failed while writing batch 7 into views" in str(error)
    assert "SQLITE_BUSY" in held.fix and "a restart retries the batch" in held.fix
    for error, name in ((refused, "SQLITE_CONSTRAINT_PRIMARYKEY"), (missing, "SQLITE_ERROR")):
        assert f"a restart will fail on this batch the same way ({name}" in error.fix
