"""Spark's `structured_network_wordcount_windowed.py` as a slipstream pipeline: the words of a
socket's lines counted per sliding window of the time each line arrived (Spark's
`includeTimestamp`), split on single spaces as the original splits them.

    slipstream run examples.spark.network_wordcount_windowed:WindowedNetworkWordCount \\
        --source socket --host localhost --port 9999 --include-timestamp \\
        --window 10s --slide 5s --mode complete --sink sqlite:counts.db

The original's `<window duration> [<slide duration>]` arguments are `--window` and `--slide`
(checked before start: the slide no longer than the window), its `orderBy("window")` is the
table's order when read (a sorted streaming result is only allowed in complete mode, and a
table has no order). What the port gains: the counts upserted exactly once into a table keyed
by window and word; `--stop-when-idle` ends a run whose server closed."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from examples.spark.network_wordcount import words
from slipstream.api.frames import not_null
from slipstream.api.pipeline import Input, Output, Params, Pipeline, duration_param
from slipstream.core.specs import check_windows, spark_interval


class WindowedNetworkWordCount(Pipeline):
    name = "network_wordcount_windowed"
    description = "Spark's windowed network word count: words per window of arrival time"
    inputs = (Input("lines", format="text", sources=("socket",)),)
    outputs = (
        Output(
            "counts",
            table="windowed_word_counts",
            key=("window_start", "window_end", "word"),
            modes=("complete", "update"),
        ),
    )
    params = (
        duration_param("window", timedelta(seconds=10), "the windows' length"),
        duration_param("slide", None, "how far apart windows start (default: the window)"),
    )

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        slide = params.slide or params.window
        check_windows(params.window, slide)
        window = F.window("timestamp", spark_interval(params.window), spark_interval(slide))
        counts = words(inputs["lines"]).groupBy(window.alias("w"), "word").count()
        table = counts.select(
            F.col("w.start").alias("window_start"), F.col("w.end").alias("window_end"),
            "word", "count",
        )  # fmt: skip
        return {"counts": not_null(table, "window_start", "window_end", "word")}
