"""Independent models of the two stream-stream joins, temperature_load and ads, for the tests:
plain Python and pandas over the lines sent, no slipstream code. Each pipeline's file test and
its Kafka test (tests/e2e/kafka/test_kafka_pipelines.py) compare the tables with these."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pandas as pd
import pytest

from tests import stream_reference as ref

HOUR = pd.Timedelta(hours=1)


# --- temperature_load ----------------------------------------------------------------------


def temperature_load_reading(stream: str, line: str) -> dict[str, Any] | None:
    """A line's valid reading (strict JSON types, a readable time), or None."""
    doc = ref.json_object(line)
    time = "temp_taken_time" if stream == "temperature" else "load_taken_time"
    if doc is None:
        return None
    value = doc.get("temp" if stream == "temperature" else "load")
    moment = ref.parse_time(doc.get(time))
    if not isinstance(doc.get("location_id"), str) or moment is None:
        return None
    return {"location_id": doc["location_id"], time: moment} if ref._number(value) else None


def temperature_load_pairs(
    temperatures: list[dict[str, Any]], loads: list[dict[str, Any]]
) -> set[tuple[str, str, str]]:
    """(location_id, temp_taken_time, load_taken_time) of every load taken at a temperature's
    location within the hour after it (both edges in), as the sink writes the times."""
    pairs = pd.DataFrame(temperatures).merge(pd.DataFrame(loads), on="location_id")
    pairs = pairs[
        (pairs["load_taken_time"] >= pairs["temp_taken_time"])
        & (pairs["load_taken_time"] <= pairs["temp_taken_time"] + HOUR)
    ]
    return {
        (p.location_id, ref.iso_exact(p.temp_taken_time), ref.iso_exact(p.load_taken_time))
        for p in pairs.itertuples()
    }


# --- ads -----------------------------------------------------------------------------------


def ads_records(stream: str, lines: list[str]) -> pd.DataFrame:
    """A stream's valid impressions or clicks (a click names its impression), each id once."""
    time = "click_time" if stream == "clicks" else "impression_time"
    rows: dict[str, dict[str, Any]] = {}
    for line in lines:
        doc = ref.json_object(line)
        ident = doc and doc.get("click_id" if stream == "clicks" else "impression_id")
        moment = doc and ref.parse_time(doc.get(time))
        linked = stream == "impressions" or isinstance(doc and doc.get("impression_id"), str)
        if (
            doc
            and isinstance(ident, str)
            and moment
            and isinstance(doc.get("ad_id"), str)
            and linked
        ):
            rows.setdefault(ident, {**doc, time: moment})  # a duplicate counts once
    return pd.DataFrame(list(rows.values()))


def check_ads(
    tables: dict[str, list[dict[str, Any]]],
    watermark: datetime | None,
    imps: pd.DataFrame,
    clicks: pd.DataFrame,
    catalog: list[dict[str, str]],
) -> None:
    """The three ads tables against pandas: attributed clicks (a click within the hour after
    its impression, same ad), every impression's outcome at most once (unclicked ones once
    the final `watermark` passed impression_time + 1h), and the campaign figures per hour."""
    attributed, outcome = tables["ad_clicks_attributed"], tables["ad_impressions_outcome"]
    pairs = imps.merge(clicks, on=["impression_id", "ad_id"], suffixes=("", "_c"))
    delay = pairs["click_time"] - pairs["impression_time"]
    pairs = pairs[(delay >= pd.Timedelta(0)) & (delay <= HOUR)]
    costs = {row["ad_id"]: row for row in catalog}
    assert {r["click_id"] for r in attributed} == set(pairs["click_id"])
    assert len(attributed) == len(pairs) > 0
    want = {
        row.click_id: (row.impression_id, row.ad_id, ref.iso_exact(row.impression_time),
                       ref.iso_exact(row.click_time), costs[row.ad_id]["campaign"],
                       float(costs[row.ad_id]["cost_per_click"]))
        for row in pairs.itertuples()
    }  # fmt: skip
    fields = ("impression_id", "ad_id", "impression_time", "click_time", "campaign")
    assert {
        r["click_id"]: (*(r[f] for f in fields), r["cost_per_click"]) for r in attributed
    } == want

    assert len({r["impression_id"] for r in outcome}) == len(outcome)
    clicked = dict(zip(pairs["impression_id"], pairs["click_id"], strict=True))
    assert {r["impression_id"]: r["click_id"] for r in outcome if r["clicked"]} == clicked
    final = min(imps["impression_time"].max() - pd.Timedelta(hours=2),
                clicks["click_time"].max() - pd.Timedelta(hours=3))  # fmt: skip
    assert watermark == final.to_pydatetime()
    unclicked = {r["impression_id"] for r in outcome if not r["clicked"]}
    due = imps["impression_time"] + HOUR < final
    assert unclicked == set(imps.loc[due, "impression_id"]) - set(clicked) != set()

    expected: dict[tuple[str, str], list[float]] = {}
    for frame, time, is_click in ((imps, "impression_time", 0), (clicks, "click_time", 1)):
        for row in frame.itertuples():
            start = ref.iso(ref.window_start(getattr(row, time), timedelta(hours=1)))
            entry = expected.setdefault((start, costs[row.ad_id]["campaign"]), [0, 0, 0.0])
            entry[is_click] += 1
            entry[2] += float(costs[row.ad_id]["cost_per_click"]) if is_click else 0.0
    got = {(r["window_start"], r["campaign"]): r for r in tables["campaign_stats"]}
    assert set(got) == set(expected)
    for key, (n_imp, n_click, revenue) in expected.items():
        assert (got[key]["impressions"], got[key]["clicks"]) == (n_imp, n_click), key
        assert got[key]["revenue"] == pytest.approx(round(revenue, 2))
        assert got[key]["ctr"] == (pytest.approx(n_click / n_imp) if n_imp else None), key
