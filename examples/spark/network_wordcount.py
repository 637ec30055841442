"""Spark's `structured_network_wordcount.py` as a slipstream pipeline: a running count of the
words of the lines a TCP socket sends, split on single spaces as the original splits them.

    slipstream run examples.spark.network_wordcount:NetworkWordCount \\
        --source socket --host localhost --port 9999 --mode complete --sink sqlite:counts.db

The original's checkpoint directory is `--state-dir` (or `--checkpoint`). What the port gains
over the original's console sink: the counts upserted exactly once into a table, keyed by word;
the mode checked before start; `--stop-when-idle 5s` ends the run once the server has sent its
lines and closed (the original waits for ever)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import not_null
from slipstream.api.pipeline import Input, Output, Params, Pipeline


def words(lines: DataFrame) -> DataFrame:
    """The original's words: `split(value, ' ')`, so two spaces give an empty word."""
    return lines.select(F.explode(F.split(F.col("value"), " ")).alias("word"), "*")


class NetworkWordCount(Pipeline):
    name = "network_wordcount"
    description = "Spark's network word count: a running count per word of a socket's lines"
    inputs = (Input("lines", format="text", sources=("socket",)),)
    outputs = (
        Output("counts", table="network_word_counts", key=("word",), modes=("complete", "update")),
    )

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        counts = words(inputs["lines"]).groupBy("word").count()
        return {"counts": not_null(counts, "word")}  # the table's key: a word is never NULL
