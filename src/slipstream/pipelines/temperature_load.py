"""Temperature with load, by location (seed 003's stream-stream join).

Inputs `temperature` ({"location_id", "temp", "temp_taken_time"}) and `load`
({"location_id", "load", "load_taken_time"}), two streams (see generators/temperature_load.py).

    temperature.withWatermark(temp_taken_time, 1 hour)       --temp-watermark
    load.withWatermark(load_taken_time, 2 hours)             --load-watermark
    JOIN ON temp_location_id = load_location_id
        AND load_taken_time BETWEEN temp_taken_time AND temp_taken_time + 1 hour   --within

Inner by default; `--join left_outer` keeps every temperature, with NULL load when none came
within the hour, written once the watermark proves none can still come. Output
`temperature_load(location_id, temp, temp_taken_time, load, load_taken_time)`, appended.

How long each side is held: the join keeps a reading until the watermark (the slower of the
two inputs: `min(max temp time - 1h, max load time - 2h)`) proves no reading of the other side
can still match it. `check temperature_load` prints both bounds, worked out from the
watermarks and the time condition it reads from the plan."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import spark_interval, watermarked
from slipstream.api.pipeline import (
    Input,
    Output,
    Params,
    Pipeline,
    choice_param,
    duration_param,
    event_stream,
)
from slipstream.errors import ConfigError


def _reading(name: str, value: str, time: str) -> Input:
    """One of the two streams: `{location_id, VALUE, TIME}`, all required."""
    schema = f"location_id STRING, {value} DOUBLE, {time} TIMESTAMP"
    return event_stream(name, schema, time, ("location_id", value, time))


class TemperatureLoadPipeline(Pipeline):
    name = "temperature_load"
    description = "temperature readings joined to the load readings of the hour after them"
    inputs = (_reading("temperature", "temp", "temp_taken_time"),
              _reading("load", "load", "load_taken_time"))  # fmt: skip
    params = (
        duration_param("temp_watermark", timedelta(hours=1), "how late a temperature may come"),
        duration_param("load_watermark", timedelta(hours=2), "how late a load may come"),
        duration_param("within", timedelta(hours=1), "how long after a temperature a load joins"),
        choice_param(
            "join",
            ("inner", "left_outer"),
            "inner: matched pairs only; left_outer: every temperature, load NULL if none came",
        ),
    )
    outputs = (
        Output(
            "temperature_load",
            key=("location_id", "temp_taken_time", "load_taken_time"),
            modes=("append",),
            help="each temperature with each load of its location in the hour after it",
        ),
    )
    results_order = ("temp_taken_time DESC, location_id", "latest temperatures first")

    def validate(self, params: Params, paths: Mapping[str, Path | None]) -> None:

        if params.within <= timedelta(0):
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--within must be positive; got {params.within}",
                "give --within a duration such as 1h",
            )

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        temperature = inputs["temperature"].withColumnRenamed("location_id", "temp_location_id")
        temps = watermarked(temperature, "temp_taken_time", params.temp_watermark)
        load = inputs["load"].withColumnRenamed("location_id", "load_location_id")
        loads = watermarked(load, "load_taken_time", params.load_watermark)
        condition = F.expr(
            "temp_location_id = load_location_id AND "
            "load_taken_time >= temp_taken_time AND "
            f"load_taken_time <= temp_taken_time + INTERVAL {spark_interval(params.within)}"
        )
        joined = temps.join(loads, condition, params.join)
        return {
            "temperature_load": joined.select(
                F.col("temp_location_id").alias("location_id"),
                "temp",
                "temp_taken_time",
                "load",
                "load_taken_time",
            )
        }
