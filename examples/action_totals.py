"""Mobile's window counts summed per action: a pipeline that reads another pipeline's output,
here a Delta table (bronze -> silver, docs/howto/delta.md, on the Spark 4.2 line).

    slipstream samples mobile --out landing
    slipstream run mobile --input landing --sink delta:tables/mobile_counts --mode complete
    slipstream run examples.action_totals:ActionTotals \
        --input counts=delta:tables/mobile_counts --sink delta:tables/action_totals

Input `counts`: mobile's output rows {window_start, window_end, action, count}, from any source
that carries those columns (a Delta table, as above, or JSON lines).

Output `totals` (complete by default, or update by its key): per action, the actions counted
over all the windows read so far (`actions`) and how many windows they fall in (`windows`)."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api import Input, Output, Params, Pipeline

#: mobile's `counts` output, as its Delta table holds it
COUNTS = "window_start TIMESTAMP, window_end TIMESTAMP, action STRING, count BIGINT"


class ActionTotals(Pipeline):
    name = "action_totals"
    description = "mobile's window counts summed per action, read from mobile's output"
    inputs = (
        Input(
            "counts",
            COUNTS,
            required=("action", "count"),
            help="mobile's counts: a delta:DIR mobile wrote, or JSON lines of its columns",
        ),
    )
    outputs = (
        Output(
            "totals",
            key=("action",),
            modes=("complete", "update"),
            help="actions and windows per action",
        ),
    )

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        totals = (
            inputs["counts"]
            .groupBy("action")
            .agg(F.sum("count").alias("actions"), F.count(F.lit(1)).alias("windows"))
        )
        return {"totals": totals}
