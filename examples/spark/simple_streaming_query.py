"""Spark's `simple_streaming_query.py` as a slipstream pipeline: the rate source's rows
(`timestamp`, `value`) written to the noop sink, which discards them: the smallest streaming
query, for trying a setup or measuring the engine.

    slipstream run examples.spark.simple_streaming_query:SimpleStreamingQuery \\
        --source rate --rows-per-second 1000 --duration 1m

The sink is the original's noop by default; `--sink parquet:DIR` keeps the rows instead. What
the port gains: the rows per second and each batch's time in the run's metrics and dashboard,
where the original shows nothing; `--duration` ends it (the original runs until killed)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from slipstream.api.pipeline import Input, Output, Params, Pipeline


class SimpleStreamingQuery(Pipeline):
    name = "simple_streaming_query"
    description = "Spark's simple streaming query: the rate source's rows into the noop sink"
    inputs = (Input("ticks", format="rate", sources=("rate",), help="Spark's rate source"),)
    outputs = (Output("rows", modes=("append",), sink="noop", help="timestamp, value"),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        return {"rows": inputs["ticks"].select("timestamp", "value")}
