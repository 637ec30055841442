"""ads, seed 000's stream-stream join: the one-hour bound's edges, a click late but inside the
watermark, an unmatched impression written once only after the watermark passes, the generated
stream against pandas (attributed clicks, campaign figures), and what `check` says it buffers.

Batch boundaries are controlled (one file per stream per batch); nothing waits by sleeping."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from slipstream.generators import ads as generator
from slipstream.generators.streams import generate
from slipstream.testing import PipelineHarness
from tests import stream_reference as ref

pytestmark = pytest.mark.spark

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _at(minutes: float) -> str:
    moment = T0 + timedelta(milliseconds=round(minutes * 60_000))
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def impression(iid: str, minutes: float, ad: str = "ad001") -> str:
    return json.dumps({"impression_id": iid, "ad_id": ad, "user_id": "u1",
                       "impression_time": _at(minutes)})  # fmt: skip


def click(cid: str, iid: str, minutes: float, ad: str = "ad001") -> str:
    return json.dumps({"click_id": cid, "impression_id": iid, "ad_id": ad, "user_id": "u1",
                       "click_time": _at(minutes)})  # fmt: skip


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
    """The watermark is the slower input's: min(newest impression - 2h, newest click - 3h)."""
    settings = {"sink": "sqlite", "catalog": catalog, "max_files_per_trigger": 1}
    with PipelineHarness(spark, "ads", tmp_path, **settings) as h:
        h.feed([impression("i1", 0), impression("i2", 0)], input="impressions")
        h.feed([click("z", "none", 0)], input="clicks")
        h.process()
        # newest impression 03:00, newest click 03:30: watermark min(01:00, 00:30) = 00:30
        h.feed([impression("x", 180)], input="impressions")
        h.feed([click("c1", "i1", 40), click("y", "none", 210)], input="clicks")  # c1 late
        h.process()
        outcome = {r["impression_id"]: r for r in h.results("ad_impressions_outcome")}
        assert "i2" not in outcome  # 00:00 + 1h is not yet behind the watermark
        assert outcome["i1"]["click_id"] == "c1"  # matched although it came late
        # newest impression 05:00, newest click 05:30: watermark 02:30, past i2's 01:00
        h.feed([impression("x2", 300)], input="impressions")
        h.feed([click("y2", "none", 330)], input="clicks")
        h.process()
        h.feed([impression("x3", 600)], input="impressions")
        h.feed([click("y3", "none", 630)], input="clicks")
        h.process()
        rows = h.results("ad_impressions_outcome")
    i2 = [r for r in rows if r["impression_id"] == "i2"]
    assert len(i2) == 1 and i2[0]["click_id"] is None and not i2[0]["clicked"]
    assert [r["click_id"] for r in rows if r["impression_id"] == "i1"] == ["c1"]


