"""What the SQLite sink stores for the types SQLite has no column for: decimals exactly, as
text (a NUMERIC column would round them through REAL), dates as ISO text, nested values as
JSON text. Before, a decimal failed every replay of its batch ("the batch is retried")."""

from __future__ import annotations

import sqlite3
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.core.specs import SinkSpec
from slipstream.sinks.base import BatchInfo, SinkContext
from slipstream.sinks.sqlite import SqliteSink

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("mode", ["append", "update"])
def test_sqlite_stores_decimals_exactly_and_dates_and_nested_values_as_text(
    spark: SparkSession, tmp_path: Path, mode: str
) -> None:
    exact = Decimal("12345678901234567890.123456789012345678")
    frame = spark.createDataFrame(
        [("k1", exact, date(2026, 1, 31), ["E1", "E2"], (1, "x")),
         ("k2", Decimal("-0.000000000000000001"), None, [], None)],
        "k string, amount decimal(38,18), day date, codes array<string>, "
        "pair struct<n:int,s:string>",
    )  # fmt: skip
    db = tmp_path / "out.db"
    sink = SqliteSink(SinkSpec("sqlite", str(db)), db)
    ctx = SinkContext("types", "types.out", "out", ("k",), mode, tmp_path / "cp")  # type: ignore[arg-type]
    for batch in (0, 0, 1):  # a replay of batch 0 is skipped; batch 1 writes again
        sink.write_batch(frame, BatchInfo("query-1", batch, ctx))
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            'SELECT k, amount, typeof(amount), day, codes, pair FROM "out"'
        ).fetchall()
        ledger = conn.execute("SELECT batch_id FROM _slipstream_batches").fetchall()
    assert sorted(ledger) == [(0,), (1,)]
    expected = [
        ("k1", "12345678901234567890.123456789012345678", "text", "2026-01-31", '["E1","E2"]',
         '{"n":1,"s":"x"}'),
        ("k2", "-0.000000000000000001", "text", None, "[]", None),
    ]  # fmt: skip
    assert sorted(rows) == sorted(expected * (2 if mode == "append" else 1))
    assert Decimal(rows[0][1]) in (exact, Decimal("-0.000000000000000001"))
