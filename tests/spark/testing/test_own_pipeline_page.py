"""docs/howto/own-pipeline.md's test block, run as the page writes it, and the page's pipeline
over more records against pandas."""

from __future__ import annotations

import json
import random
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from slipstream.testing import PipelineHarness
from tests.helpers import T0
from tests.unit.project.test_own_pipeline_page import page_namespace

pytestmark = pytest.mark.spark


def test_the_pages_test_passes(spark: SparkSession, tmp_path: Path) -> None:
    page_namespace()["test_totals"](tmp_path)  # the page's own block and its asserts


def test_the_pages_pipeline_equals_pandas(spark: SparkSession, tmp_path: Path) -> None:
    rng = random.Random(7)
    records = [
        {
            "customer": rng.choice(["c1", "c2", "c3"]),
            "amount": rng.choice([-2.5, 0.0, 1.0, 4.5, 10.0]),
            "ts": (T0 + timedelta(seconds=rng.randrange(0, 1800))).isoformat(),
        }
        for _ in range(60)
    ]
    pipeline = page_namespace()["OrdersPerCustomer"]()
    with PipelineHarness(spark, pipeline, tmp_path, sink="sqlite", mode="complete") as h:
        h.feed([json.dumps(r) for r in records])
        h.process()
        rows = h.results()
        quarantined = h.totals["orders_per_customer.totals"]["quarantined"]
    frame = pd.DataFrame(records)
    kept = frame[frame.amount > 0].copy()
    kept["window_start"] = pd.to_datetime(kept.ts).dt.floor("5min")
    expected = kept.groupby(["window_start", "customer"]).amount.sum()
    got = {(pd.Timestamp(r["window_start"]), r["customer"]): r["total"] for r in rows}
    assert got == {k: v for k, v in expected.items()}
    assert quarantined == int((frame.amount <= 0).sum())  # the `drop` rule's records
