"""Spark's `structured_sessionization.py` as a slipstream pipeline: each word of a socket's
lines is a session id, its events the moments its lines arrived (`includeTimestamp`); a
session closes after a 10-second gap (`session_window`), and each is counted.

    slipstream run examples.spark.sessionization:Sessionization \\
        --source socket --host localhost --port 9999 --include-timestamp \\
        --mode complete --sink sqlite:sessions.db

The original writes in update mode, which Spark 4 refuses for session windows
(`STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION`, at start); the port offers complete mode (the
sessions so far, each batch), the nearest Spark allows without a watermark, and says so before
start where the original fails at it. Its columns are the original's, `durationMs` included:
the original computes it from seconds (`CAST(session.end AS LONG) - CAST(session.start AS
LONG)`), so it holds seconds, and the port keeps that rather than change the output."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from examples.spark.network_wordcount import words
from slipstream.api.frames import not_null
from slipstream.api.pipeline import Input, Output, Params, Pipeline, duration_param
from slipstream.core.specs import spark_interval


def sessions(lines: DataFrame, gap: timedelta) -> DataFrame:
    """Per word (the session id), its sessions of arrival times at most `gap` apart."""
    events = words(lines).select(F.col("word").alias("sessionId"), F.col("timestamp"))
    window = F.session_window("timestamp", spark_interval(gap)).alias("session")
    return events.groupBy(window, "sessionId").agg(F.count("*").alias("numEvents"))


class Sessionization(Pipeline):
    name = "sessionization"
    description = "Spark's sessionization example: sessions per word of arrival time"
    inputs = (Input("lines", format="text", sources=("socket",)),)
    outputs = (
        Output("sessions", table="word_sessions", key=("sessionId", "start"), modes=("complete",)),
    )
    params = (duration_param("gap", timedelta(seconds=10), "the gap that closes a session"),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        table = sessions(inputs["lines"], params.gap).selectExpr(
            "sessionId",
            "CAST(session.start AS LONG) AS start",
            "CAST(session.end AS LONG) AS end",
            "CAST(session.end AS LONG) - CAST(session.start AS LONG) AS durationMs",
            "numEvents",
        )
        return {"sessions": not_null(table, "sessionId", "start")}
