"""Mobile app actions (seed 003): counts per action in event-time tumbling windows.

Input: JSON lines {"id", "action", "ts"}; `ts` is ISO-8601, no zone means UTC."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from slipstream.config import Settings
from slipstream.pipelines.base import Pipeline
from slipstream.plan import Plan
from slipstream.specs import format_duration, spark_interval


class MobilePipeline(Pipeline):
    name = "mobile"
    description = "mobile app actions counted per action in event-time tumbling windows"
    output = "mobile_action_counts"
    key = ("window_start", "action")
    modes = ("update", "complete", "append")
    sources = ("files", "table", "kafka")
    input_format = "json"
    schema = StructType(
        [
            StructField("id", StringType()),
            StructField("action", StringType()),
            StructField("ts", TimestampType()),
        ]
    )
    required = ("id", "action", "ts")
    defaults = {"window": timedelta(minutes=10), "watermark": timedelta(minutes=10)}

    def results_view(self, settings: Settings) -> dict[str, Any] | None:
        return self.sqlite_results(settings, "window_start DESC, action", "latest windows first")

    def plan(self, settings: Settings) -> Plan:
        assert settings.window and settings.watermark
        return Plan(
            steps=(
                f"withWatermark(ts, {format_duration(settings.watermark)})",
                f"groupBy(window(ts, {format_duration(settings.window)}), action).count()",
            ),
            aggregation=True,
            window="tumbling",
            window_column="ts",
            window_length=settings.window,
            watermark_column="ts",
            watermark_delay=settings.watermark,
        )

    def transform(self, records: DataFrame, settings: Settings, spark: SparkSession) -> DataFrame:
        assert settings.window and settings.watermark
        counts = (
            records.withWatermark("ts", spark_interval(settings.watermark))
            .groupBy(F.window("ts", spark_interval(settings.window)), F.col("action"))
            .count()
        )
        return counts.select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "action",
            "count",
        )
