"""ads, seed 000's stream-stream join: the one-hour bound's edges, a click late but inside the
watermark, an unmatched impression written once only after the watermark passes, the generated
stream against pandas (attributed clicks, campaign figures), and what `check` says it buffers.

Batch boundaries are controlled (one file per stream per batch); nothing waits by sleeping."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.testing import PipelineHarness
from slipstream.tools.generators import ads as generator
from slipstream.tools.generators.streams import generate
from tests.helpers import T0, built, check_in_process, iso_at
from tests.join_reference import ads_records, check_ads

pytestmark = pytest.mark.spark


def impression(iid: str, minutes: float, ad: str = "ad001") -> str:
    return json.dumps({"impression_id": iid, "ad_id": ad, "user_id": "u1",
                       "impression_time": iso_at(minutes)})  # fmt: skip


def click(cid: str, iid: str, minutes: float, ad: str = "ad001") -> str:
    return json.dumps({"click_id": cid, "impression_id": iid, "ad_id": ad, "user_id": "u1",
                       "click_time": iso_at(minutes)})  # fmt: skip


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    path = tmp_path / "catalog.csv"
    path.write_text("ad_id,campaign,cost_per_click\nad001,spring,0.50\nad002,travel,1.25\n")
    return path


def test_a_click_one_hour_after_matches_and_one_millisecond_later_does_not(
    spark: SparkSession, tmp_path: Path, catalog: Path
) -> None:
    ms = 1 / 60_000
    h = PipelineHarness(spark, "ads", tmp_path, trigger="available-now", catalog=catalog)
    h.feed([impression("i1", 0), impression("i2", 0), impression("i3", 0, "ad002")],
           input="impressions")  # fmt: skip
    h.feed([click("c1", "i1", 60), click("c2", "i2", 60 + ms), click("c3", "i3", 0, ad="ad002"),
            click("c4", "i1", -ms), click("c5", "i3", 30, ad="ad001")],  # wrong ad: no match
           input="clicks")  # fmt: skip
    with h:
        rows = h.process()
    got = {(r["click_id"], r["impression_id"], r["campaign"], r["cost_per_click"]) for r in rows}
    assert got == {("c1", "i1", "spring", 0.5), ("c3", "i3", "travel", 1.25)}


def test_late_clicks_inside_the_watermark_match_and_unmatched_impressions_wait(
    spark: SparkSession, tmp_path: Path, catalog: Path
) -> None:
    """The watermark is the slower input's: min(newest impression - 2h, newest click - 3h). A
    click behind the newest by almost 3 hours but not behind the watermark still matches; one
    behind the watermark does not. An impression without a click is written once the watermark
    passes impression_time + 1h (a click at exactly + 1h would still match), and only once."""
    settings = {"sink": "sqlite", "catalog": catalog, "max_files_per_trigger": 1}
    ms = 1 / 60_000

    def outcome() -> dict[str, list[Any]]:
        return outcome_rows(h.results("ad_impressions_outcome"))

    with PipelineHarness(spark, "ads", tmp_path, **settings) as h:
        h.step(impressions=[impression("i1", 0), impression("i2", 0), impression("i3", 0)],
               clicks=[click("z", "none", 0)])  # fmt: skip
        h.step(impressions=[impression("x", 180)], clicks=[click("y", "none", 210)])
        assert h.watermark("ad_impressions_outcome") == T0 + timedelta(minutes=30)
        # c1: 2h50m behind the newest click, 10m ahead of the watermark: matches i1.
        # c2: 10m behind the watermark: dropped as late, so i2 stays unclicked.
        h.step(clicks=[click("c1", "i1", 40), click("c2", "i2", 20)])
        attributed = {r["click_id"]: r["impression_id"] for r in h.results()}
        assert attributed == {"c1": "i1"}
        assert outcome() == {"i1": ["c1"]}  # i2, i3: 00:00 + 1h is ahead of the watermark
        h.step(clicks=[click("y2", "none", 240 - ms)])  # watermark 00:59:59.999
        assert h.watermark("ad_impressions_outcome") == T0 + timedelta(minutes=60 - ms)
        assert outcome() == {"i1": ["c1"]}
        h.step(clicks=[click("y3", "none", 240)])  # watermark 01:00 = i2 + 1h: not passed
        assert h.watermark("ad_impressions_outcome") == T0 + timedelta(minutes=60)
        assert outcome() == {"i1": ["c1"]}
        h.step(impressions=[impression("x1", 181)], clicks=[click("y4", "none", 240 + ms)])
        assert h.watermark("ad_impressions_outcome") == T0 + timedelta(minutes=60 + ms)  # passed
        assert outcome() == {"i1": ["c1"], "i2": [None], "i3": [None]}
        h.step(impressions=[impression("x2", 600)], clicks=[click("y5", "none", 630)])
        rows = h.results("ad_impressions_outcome")
    assert outcome_rows(rows) == {i: [None] for i in ("i2", "i3", "x", "x1")} | {"i1": ["c1"]}
    assert {r["impression_id"] for r in rows if r["clicked"]} == {"i1"}


def outcome_rows(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for r in rows:
        grouped.setdefault(r["impression_id"], []).append(r["click_id"])
    return grouped


def test_the_generated_stream_against_pandas(spark: SparkSession, tmp_path: Path) -> None:
    spec = replace(generator.DEFAULTS, duration=timedelta(hours=6),
                   file_every=timedelta(hours=1), malformed=0.01, duplicates=0.01)  # fmt: skip
    workload = generator.Ads(rate=0.2, ads=6, users=300, ctr=0.2, seed=8)
    generate(spec, workload, tmp_path / "landing")
    catalog = workload.write_catalog(tmp_path / "catalog.csv")
    spans = max(int(p.stem.rsplit("-", 1)[1]) for p in (tmp_path / "landing").rglob("*.jsonl")) + 1
    settings = {"catalog": catalog, "max_files_per_trigger": 1, "sink": "sqlite"}
    with PipelineHarness(spark, "ads", tmp_path, **settings) as h:
        for span in range(spans):
            for stream in ("impressions", "clicks"):
                path = tmp_path / "landing" / stream / f"{stream}-{span:08d}.jsonl"
                h.feed(path.read_text().splitlines() if path.exists() else [], input=stream)
        h.process()
        attributed = h.results("ad_clicks_attributed")
        stats = h.results("campaign_stats")
        outcome = h.results("ad_impressions_outcome")
        watermark = h.watermark("ad_impressions_outcome")

    def lines(stream: str) -> list[str]:
        folder = tmp_path / "landing" / stream
        return [x for path in sorted(folder.glob("*.jsonl")) for x in path.read_text().splitlines()]

    tables = {"ad_clicks_attributed": attributed, "campaign_stats": stats,
              "ad_impressions_outcome": outcome}  # fmt: skip
    imps, clicks = (
        ads_records("impressions", lines("impressions")),
        ads_records("clicks", lines("clicks")),
    )
    check_ads(tables, watermark, imps, clicks, generator.read_catalog(catalog))


def test_check_prints_how_long_the_join_holds_each_side(
    spark: SparkSession, tmp_path: Path, catalog: Path
) -> None:
    """`slipstream check`, parsed by the CLI's parser, on the test session (no JVM of its own)."""
    text = check_in_process(
        spark, "ads", tmp_path, "--input", f"impressions={tmp_path / 'i'}",
        "--input", f"clicks={tmp_path / 'c'}", "--input", f"catalog={catalog}",
    )  # fmt: skip
    attributed = text.split("output      ad_clicks_attributed")[1].split("output ")[0]
    assert (
        "buffer      left (impression_time): a row is held until the watermark passes "
        "impression_time + 1h: about 4h of event time behind the newest input"
    ) in attributed
    assert (
        "buffer      right (click_time): a row is held until the watermark passes "
        "click_time: about 3h of event time behind the newest input"
    ) in attributed
    # seed 000's arithmetic, each input late by its own watermark: 3h + 1h and 2h
    assert (
        "buffer      left (impression_time): up to 4h of event time by seed 000's arithmetic "
        "(click_time's watermark 3h + the condition's 1h)"
    ) in attributed
    assert (
        "buffer      right (click_time): up to 2h of event time by seed 000's arithmetic "
        "(impression_time's watermark 2h)"
    ) in attributed
    outcome = text.split("output      ad_impressions_outcome")[1].split("output ")[0]
    assert "up to 4h" in outcome and "up to 2h" in outcome


