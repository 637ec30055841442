"""mobile, seed 003's action counts, over what `generate mobile` writes: every window's count
against an independent replay of the generated files (one micro-batch each), with the
generator's malformed records quarantined and its late ones dropped."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.testing import PipelineHarness
from slipstream.tools.generators import mobile
from slipstream.tools.generators.streams import StreamSpec, generate
from tests import stream_reference as ref
from tests.helpers import landed_batches

WINDOW = WATERMARK = timedelta(minutes=10)


@pytest.mark.spark
def test_every_window_of_generated_actions_equals_an_independent_replay(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = StreamSpec(
        duration=timedelta(minutes=36), seed=4, file_every=timedelta(minutes=3),
        watermark=WATERMARK, window=WINDOW,
        out_of_order=0.1, late=0.05, duplicates=0.02, malformed=0.03,
    )  # fmt: skip
    report = generate(spec, mobile.Phones(devices=20, rate=0.5), tmp_path / "landing")
    batches = landed_batches(tmp_path / "landing", "actions")
    with PipelineHarness(
        spark, "mobile", tmp_path, sink="sqlite", mode="update", max_files_per_trigger=1
    ) as h:
        for lines in batches:
            h.feed(lines)
        h.process()
        got = {(r["window_start"], r["action"]): r["count"] for r in h.results()}
        totals = h.totals["mobile.counts"]
    kept, stats = ref.counted(batches, ref.mobile_action, "ts", None, WATERMARK, WINDOW)
    want = Counter((ref.iso(ref.window_start(r["ts"], WINDOW)), r["action"]) for r in kept)
    counts = report.streams["actions"]
    assert stats["invalid"] == counts.malformed > 0 and stats["late"] == counts.late > 0
    assert totals["quarantined"] == counts.malformed
    assert got == dict(want)
    assert {a for _, a in got} == {"open", "swipe", "close", "crash"}
