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
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from slipstream import values
from slipstream.pipelines.base import Input, Output, Param, Params, Pipeline, not_null
from slipstream.specs import DURATION_HELP, spark_interval

SCHEMA = StructType(
    [
        StructField("id", StringType()),
        StructField("action", StringType()),
        StructField("ts", TimestampType()),
    ]
)


class MobilePipeline(Pipeline):
    name = "mobile"
    description = "mobile app actions counted per action in event-time tumbling windows"
    inputs = (
        Input(
            "actions",
            SCHEMA,
            required=("id", "action", "ts"),
            event_time="ts",
            sources=("files", "table", "kafka"),
            help="JSON lines {id, action, ts}",
        ),
    )
    params = (
        Param(
            "window",
            values.duration,
            timedelta(minutes=10),
            "length of the tumbling event-time window",
            DURATION_HELP,
            "DURATION",
        ),
        Param(
            "watermark",
            values.duration,
            timedelta(minutes=10),
            "how late an action may arrive and still count",
            DURATION_HELP,
            "DURATION",
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
    demo = "slipstream.demo:demo"

    def sample_files(self) -> list[Path]:
        """Seed 003's four files, bundled with the package."""
        folder = Path(str(resources.files("slipstream") / "data" / "mobile"))
        return [folder / f"file{i}.json" for i in range(1, 5)]

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        counts = (
            inputs["actions"]
            .withWatermark("ts", spark_interval(params.watermark))
            .groupBy(F.window("ts", spark_interval(params.window)), F.col("action"))
            .count()
        )
        counts = counts.select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "action",
            "count",
        )
        return {"counts": not_null(counts, "window_start", "action")}
