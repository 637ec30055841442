"""Spark's rate source: (timestamp, value) rows at a fixed rate; for load tests and demos."""

from __future__ import annotations

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.core import values
from slipstream.core.options import Option
from slipstream.ingest.parse import SOURCE
from slipstream.sources.base import Binding, RawInput, Source, SourceOptions, spark_stream


class RateSource(Source):
    kind = "rate"
    continuous = True
    options = (
        Option(
            "rows_per_second",
            values.positive_int,
            "rows per second of the rate source",
            f"an integer from 1 to {values.MAX_COUNT:,}",
            default=1000,
            metavar="N",
        ),
    )

    def describe(self, binding: Binding, options: SourceOptions) -> str:
        return f"rate {options['rows_per_second']} rows/s"

    def read(self, spark: SparkSession, binding: Binding, options: SourceOptions) -> RawInput:
        raw = spark_stream(spark, "rate", {"rowsPerSecond": options["rows_per_second"]})
        frame = raw.withColumn(SOURCE, F.lit("rate"))
        return RawInput(frame, "typed", True)
