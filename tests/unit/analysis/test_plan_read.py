"""Reading a query's shape from its analyzed plan (pure: recorded plans, no Spark).

`fixtures/plans/rate_cases.json` holds the analyzed plans Spark 4.3 printed for small queries
over the rate source (tests/fixtures/plans/record.py re-records them); the expected shapes are
what each query was written to do."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from slipstream.analysis.plan import analyzed_section, read_plan

PLANS = json.loads(
    (Path(__file__).parents[2] / "fixtures" / "plans" / "rate_cases.json").read_text()
)
MIN = timedelta(minutes=1)


def test_tumbling_window_with_watermark() -> None:
    plan = read_plan(PLANS["tumbling_wm"])
    assert plan.aggregation and plan.window == "tumbling"
    assert (plan.window_column, plan.window_length, plan.window_slide) == ("ts", 5 * MIN, None)
    assert (plan.watermark_column, plan.watermark_delay) == ("ts", 10 * MIN)
    assert plan.watermark_before_aggregation and plan.stateful


def test_sliding_window_reads_length_and_slide() -> None:
    plan = read_plan(PLANS["sliding"])
    assert plan.window == "sliding"
    assert (plan.window_length, plan.window_slide) == (10 * MIN, 1 * MIN)


def test_session_window_and_its_gap() -> None:
    plan = read_plan(PLANS["session"])
    assert plan.window == "session" and plan.window_length == 5 * MIN


def test_aggregation_without_watermark() -> None:
    plan = read_plan(PLANS["agg_nowm"])
    assert plan.aggregation and plan.window == "none" and plan.watermark_column is None


@pytest.mark.parametrize("case", ["dedup", "dedup_wm", "distinct"])
def test_deduplication_is_stateful_without_aggregation(case: str) -> None:
    plan = read_plan(PLANS[case])
    assert plan.dedup and not plan.aggregation and plan.stateful


def test_stream_static_join_is_map_like_but_not_stream_stream() -> None:
    plan = read_plan(PLANS["ss_static_join"])
    assert plan.stream_static_join and not plan.stream_stream_join and not plan.stateful


def test_stream_stream_join_and_its_watermarks() -> None:
    plan = read_plan(PLANS["ss_join"])
    assert plan.stream_stream_join and not plan.stream_static_join and plan.stateful
    assert plan.watermark_column in ("ts", "ts2")
    # k = k2 AND ts2 >= ts AND ts2 <= ts + 1 hour, both under watermarks: state is bounded
    assert (plan.stream_join_kind, plan.stream_join_bounded) == ("LeftOuter", True)


def test_limit_and_sort() -> None:
    assert read_plan(PLANS["limit"]).stream_ops == ("limit",)
    sort = read_plan(PLANS["sort_agg"])
    assert sort.stream_ops == ("sort",) and sort.ops_after_aggregation


def test_a_watermark_after_the_aggregation_is_seen_as_such() -> None:
    plan = read_plan(PLANS["wm_after_agg"])
    assert plan.aggregation and not plan.watermark_before_aggregation


def test_the_analyzed_section_is_cut_from_an_extended_explain() -> None:
    text = (
        "== Parsed Logical Plan ==\nfoo\n\n== Analyzed Logical Plan ==\nk: string\n"
        + PLANS["dedup"]
        + "\n\n== Optimized Logical Plan ==\nbar\n"
    )
    assert analyzed_section(text).strip() == PLANS["dedup"].strip()
    assert read_plan(text).dedup


def test_join_buffers_come_from_the_plans_watermarks_and_time_condition() -> None:
    """`ts2 >= ts AND ts2 <= ts + 1 hour` under watermarks of 2h (ts) and 3h (ts2): Spark keeps
    the slower one (3h). A left row can meet a right row until the watermark passes ts + 1h
    (3h + 1h behind the newest input); a right row until it passes ts2 (3h behind)."""
    hour = timedelta(hours=1)
    left, right = read_plan(PLANS["ss_join"]).join_buffers
    assert (left.column, left.offset, left.held) == ("ts", hour, 3 * hour + hour)
    assert (right.column, right.offset, right.held) == ("ts2", timedelta(0), 3 * hour)
    # seed 000's arithmetic, each input late by its own watermark: the other side's delay plus
    # how far the condition lets its time pass this side's (3h + 1h; 2h - 0)
    assert (left.own, right.own) == (3 * hour + hour, 2 * hour)
