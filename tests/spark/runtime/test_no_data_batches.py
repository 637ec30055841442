"""Batches of no data (runtime/partitions.py): a live run's upserted outputs skip the batch Spark
runs when the watermark moves; its append outputs, its queries with timers and finite runs keep
it. The choice is read from the queries the runtime builds for the real pipelines; that Spark
takes it as the runtime sets it while each query starts, from the batches of controlled runs
(one file a batch, run until idle), whose counts are checked against pandas' (mobile_counts)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.runtime import runner
from slipstream.runtime.build import build
from slipstream.runtime.partitions import NO_DATA_BATCHES
from slipstream.settings.config import load_settings
from slipstream.testing import PipelineHarness
from tests.helpers import iso_at, mobile_counts

pytestmark = pytest.mark.spark


def built(spark: SparkSession, tmp_path: Path, pipeline: str, **flags: Any) -> dict[str, Any]:
    """Each query's own settings, as the runtime builds them for a run of `pipeline`."""
    settings = load_settings(pipeline, {"state_dir": tmp_path / "state", **flags}, environ={})
    queries = build(spark, runner.prepare(settings))
    return {q.output.name: q.settings.get(NO_DATA_BATCHES) for q in queries}


def test_each_query_of_a_live_run_gets_its_own_choice(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "catalog.csv").write_text("article_id,title,section,published_at\na1,T,s,\n")
    trending = {
        "input": [str(tmp_path / "in"), f"catalog={tmp_path / 'catalog.csv'}"],
        "sink": ["sqlite", f"archive=parquet:{tmp_path / 'archive'}"],
    }
    live = built(spark, tmp_path / "live", "trending", **trending)
    assert live == {"views": "false", "archive": None}  # update mode skips; append keeps
    finite = built(spark, tmp_path / "finite", "trending", trigger="available-now", **trending)
    assert finite == {"views": None, "archive": None}
    # activity: its status query keeps timers (transformWithState), in update mode
    actions = {"input": str(tmp_path / "in")}
    assert built(spark, tmp_path / "activity", "activity", **actions)["user_status"] is None


def action(n: int, minutes: float) -> str:
    return json.dumps({"id": f"p{n}", "action": "open", "ts": iso_at(minutes)})


@pytest.mark.parametrize("no_data", ["true", "false"])
def test_a_query_started_without_batches_of_no_data_runs_none_and_counts_the_same(
    spark: SparkSession, tmp_path: Path, no_data: str
) -> None:
    """mobile in update mode, two files an hour of event time apart: the second moves the
    watermark past the first file's window, which a batch of no data would evict at once."""
    files = [[action(n, 1 + n / 10) for n in range(5)], [action(n, 61 + n / 10) for n in range(3)]]
    conf = {NO_DATA_BATCHES: no_data}
    with PipelineHarness(
        spark, "mobile", tmp_path, sink="sqlite", mode="update", max_files_per_trigger=1, conf=conf
    ) as h:
        for lines in files:
            h.feed(lines)
            h.process()
        got = sorted((r["window_start"], r["action"], r["count"]) for r in h.results())
        # the batches that ran, not Spark's idle reports (0 rows), which a loaded machine can
        # leave between two files
        rows_read = [p["numInputRows"] for p in h.progress("counts")]
    sent = [line for lines in files for line in lines]
    assert got == sorted(mobile_counts(sent).itertuples(index=False, name=None))
    assert sum(rows_read) == len(sent)
    assert (0 in rows_read) is (no_data == "true")