def test_the_generated_stream_against_pandas(spark: SparkSession, tmp_path: Path) -> None:
    spec = replace(generator.DEFAULTS, duration=timedelta(hours=6),
                   file_every=timedelta(minutes=30), malformed=0.01, duplicates=0.01)  # fmt: skip
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

    def records(stream: str, time: str) -> pd.DataFrame:
        rows: dict[str, dict[str, Any]] = {}
        for path in sorted((tmp_path / "landing" / stream).glob("*.jsonl")):
            for line in path.read_text().splitlines():
                doc = ref.json_object(line)
                ident = doc and doc.get("click_id" if stream == "clicks" else "impression_id")
                moment = doc and ref.parse_time(doc.get(time))
                linked = stream == "impressions" or isinstance(
                    doc and doc.get("impression_id"), str
                )
                if (
                    doc
                    and isinstance(ident, str)
                    and moment
                    and isinstance(doc.get("ad_id"), str)
                    and linked
                ):
                    rows.setdefault(ident, {**doc, time: moment})  # a duplicate counts once
        return pd.DataFrame(list(rows.values()))

    imps, clicks = records("impressions", "impression_time"), records("clicks", "click_time")
    pairs = imps.merge(clicks, on=["impression_id", "ad_id"], suffixes=("", "_c"))
    delay = pairs["click_time"] - pairs["impression_time"]
    pairs = pairs[(delay >= pd.Timedelta(0)) & (delay <= pd.Timedelta(hours=1))]
    assert {r["click_id"] for r in attributed} == set(pairs["click_id"])
    assert len(attributed) == len(pairs) > 0

    # every impression at most once: with its click, or (once final) with none
    assert len({r["impression_id"] for r in outcome}) == len(outcome)
    clicked = dict(zip(pairs["impression_id"], pairs["click_id"], strict=True))
    assert {r["impression_id"]: r["click_id"] for r in outcome if r["clicked"]} == clicked
    final = min(imps["impression_time"].max() - pd.Timedelta(hours=2),
                clicks["click_time"].max() - pd.Timedelta(hours=3))  # fmt: skip
    unclicked = {r["impression_id"] for r in outcome if not r["clicked"]}
    due = imps["impression_time"] + pd.Timedelta(hours=1, minutes=1) < final
    assert set(imps.loc[due, "impression_id"]) - set(clicked) <= unclicked
    assert unclicked <= set(imps["impression_id"]) - set(clicked) and unclicked

    costs = {row["ad_id"]: row for row in generator.read_catalog(catalog)}
    expected: dict[tuple[str, str], list[float]] = {}
    for frame, time, is_click in ((imps, "impression_time", 0), (clicks, "click_time", 1)):
        for row in frame.itertuples():
            start = ref.iso(ref.window_start(getattr(row, time), timedelta(hours=1)))
            entry = expected.setdefault((start, costs[row.ad_id]["campaign"]), [0, 0, 0.0])
            entry[is_click] += 1
            entry[2] += float(costs[row.ad_id]["cost_per_click"]) if is_click else 0.0
    got = {(r["window_start"], r["campaign"]): r for r in stats}
    assert set(got) == set(expected)
    for key, (n_imp, n_click, revenue) in expected.items():
        assert (got[key]["impressions"], got[key]["clicks"]) == (n_imp, n_click), key
        assert got[key]["revenue"] == pytest.approx(round(revenue, 2))


def test_check_prints_how_long_the_join_holds_each_side(tmp_path: Path, catalog: Path) -> None:
    from tests.helpers import slipstream

    for name in ("i", "c"):
        (tmp_path / name).mkdir()
    result = slipstream(
        "check", "ads", "--input", f"impressions={tmp_path / 'i'}",
        "--input", f"clicks={tmp_path / 'c'}", "--input", f"catalog={catalog}",
        "--state-dir", str(tmp_path / "st"), timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    attributed = result.stdout.split("output      ad_clicks_attributed")[1].split("output ")[0]
    assert (
        "buffer      left (impression_time): a row is held until the watermark passes "
        "impression_time + 1h: about 4h of event time behind the newest input"
    ) in attributed
    assert (
        "buffer      right (click_time): a row is held until the watermark passes "
        "click_time: about 3h of event time behind the newest input"
    ) in attributed


def test_the_joins_buffered_state_stops_growing_as_the_watermarks_move_on(
    spark: SparkSession, tmp_path: Path, catalog: Path
) -> None:
    """Ten hours of a steady stream, 30 minutes of event time per batch: 6 impressions and 3
    clicks (10 minutes after theirs) each. An impression is held about 4 hours and a click
    about 3 (check's arithmetic), so the join's rows level off near (4 x 12 + 3 x 6) while the
    input keeps growing; read from progress after each batch."""
    settings = {"sink": "sqlite", "catalog": catalog, "max_files_per_trigger": 1}
    join_rows, fed = [], 0
    with PipelineHarness(spark, "ads", tmp_path, **settings) as h:
        for step in range(20):
            base = 30 * step
            imps = [impression(f"i{step}-{n}", base + 5 * n) for n in range(6)]
            clicks = [click(f"c{step}-{n}", f"i{step}-{n}", base + 5 * n + 10) for n in range(3)]
            h.step(impressions=imps, clicks=clicks)
            fed += len(imps) + len(clicks)
            progress = h.run.queries["ad_clicks_attributed"].lastProgress  # type: ignore[union-attr]
            join_rows.append(
                sum(
                    o["numRowsTotal"]
                    for o in progress["stateOperators"]
                    if "Join" in o["operatorName"]
                )  # fmt: skip
            )
        attributed = h.results("ad_clicks_attributed")
    assert len(attributed) == 60  # every click matched, none lost to the eviction
    tail = join_rows[-8:]
    assert max(tail) <= 4 * 12 + 3 * 6 + 9, join_rows  # about 4h of impressions, 3h of clicks
    assert max(tail) - min(tail) <= 9, join_rows  # level: one batch's rows at most
    assert fed == 180 and max(tail) < fed / 2