def test_the_buffers_follow_the_watermarks_and_the_bound_in_the_plan(
    spark: SparkSession, tmp_path: Path, catalog: Path
) -> None:
    """Other flags, other figures: read from the plan Spark analyzed, not written down."""
    from slipstream.analysis.plan import plan_of
    from slipstream.pipelines.ads import AdsPipeline

    params = {"impression_watermark": "40m", "click_watermark": "90m", "within": "25m"}
    frames = built(spark, AdsPipeline(), tmp_path, params, catalog=catalog)
    minutes = timedelta(minutes=1)
    for name in ("ad_clicks_attributed", "ad_impressions_outcome"):
        left, right = plan_of(frames[name]).join_buffers
        assert (left.column, left.own, left.held) == (
            "impression_time",
            115 * minutes,
            115 * minutes,
        )
        assert (right.column, right.own, right.held) == ("click_time", 40 * minutes, 90 * minutes)


STEPS = 8  # batches of the steady stream, an hour of event time each: levelled from the fifth on


def test_the_joins_buffered_state_stops_growing_as_the_watermarks_move_on(
    spark: SparkSession, tmp_path: Path, catalog: Path
) -> None:
    """Eight hours of a steady stream, an hour of event time per batch: 6 impressions and 3
    clicks (10 minutes after theirs) each half hour. An impression is held about 4 hours and
    a click about 3 (check's arithmetic), so the join's rows level off near (4 x 12 + 3 x 6)
    from the fifth batch on while the input keeps growing: the total read from progress after
    each batch, each side from the checkpoint's state (Spark's state reader) over the last
    batches."""
    settings = {"sink": "sqlite", "catalog": catalog, "max_files_per_trigger": 1}
    join_rows, sides, fed = [], [], 0
    with PipelineHarness(spark, "ads", tmp_path, **settings) as h:
        checkpoint = str(h.prepared.outputs["ad_clicks_attributed"].ctx.checkpoint)
        for step in range(STEPS):
            halves = [(f"{step}-{half}", 60 * step + 30 * half) for half in range(2)]
            imps = [impression(f"i{k}-{n}", base + 5 * n) for k, base in halves for n in range(6)]
            clicks = [click(f"c{k}-{n}", f"i{k}-{n}", base + 5 * n + 10)
                      for k, base in halves for n in range(3)]  # fmt: skip
            h.step(impressions=imps, clicks=clicks)
            fed += len(imps) + len(clicks)
            progress = h.progress("ad_clicks_attributed")[-1]
            join_rows.append(
                sum(
                    o["numRowsTotal"]
                    for o in progress["stateOperators"]
                    if "Join" in o["operatorName"]
                )  # fmt: skip
            )
            if step >= STEPS - 3:  # the last batches, where it has levelled
                sides.append(
                    tuple(_join_side_rows(spark, checkpoint, s) for s in ("left", "right"))
                )
    attributed = h.results("ad_clicks_attributed")
    assert len(attributed) == 6 * STEPS  # every click matched, none lost to the eviction
    tail = join_rows[-4:]  # the input grows by 54 rows over these batches
    assert max(tail) <= 4 * 12 + 3 * 6 + 18, join_rows  # about 4h of impressions, 3h of clicks
    assert max(tail) - min(tail) <= 18, join_rows  # level: one batch's rows at most
    assert fed == 18 * STEPS and max(tail) < 0.6 * fed
    impressions_held, clicks_held = zip(*sides, strict=True)
    assert sum(sides[-1]) == join_rows[-1], (sides, join_rows)  # the same rows, side by side
    assert max(impressions_held) <= 4 * 12 + 12, sides  # 4h of impressions and one batch
    assert max(clicks_held) <= 3 * 6 + 6, sides  # 3h of clicks and one batch
    assert max(impressions_held) - min(impressions_held) <= 12, sides  # level
    assert max(clicks_held) - min(clicks_held) <= 6, sides
    assert min(clicks_held) > 2 * 6, sides  # held longer than the seed's 2h: Spark's one watermark


def _join_side_rows(spark: SparkSession, checkpoint: str, side: str) -> int:
    """Rows one side of the query's stream-stream join holds, in its last committed state."""
    meta = spark.read.format("state-metadata").load(checkpoint).collect()
    join = next(r["operatorId"] for r in meta if "Join" in r["operatorName"])
    reader = spark.read.format("statestore").option("operatorId", join).option("joinSide", side)
    return reader.load(checkpoint).count()
