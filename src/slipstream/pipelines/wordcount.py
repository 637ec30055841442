"""Word count: the seeds' quick example. A running count per word over lines of text.

Lines are split on runs of whitespace; empty tokens are dropped; case is kept. Lines come from a
socket (`slipstream feed`) or, when `--input DIR` is given, from text files landing there."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import not_null
from slipstream.api.pipeline import Input, Output, Params, Pipeline


class WordCountPipeline(Pipeline):
    name = "wordcount"
    description = "running count per word over lines from a socket or text files"
    inputs = (Input("lines", format="text", sources=("socket", "files", "table", "kafka")),)
    outputs = (
        Output(
            "counts",
            table="word_counts",
            key=("word",),
            modes=("complete", "update"),
            help="one row per word with its running count (unbounded state: one row a word)",
        ),
    )
    results_order = ("count DESC, word", "most frequent first")

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        words = inputs["lines"].select(F.explode(F.split(F.col("value"), r"\s+")).alias("word"))
        counts = words.filter(F.col("word") != "").groupBy("word").count()
        return {"counts": not_null(counts, "word")}
