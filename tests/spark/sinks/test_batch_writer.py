"""`--sink batch:module:attr` (issue 42 item 4): a user's function per micro-batch, through
slipstream's BatchSink plumbing, with a ledger so a replayed batch is not applied twice.

The writer is examples/batch_writer.py: `mobile`'s counts into SQLite, idempotent by batch id.
The table is compared with pandas over the same input (tests/helpers.py `mobile_counts`)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from examples.batch_writer import DB_ENV
from pyspark.sql import SparkSession

from slipstream.pipelines import get_pipeline
from slipstream.sinks.base import BatchInfo, checkpoint_query_id
from slipstream.sinks.batch import LEDGER, BatchFunctionSink
from slipstream.testing import PipelineHarness
from tests.helpers import mobile_counts

pytestmark = pytest.mark.spark

SINK = "batch:examples.batch_writer:to_sqlite"


def _table(db: Path, sql: str) -> pd.DataFrame:
    with sqlite3.connect(db) as conn:
        return pd.read_sql_query(sql, conn)


def test_a_batch_writer_writes_each_batch_once_and_a_replay_is_not_doubled(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "counts.db"
    monkeypatch.setenv(DB_ENV, str(db))
    lines: list[str] = []
    with PipelineHarness(spark, "mobile", tmp_path, sink=SINK, mode="update") as h:
        for sample in get_pipeline("mobile").sample_files():
            text = sample.read_text()
            lines += [line for line in text.splitlines() if line.strip()]
            h.feed(text)
            h.process()
        out = h.prepared.primary
        sink = out.sink
    assert isinstance(sink, BatchFunctionSink)

    counts = _table(db, "SELECT window_start, action, count FROM counts")
    expected = mobile_counts(lines)
    pd.testing.assert_frame_equal(
        counts.sort_values(["window_start", "action"]).reset_index(drop=True),
        expected,
        check_dtype=False,
    )
    query_id = checkpoint_query_id(out.ctx.checkpoint)
    ledger = sorted(p.name for p in (out.ctx.checkpoint / LEDGER).iterdir())
    changes = _table(db, "SELECT * FROM changes ORDER BY batch_id, window_start, action")
    written = sorted(set(changes["batch_id"]))
    assert written and all(q == query_id for q in changes["query_id"])
    assert {f"{query_id}-{b:010d}" for b in written} <= set(ledger)  # every write recorded

    # a replay of the last batch: the same rows, the same batch id
    last = int(written[-1])
    rows = changes[changes["batch_id"] == last][["window_start", "action", "count"]]
    frame = spark.createDataFrame(rows.astype({"count": "int64"}))
    info = BatchInfo(query_id, last, out.ctx)
    sink.write_batch(frame, info)  # found in the ledger: skipped
    assert sink.skipped_batches == 1
    pd.testing.assert_frame_equal(
        _table(db, "SELECT * FROM changes ORDER BY batch_id, window_start, action"), changes
    )

    # the crash window: written, then killed before the ledger's record. The batch runs
    # again, and the writer, idempotent by batch id, leaves the tables as they were
    (out.ctx.checkpoint / LEDGER / f"{query_id}-{last:010d}").unlink()
    sink.write_batch(frame, info)
    assert sink.skipped_batches == 1
    again = _table(db, "SELECT * FROM changes ORDER BY batch_id, window_start, action")
    pd.testing.assert_frame_equal(again, changes)
    pd.testing.assert_frame_equal(
        _table(db, "SELECT window_start, action, count FROM counts")
        .sort_values(["window_start", "action"])
        .reset_index(drop=True),
        expected,
        check_dtype=False,
    )
    assert (out.ctx.checkpoint / LEDGER / f"{query_id}-{last:010d}").exists()
