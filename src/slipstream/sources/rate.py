"""Spark's rate source: (timestamp, value) rows at a fixed rate; for load tests and demos."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, register, spark_stream

if TYPE_CHECKING:
    from slipstream.settings.config import Settings


@register
class RateSource(Source):
    kind = "rate"

    def describe(self, settings: Settings, binding: Binding) -> str:
        return f"rate {settings.rows_per_second} rows/s"

    def read(self, spark: SparkSession, settings: Settings, binding: Binding) -> RawInput:
        raw = spark_stream(spark, "rate", {"rowsPerSecond": settings.rows_per_second})
        frame = raw.withColumn(SOURCE, F.lit("rate"))
        return RawInput(frame, "typed", True)
