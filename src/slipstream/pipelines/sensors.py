"""Sensor readings (seed 000's running example): window metrics, over-reporting alerts and
running baselines, three outputs of one run over one input.

Input `readings`: JSON lines {"sensor_id", "event_time", "value", "error_code"}; `error_code`
may be null (see generators/sensors.py). Every output reads the same valid readings:

    readings.withWatermark(event_time, W)                  W = --watermark (10m)
            .dropDuplicatesWithinWatermark(sensor_id, event_time)   a re-sent reading once
            (or .dropDuplicates(sensor_id, event_time) under --trigger real-time, `--dedup
            auto`: the same records kept, since event_time is among the keys; state held
            until the watermark passes event_time instead of event_time + W)

sensor_stats     groupBy(window(event_time, L[, S]), sensor_id)     L = --window (5m), S =
                 .agg(count, avg, min, max, stddev, sorted          --slide (unset: tumbling)
                      collect_set(error_code))                      all computed together
                 update (default): a row each time a window changes; state dropped once the
                 watermark passes the window's end. complete: every window, every batch; state
                 is never dropped (check warns). append: each window once, when final.
sensor_alerts    the same windows, kept where readings > --max-per-minute x minutes of
                 window: a sensor reporting more often than it should. Append (default):
                 emitted once per finalised window, so files and databases take them.
                 update (a database; the default under --trigger real-time): a row as soon
                 as the window passes the limit, upserted while its count grows.
sensor_baseline  groupBy(sensor_id).agg(count, avg(value), sorted collect_set(error_code)):
                 the seed's "aggregations not based on time", running since the start; update
                 or complete (no event time in the key, so its state is one row per sensor).

The watermark filters late rows at the deduplication, where they are counted (the same late
rule as trending); the runner's event-time guard quarantines an `event_time` more than
`--max-future` (a day) ahead first, so it cannot move the watermark."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import (
    check_windows,
    dedup_difference,
    not_null,
    spark_interval,
    watermarked,
    window_bounds,
)
from slipstream.api.pipeline import (
    Output,
    Params,
    Pipeline,
    count_param,
    dedup_param,
    duration_param,
    event_stream,
)
from slipstream.api.schema import parse_ddl

SCHEMA = parse_ddl("sensor_id STRING, event_time TIMESTAMP, value DOUBLE, error_code STRING")
WINDOW_KEY = ("window_start", "sensor_id")


def error_codes() -> Column:
    """The sorted set of error codes seen (NULL codes are not codes)."""
    return F.array_sort(F.collect_set("error_code")).alias("error_codes")


class SensorsPipeline(Pipeline):
    name = "sensors"
    description = (
        "sensor readings: per-window statistics, over-reporting alerts and running baselines"
    )
    inputs = (event_stream("readings", SCHEMA, "event_time", ("sensor_id", "event_time", "value")),)
    params = (
        duration_param("window", timedelta(minutes=5), "length of the event-time window"),
        duration_param("slide", None, "how often a window starts (unset: tumbling windows)"),
        duration_param("watermark", timedelta(minutes=10), "how late a reading may arrive"),
        count_param(
            "max_per_minute", 1.0, "readings a sensor may send per minute before it is alerted on"
        ),
        dedup_param(
            "how a re-sent reading is kept once (the same readings either way): "
            "within-watermark, event-time (what real-time mode runs), timers (within-watermark "
            "by event-time timers: for a large state); auto: event-time under a real-time "
            "trigger"
        ),
    )
    outputs = (
        Output(
            "sensor_stats",
            key=WINDOW_KEY,
            modes=("update", "complete", "append"),
            help="count, mean, min, max, stddev and error codes per sensor and window",
        ),
        Output(
            "sensor_alerts",
            key=WINDOW_KEY,
            modes=("append", "update"),
            help="sensors reporting more than --max-per-minute, once per finalised window "
            "(update: as soon as the window passes the limit)",
        ),
        Output(
            "sensor_baseline",
            key=("sensor_id",),
            modes=("update", "complete"),
            help="running count, mean value and error codes per sensor since the start",
        ),
    )
    results_order = ("window_start DESC, sensor_id", "latest windows first")

    def notes(self, params: Params) -> Sequence[str]:
        keys = ("sensor_id", "event_time")
        return (f"dedup       {dedup_difference(keys, 'event_time', params.dedup)}",)

    def validate(self, params: Params, paths: Mapping[str, Path | None]) -> None:
        check_windows(params.window, params.slide)

    shared_inputs = ("readings",)

    def shared(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        """The readings every output counts: under the watermark, a re-sent one once."""
        readings = watermarked(
            inputs["readings"],
            "event_time",
            params.watermark,
            unique=("sensor_id", "event_time"),
            dedup=params.dedup,
        )
        return {"readings": readings}

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        readings = inputs["readings"]
        slide = params.slide or params.window
        window = F.window("event_time", spark_interval(params.window), spark_interval(slide)).alias(
            "window"
        )
        stats = (
            readings.groupBy(window, "sensor_id")
            .agg(
                F.count(F.lit(1)).alias("readings"),
                F.avg("value").alias("mean_value"),
                F.min("value").alias("min_value"),
                F.max("value").alias("max_value"),
                F.stddev_samp("value").alias("stddev_value"),
                error_codes(),
            )
            .select(
                *window_bounds(),
                "sensor_id",
                "readings",
                "mean_value",
                "min_value",
                "max_value",
                "stddev_value",
                "error_codes",
            )
        )
        expected = params.max_per_minute * params.window.total_seconds() / 60
        alerts = (
            readings.groupBy(window, "sensor_id")
            .agg(F.count(F.lit(1)).alias("readings"))
            .where(F.col("readings") > F.lit(expected))
            .select(
                *window_bounds(),
                "sensor_id",
                "readings",
                F.lit(expected).alias("expected"),
            )
        )
        baseline = readings.groupBy("sensor_id").agg(
            F.count(F.lit(1)).alias("readings"),
            F.avg("value").alias("baseline_value"),
            error_codes(),
        )
        return {
            "sensor_stats": not_null(stats, *WINDOW_KEY),
            "sensor_alerts": not_null(alerts, *WINDOW_KEY),  # update mode upserts on it
            "sensor_baseline": not_null(baseline, "sensor_id"),
        }
