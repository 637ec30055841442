"""Word count: the seeds' quick example. A running count per word over lines of text.

Lines are split on runs of whitespace; empty tokens are dropped; case is kept."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.config import Settings
from slipstream.pipelines.base import Pipeline
from slipstream.plan import Plan


class WordCountPipeline(Pipeline):
    name = "wordcount"
    description = "running count per word over lines from a socket or text files"
    output = "word_counts"
    key = ("word",)
    modes = ("complete", "update")
    sources = ("socket", "files", "table", "kafka")
    input_format = "text"

    def resolve(self, settings: Settings) -> Settings:
        # Text files are the replayable way in; the socket is the seeds' quick example.
        if settings.source is None and settings.input is not None:
            settings = settings.with_(source="files")
        return super().resolve(settings)

    def results_view(self, settings: Settings) -> dict[str, Any] | None:
        return self.sqlite_results(settings, "count DESC, word", "most frequent first")

    def plan(self, settings: Settings) -> Plan:
        return Plan(
            steps=(
                "split each line on runs of whitespace (explode), drop empty tokens",
                "groupBy(word).count()  -- running count, unbounded state (one row per word)",
            ),
            aggregation=True,
        )

    def transform(self, records: DataFrame, settings: Settings, spark: SparkSession) -> DataFrame:
        words = records.select(F.explode(F.split(F.col("value"), r"\s+")).alias("word"))
        return words.filter(F.col("word") != "").groupBy("word").count()
