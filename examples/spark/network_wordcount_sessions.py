"""Spark's `structured_network_wordcount_session_window.py` as a slipstream pipeline: per word
of a socket's lines, its session (the count, the first and the last arrival, in seconds) until
10 seconds pass without it.

    slipstream run examples.spark.network_wordcount_sessions:WordSessions \\
        --source socket --host localhost --port 9999 --include-timestamp \\
        --mode complete --sink sqlite:sessions.db

The original keeps each word's session itself with `applyInPandasWithState` and a
processing-time timeout: a session is emitted once 10 seconds of the machine's clock pass
without its word, so what it emits depends on when batches ran, and a query with
processing-time timeouts never finishes `processAllAvailable`. The port says the same session
with Spark's `session_window` over the arrival time (a 10-second gap), which needs no Python
worker and no clock of its own: same count and first arrival; the last arrival is the
window's end less the gap. In complete mode it shows the sessions so far, each batch (the
original shows each once, when it times out); in append mode with a watermark each once, when
the watermark passes it."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from examples.spark.sessionization import sessions
from slipstream.api.frames import not_null
from slipstream.api.pipeline import Input, Output, Params, Pipeline, duration_param


class WordSessions(Pipeline):
    name = "network_wordcount_sessions"
    description = "Spark's session-window word count: each word's session of arrival times"
    inputs = (Input("lines", format="text", sources=("socket",)),)
    outputs = (
        Output("sessions", table="word_sessions", key=("sessionId", "start"), modes=("complete",)),
    )
    params = (duration_param("gap", timedelta(seconds=10), "the gap that closes a session"),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        found = sessions(inputs["lines"], params.gap)
        last = F.col("session.end").cast("double") - params.gap.total_seconds()
        table = found.select(
            "sessionId",
            F.col("numEvents").alias("count"),
            F.col("session.start").cast("long").alias("start"),
            last.cast("long").alias("end"),
        )
        return {"sessions": not_null(table, "sessionId", "start")}
