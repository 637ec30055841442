"""The files source's `--latest-first` (Spark's `latestFirst`): with a backlog and one file a
batch, the newest file is read first."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.testing import PipelineHarness

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("latest_first", [True, False])
def test_a_backlog_is_read_newest_file_first_with_latest_first(
    spark: SparkSession, tmp_path: Path, latest_first: bool
) -> None:
    """Three files landed before the run, one word each; a batch reads one file. The words
    each complete-mode batch holds say which file it read: by modification time, newest
    first with latest_first, oldest first without."""
    harness = PipelineHarness(
        spark, "wordcount", tmp_path, mode="complete", max_files_per_trigger=1,
        latest_first=latest_first,
    )  # fmt: skip
    landed = [harness.feed([f"w{k}"]) for k in range(3)]  # before the run starts
    with harness as h:
        h.process()
        assert h.collector is not None
        batches = h.collector.batches
        read = [
            {r["word"] for r in batches[b]} - {r["word"] for r in batches.get(b - 1, [])}
            for b in sorted(batches)
        ]
    by_time = sorted(landed, key=lambda p: os.stat(p).st_mtime, reverse=latest_first)
    assert read == [{p.read_text().strip()} for p in by_time]
