"""`--query-name` through a real run (issue 42 item 3): Spark's query carries the given name,
and the monitor (the totals, the event log) still counts it as slipstream's `mobile.counts`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.pipelines import get_pipeline
from slipstream.testing import PipelineHarness

pytestmark = pytest.mark.spark


def test_a_renamed_query_runs_under_its_name_and_is_monitored_as_its_output(
    spark: SparkSession, tmp_path: Path
) -> None:
    lines = 0
    named = {"counts": "lake_counts"}
    with PipelineHarness(spark, "mobile", tmp_path, mode="update", query_name=named) as h:
        for sample in get_pipeline("mobile").sample_files():
            text = sample.read_text()
            lines += len([line for line in text.splitlines() if line.strip()])
            h.feed(text)
            h.process()
        active = {q.name for q in spark.streams.active}
        totals = h.totals
        event_log = h.settings.event_log
    assert "lake_counts" in active and "mobile.counts" not in active
    assert totals["mobile.counts"]["rows"] == lines
    records = [json.loads(line) for line in event_log.read_text().splitlines()]
    progress = [r["query"] for r in records if r.get("event") == "progress"]
    assert "mobile.counts" in progress and "lake_counts" not in progress
