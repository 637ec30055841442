"""Mobile app actions (seed 003): counts per action in event-time tumbling windows.

Input `actions`: JSON lines {"id", "action", "ts"}; `ts` is ISO-8601, no zone means UTC.

    withWatermark(ts, W)                           W = --watermark (10m)
    groupBy(window(ts, L), action).count()         L = --window (10m), tumbling"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from importlib import resources
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import not_null, spark_interval, watermarked, window_bounds
from slipstream.api.pipeline import Output, Params, Pipeline, duration_param, event_stream


class MobilePipeline(Pipeline):
    name = "mobile"
    description = "mobile app actions counted per action in event-time tumbling windows"
    inputs = (
        event_stream(
            "actions", "id STRING, action STRING, ts TIMESTAMP", "ts", ("id", "action", "ts")
        ),
    )
    params = (
        duration_param("window", timedelta(minutes=10), "length of the tumbling event-time window"),
        duration_param(
            "watermark", timedelta(minutes=10), "how late an action may arrive and still count"
        ),
    )
    outputs = (
        Output(
            "counts",
            table="mobile_action_counts",
            key=("window_start", "action"),
            modes=("update", "complete", "append"),
            help="actions per window and action",
        ),
    )
    results_order = ("window_start DESC, action", "latest windows first")

    def sample_files(self) -> list[Path]:
        """Seed 003's four files, bundled with the package."""
        folder = Path(str(resources.files("slipstream") / "data" / "mobile"))
        return [folder / f"file{i}.json" for i in range(1, 5)]

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        actions = watermarked(inputs["actions"], "ts", params.watermark)
        counts = actions.groupBy(F.window("ts", spark_interval(params.window)), "action").count()
        counts = counts.select(
            *window_bounds(),
            "action",
            "count",
        )
        return {"counts": not_null(counts, "window_start", "action")}
