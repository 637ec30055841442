"""The real-time ForeachWriter (sinks/rows.py) without Spark: Spark's open/process/close calls
made by hand on SQLite, with a replayed epoch and a failed one."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pyspark.sql import Row

from slipstream.sinks.rows import UpsertWriter, upsert_statement
from slipstream.sinks.sqlite import row_connect


def test_the_upsert_statement_updates_every_column_but_the_key() -> None:
    assert upsert_statement("t", ["k", "a", "n"], ["k", "a"], "?") == (
        'INSERT INTO "t" ("k", "a", "n") VALUES (?, ?, ?) '
        'ON CONFLICT ("k", "a") DO UPDATE SET "n" = excluded."n"'
    )
    assert upsert_statement("t", ["k"], ["k"], "%s").endswith('ON CONFLICT ("k") DO NOTHING')


def test_a_replayed_epoch_converges_to_the_same_rows(tmp_path: Path) -> None:
    """Each row is visible once processed (committed at once); an epoch played twice leaves
    the rows of playing it once; a failed task's last row is not half-written."""
    db = tmp_path / "out.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE counts (word TEXT, count BIGINT, PRIMARY KEY (word))")
    writer = UpsertWriter(
        lambda: row_connect(str(db)),
        upsert_statement("counts", ["word", "count"], ["word"], "?"),
        ("word", "count"),
    )
    epoch = [Row(count=1, word="cat"), Row(count=1, word="dog"), Row(count=2, word="cat")]

    def table() -> dict[str, int]:
        with sqlite3.connect(db) as conn:
            return dict(conn.execute("SELECT word, count FROM counts").fetchall())

    for _play in range(2):  # the epoch, then its replay after a crash
        assert writer.open(0, 7)
        for row in epoch:
            writer.process(row)
        assert table()["cat"] == 2  # visible before the epoch ends
        writer.close(None)
        assert table() == {"cat": 2, "dog": 1}
    writer.open(0, 8)
    writer.process(Row(count=3, word="cat"))
    writer.close(RuntimeError("task failed"))
    assert table() == {"cat": 3, "dog": 1}  # committed rows stay: the replay rewrites them
