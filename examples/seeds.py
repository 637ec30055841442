"""The seeds' small examples, each a pipeline of a few lines
(tests/spark/testing/test_seed_examples.py runs them with the seeds' own inputs and checks the
seeds' own outputs).

    # seed 002: sum and average of `value` per event-time window of `time`
    slipstream run examples.seeds:Windows --input DIR --window 2m --slide 1m
    # seed 002: a running count of log lines per user, over JSON files as they land
    slipstream run examples.seeds:UserLogCount --input DIR --mode complete --sink console
    # seed 003: the stateless example: keep `open` actions, upper-case them, append
    slipstream run examples.seeds:OpenActions --input DIR --sink console
    # the continuous trigger, end to end: Spark's rate source -> even values and their squares
    slipstream run examples.seeds:RateSquares --source rate --trigger continuous:1s \\
        --sink console --duration 30s"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import check_windows, not_null, watermarked, window_bounds
from slipstream.api.pipeline import duration_param
from slipstream.core.specs import spark_interval
from slipstream.pipelines import Input, Output, Params, Pipeline


class Windows(Pipeline):
    """Seed 002: `groupBy(window(time, L, S)).sum(value)`, with the average beside it.

    The seed's table (10:00:05 1, 10:00:15 2, 10:00:45 3, 10:01:05 4, 10:01:25 5, 10:01:55 6)
    gives, for 1-minute windows, {1, 2, 3} from 10:00 and {4, 5, 6} from 10:01."""

    name = "windows"
    description = "seed 002: sum and average of value per event-time window"
    inputs = (
        Input(
            "readings",
            "time TIMESTAMP, value DOUBLE",
            required=("time", "value"),
            event_time="time",
            help="JSON lines {time, value}",
        ),
    )
    params = (
        duration_param("window", timedelta(minutes=1), "window length"),
        duration_param("slide", None, "how often a window starts (unset: tumbling)"),
        duration_param("watermark", timedelta(minutes=10), "how late a reading may come"),
    )
    outputs = (
        Output(
            "sums",
            key=("window_start",),
            modes=("update", "complete", "append"),
            help="sum and average per window",
        ),
    )

    def validate(self, params: Params, paths: Mapping[str, object]) -> None:  # type: ignore[override]
        check_windows(params.window, params.slide)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        slide = spark_interval(params.slide or params.window)
        readings = watermarked(inputs["readings"], "time", params.watermark)
        sums = readings.groupBy(F.window("time", spark_interval(params.window), slide)).agg(
            F.sum("value").alias("total"), F.avg("value").alias("average")
        )
        sums = sums.select(
            *window_bounds(),
            "total",
            "average",
        )
        return {"sums": not_null(sums, "window_start")}


class UserLogCount(Pipeline):
    """Seed 002: log lines `{"userId", "timestamp"}` counted per user as files land."""

    name = "user_log_count"
    description = "seed 002: a running count of log lines per user"
    inputs = (
        Input(
            "logs",
            "userId STRING, timestamp TIMESTAMP",
            required=("userId",),
            event_time="timestamp",
            help="JSON lines {userId, timestamp}",
        ),
    )
    outputs = (
        Output("counts", key=("userId",), modes=("complete", "update"), help="log lines per user"),
    )

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"counts": not_null(inputs["logs"].groupBy("userId").count(), "userId")}


class OpenActions(Pipeline):
    """Seed 003's stateless query: `filter(action == "open").select(id, upper(action), ts)`,
    in append mode (no aggregation: every row is final as it comes)."""

    name = "open_actions"
    description = "seed 003: open actions, upper-cased, appended"
    inputs = (
        Input(
            "actions",
            "id STRING, action STRING, ts TIMESTAMP",
            required=("id", "action", "ts"),
            event_time="ts",
            help="JSON lines {id, action, ts} (seed 003's mobile files)",
        ),
    )
    outputs = (Output("opens", modes=("append",), help="each open action, as it comes"),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        opens = inputs["actions"].where(F.col("action") == "open")
        return {"opens": opens.select("id", F.upper("action").alias("action"), "ts")}


class RateSquares(Pipeline):
    """A map-only query, so the continuous trigger can run it: Spark's rate source rows
    (timestamp, value), the even values kept with their squares. Under `--trigger
    continuous:1s` Spark runs it as long-running tasks with a checkpoint every second."""

    name = "rate_squares"
    description = "even values of the rate source and their squares (runs continuous)"
    inputs = (Input("ticks", format="rate", sources=("rate",), help="Spark's rate source"),)
    outputs = (Output("squares", modes=("append",), sink="console", help="value, square"),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        ticks = inputs["ticks"].where(F.col("value") % 2 == 0)
        return {
            "squares": ticks.select(
                "timestamp", "value", (F.col("value") * F.col("value")).alias("square")
            )
        }
