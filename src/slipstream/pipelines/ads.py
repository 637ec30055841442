"""Ad impressions and clicks (seed 000's stream-stream join): clicks attributed to their
impressions, every impression's outcome, and hourly campaign figures.

Inputs: `impressions` ({"impression_id", "ad_id", "user_id", "impression_time"}), `clicks`
({"click_id", "impression_id", "ad_id", "user_id", "click_time"}) and the static `catalog`
CSV (`ad_id,campaign,cost_per_click`); `slipstream generate ads` writes all three.

    impressions.withWatermark(impression_time, 2 hours)   --impression-watermark
               .dropDuplicatesWithinWatermark(impression_id)
    clicks.withWatermark(click_time, 3 hours)             --click-watermark
          .dropDuplicatesWithinWatermark(click_id)
    JOIN ON impression_id AND ad_id
        AND click_time BETWEEN impression_time AND impression_time + 1 hour   --within

ad_clicks_attributed    the inner join, with campaign and cost per click from the catalog
                        (stream-static, broadcast): each click once, append.
ad_impressions_outcome  the left outer join: every impression with its click, or with none
                        once the watermark proves no click can still come. Append.
campaign_stats          per campaign and hour (`--window`): impressions (by impression time),
                        clicks and revenue (by click time), ctr = clicks / impressions; upserted
                        (update mode) into the serving sink. It reads both streams as one
                        (a union under a 3-hour watermark), not the join: a join of two streams
                        only appends, and these figures change as late rows come.

`check ads` prints how long the join holds each side, read from the plan (analysis/joins.py). Seed
000's arithmetic, each input late by its own watermark: impressions up to 4h (a click may be
3h late and 1h after its impression), clicks up to 2h (an impression may be 2h late). Spark
keeps one watermark for the query, the slower input's (clicks: newest - 3h), so it holds an
impression until that passes impression_time + 1h (about 4h behind the newest input) and a
click until it passes click_time (about 3h): clicks an hour longer than the seed says."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import (
    check_windows,
    not_null,
    spark_interval,
    watermarked,
    window_bounds,
)
from slipstream.api.pipeline import Input, Output, Params, Pipeline, duration_param, event_stream
from slipstream.api.schema import check_csv_header, parse_ddl

IMPRESSIONS = parse_ddl(
    "impression_id STRING, ad_id STRING, user_id STRING, impression_time TIMESTAMP"
)
CLICKS = parse_ddl(
    "click_id STRING, impression_id STRING, ad_id STRING, user_id STRING, click_time TIMESTAMP"
)
CATALOG = parse_ddl("ad_id STRING, campaign STRING, cost_per_click DOUBLE")


class AdsPipeline(Pipeline):
    name = "ads"
    description = "ad clicks attributed to their impressions, impression outcomes, campaign figures"
    inputs = (
        event_stream(
            "impressions",
            IMPRESSIONS,
            "impression_time",
            ("impression_id", "ad_id", "impression_time"),
        ),
        event_stream(
            "clicks", CLICKS, "click_time", ("click_id", "impression_id", "ad_id", "click_time")
        ),
        Input(
            "catalog",
            CATALOG,
            format="csv",
            static=True,
            help="the ad catalog CSV (ad_id,campaign,cost_per_click)",
        ),
    )
    params = (
        duration_param(
            "impression_watermark", timedelta(hours=2), "how late an impression may come"
        ),
        duration_param("click_watermark", timedelta(hours=3), "how late a click may come"),
        duration_param(
            "within", timedelta(hours=1), "how long after its impression a click counts"
        ),
        duration_param("window", timedelta(hours=1), "campaign_stats' window"),
    )
    outputs = (
        Output(
            "ad_clicks_attributed",
            key=("click_id",),
            modes=("append",),
            help="each click joined to its impression, with campaign and cost per click",
        ),
        Output(
            "ad_impressions_outcome",
            key=("impression_id",),
            modes=("append",),
            help="every impression with its click or none, once final",
        ),
        Output(
            "campaign_stats",
            key=("window_start", "campaign"),
            modes=("update", "complete", "append"),
            help="impressions, clicks, ctr and revenue per campaign and hour",
        ),
    )
    results_order = ("click_time DESC", "latest clicks first")

    def validate(self, params: Params, paths: Mapping[str, Path | None]) -> None:
        check_windows(params.window, None)
        catalog = paths["catalog"]
        assert catalog is not None  # the runner refuses a missing table input first
        what = "the ad catalog CSV (`slipstream generate ads` writes one)"
        check_csv_header(catalog, "catalog", CATALOG, what)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        impressions = watermarked(
            inputs["impressions"],
            "impression_time",
            params.impression_watermark,
            unique=("impression_id",),
        )
        clicks = watermarked(
            inputs["clicks"], "click_time", params.click_watermark, unique=("click_id",)
        ).select(
            "click_id",
            F.col("impression_id").alias("clicked_impression_id"),
            F.col("ad_id").alias("clicked_ad_id"),
            "click_time",
        )
        condition = F.expr(
            "impression_id = clicked_impression_id AND ad_id = clicked_ad_id AND "
            "click_time >= impression_time AND "
            f"click_time <= impression_time + INTERVAL {spark_interval(params.within)}"
        )
        catalog = F.broadcast(inputs["catalog"])
        attributed = (
            impressions.join(clicks, condition, "inner")
            .join(catalog, on="ad_id", how="left")
            .select(
                "click_id",
                "impression_id",
                "ad_id",
                "user_id",
                "impression_time",
                "click_time",
                "campaign",
                "cost_per_click",
            )  # fmt: skip
        )
        outcome = impressions.join(clicks, condition, "left_outer").select(
            "impression_id", "ad_id", "user_id", "impression_time", "click_id", "click_time",
            F.col("click_id").isNotNull().alias("clicked"),
        )  # fmt: skip
        return {
            "ad_clicks_attributed": attributed,
            "ad_impressions_outcome": outcome,
            "campaign_stats": not_null(
                campaign_stats(inputs, catalog, params), "window_start", "campaign"
            ),
        }


def campaign_stats(
    inputs: Mapping[str, DataFrame], catalog: DataFrame, params: Params
) -> DataFrame:
    """Impressions and clicks as one stream of events, deduplicated by id, per campaign and
    window of their own event time."""
    events = (
        inputs["impressions"]
        .select(
            F.col("impression_id").alias("event_id"),
            "ad_id",
            F.col("impression_time").alias("event_time"),
            F.lit(0).alias("is_click"),
        )
        .unionByName(
            inputs["clicks"].select(
                F.col("click_id").alias("event_id"),
                "ad_id",
                F.col("click_time").alias("event_time"),
                F.lit(1).alias("is_click"),
            )
        )
        .withWatermark(
            "event_time", spark_interval(max(params.impression_watermark, params.click_watermark))
        )
        .dropDuplicatesWithinWatermark(["event_id", "is_click"])
        .join(catalog, on="ad_id", how="left")
    )
    stats = events.groupBy(
        F.window("event_time", spark_interval(params.window)), F.col("campaign")
    ).agg(
        F.sum(1 - F.col("is_click")).alias("impressions"),
        F.sum("is_click").alias("clicks"),
        F.sum(F.when(F.col("is_click") == 1, F.col("cost_per_click")).otherwise(0.0)).alias(
            "revenue"
        ),
    )
    return stats.select(
        *window_bounds(),
        "campaign",
        "impressions",
        "clicks",
        F.when(F.col("impressions") > 0, F.col("clicks") / F.col("impressions")).alias("ctr"),
        F.round("revenue", 2).alias("revenue"),
    )
