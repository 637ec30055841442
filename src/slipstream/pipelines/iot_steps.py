"""IoT step counts (seed 004's exercise, exactly): the sum of `num_steps` per 5-minute window
of `timestamp`, under a 10-minute watermark, written to Parquet in append mode.

Input `device`: JSON lines of the seed's `iot-stream/data-device` records, read with the seed's
schema as given (`id` long, `user_id` long, `device_id` long, `num_steps` long, `miles_walked`
float, `calories_burnt` float, `timestamp` timestamp such as `2018-07-22T06:44:25.732+0000`,
`value` string). `generate iot` writes them; `.json.gz` files are read as well.

    withWatermark(timestamp, W)                       W = --watermark (10m)
    groupBy(window(timestamp, L)).sum(num_steps)      L = --window (5m), tumbling

Output `steps`: `(window_start, window_end, num_steps)` (the seed's `window` struct and
`sum(num_steps)` column, flattened and named), appended to Parquet under
`STATE_DIR/outputs/iot_steps/steps` unless `--sink` says otherwise. A window is written once,
when it is final: when the latest `timestamp` seen passes its end plus the watermark. So the
newest rows are always about L + W of event time behind the input (`check` says so).

As in the seed, there is no deduplication: a record sent twice counts twice. A record whose
window had already been written when it arrived is late and dropped (counted, never written).
A record without `num_steps` goes to the quarantine (it cannot be summed). Update mode is
offered for database sinks (a window's row upserted as it grows)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import (
    check_windows,
    not_null,
    spark_interval,
    watermarked,
    window_bounds,
)
from slipstream.api.pipeline import Output, Params, Pipeline, duration_param, event_stream
from slipstream.api.schema import parse_ddl

# seed 004's device_schema, field for field
DEVICE_SCHEMA = parse_ddl(
    "id BIGINT NOT NULL, user_id BIGINT, device_id BIGINT, num_steps BIGINT, miles_walked FLOAT, "
    "calories_burnt FLOAT, timestamp TIMESTAMP, value STRING"
)


class IotStepsPipeline(Pipeline):
    name = "iot_steps"
    description = "IoT step counts summed per 5-minute window, appended to Parquet when final"
    inputs = (
        event_stream(
            "device",
            DEVICE_SCHEMA,
            "timestamp",
            ("id", "timestamp", "num_steps"),
            help="JSON lines of seed 004's device records",
        ),
    )
    params = (
        duration_param("window", timedelta(minutes=5), "length of the tumbling window"),
        duration_param("watermark", timedelta(minutes=10), "how late a record may arrive"),
    )
    outputs = (
        Output(
            "steps",
            table="iot_steps",
            key=("window_start",),
            modes=("append", "update"),
            sink="parquet",
            help="sum of num_steps per window, appended once the window is final",
        ),
    )
    results_order = ("window_start DESC", "latest windows first")

    def validate(self, params: Params, paths: Mapping[str, Path | None]) -> None:
        check_windows(params.window, None)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        device = watermarked(inputs["device"], "timestamp", params.watermark)
        sums = device.groupBy(F.window("timestamp", spark_interval(params.window))).agg(
            F.sum("num_steps").alias("num_steps")
        )
        steps = sums.select(
            *window_bounds(),
            "num_steps",
        )
        return {"steps": not_null(steps, "window_start")}
