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


def test_a_full_database_is_said_as_a_full_disk_naming_its_folder(tmp_path: Path) -> None:
    # SQLite's own SQLITE_FULL, from a real write past the file's page limit
    path = tmp_path / "out.db"
    sink = SqliteSink(SinkSpec("sqlite", str(path)), tmp_path / "default.db")

    def past_the_limit() -> None:
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE views (k TEXT)")
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {pages}")
            conn.executemany("INSERT INTO views VALUES (?)", [("x" * 1000,)] * 100)

    error = _error_of(sink, past_the_limit)
    assert error.code == "DISK_FULL", error
    assert str(tmp_path) in error.message and "SQLITE_FULL" in error.message
    assert "free space on the disk that holds" in error.fix


def test_an_io_error_is_a_full_disk_only_when_the_disk_has_no_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = SqliteSink(SinkSpec("sqlite", str(tmp_path / "out.db")), tmp_path / "default.db")
    io_error = sqlite3.OperationalError("disk I/O error")
    io_error.sqlite_errorname = "SQLITE_IOERR_WRITE"  # type: ignore[attr-defined]

    def fails() -> None:
        raise io_error

    usage = SimpleNamespace(total=400 * 1024, used=400 * 1024, free=0)
    monkeypatch.setattr("slipstream.sinks.sqlite.shutil.disk_usage", lambda _: usage)
    assert _error_of(sink, fails).code == "DISK_FULL"
    roomy = SimpleNamespace(total=2**30, used=0, free=2**30)
    monkeypatch.setattr("slipstream.sinks.sqlite.shutil.disk_usage", lambda _: roomy)
    assert _error_of(sink, fails).code == "SINK_WRITE_FAILED"


def test_outputs_opening_one_new_file_at_once_all_connect(tmp_path: Path) -> None:
    """The first batches of several outputs open one new database file at the same moment:
    each connection switches it to WAL, which takes a lock SQLite does not wait for. Without
    the sink's retry about one round in ten failed with "database is locked" here."""
    import threading

    failures: list[str] = []

    def first_batch(path: Path, gate: threading.Barrier) -> None:
        sink = SqliteSink(SinkSpec("sqlite", str(path)), tmp_path / "default.db")
        gate.wait()
        try:
            conn = sink.connect()
            conn.execute("CREATE TABLE IF NOT EXISTS t (a)")
            conn.close()
        except sqlite3.Error as exc:
            failures.append(str(exc))

    for round_ in range(60):
        gate = threading.Barrier(3)
        path = tmp_path / f"round-{round_}.db"
        threads = [threading.Thread(target=first_batch, args=(path, gate)) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert failures == []
