"""11. activity: user_status on the two state APIs, side by side, over the same generated actions
of 100,000 users (the full run).

Variants, alternated, each the real `activity` pipeline's user_status query (its `build`:
watermark, deduplication, groupBy(user_id) and the status processor with its event-time timer),
read from the same files with available-now, written to the noop sink:
- **rows**: `transformWithState`, the row-based API (a Python Row per input row);
- **pandas**: `transformWithStateInPandas` (Arrow batches as pandas DataFrames per key).

events/s = actions / wall time of the query (session shared, started before). The state
operator's rows at the end are read from progress: one value and one timer per user seen and
not yet timed out."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from bench import inproc
from bench.core import Comparison, Context, Result, Stopwatch

NAME = "activity"
TITLE = "activity: user_status on transformWithState (rows) vs transformWithStateInPandas"


def write_actions(folder: Path, users: int) -> int:
    from slipstream.tools.generators import activity
    from slipstream.tools.generators.streams import StreamSpec, generate

    spec = StreamSpec(
        duration=timedelta(minutes=30), file_every=timedelta(minutes=2),
        out_of_order=0.05, late=0.0, duplicates=0.01, malformed=0.0,
    )  # fmt: skip
    report = generate(spec, activity.Users(users, bursty=10, idle=timedelta(minutes=20)), folder)
    return report.total_lines


def measure(ctx: Context, api: str, folder: Path, actions: int) -> dict[str, Any]:
    from slipstream.pipelines.activity import SCHEMA, ActivityPipeline

    spark = inproc.session()
    scratch = ctx.scratch("activity") / f"{api}-{inproc.unique()}"
    pipeline = ActivityPipeline()
    params = pipeline.parse_params({"state_api": api})
    frame = spark.readStream.schema(SCHEMA).json(str(folder))
    status = pipeline.build(spark, {"actions": frame}, params)["user_status"]
    watch = Stopwatch()
    query = inproc.start_noop(status, None, scratch / "cp", available_now=True)
    query.awaitTermination()
    seconds = watch.seconds()
    state = [p for p in query.recentProgress if p.get("stateOperators")]
    held = None
    if state:  # the status operator's rows (values and timers), not the deduplication's
        ops = state[-1]["stateOperators"]
        held = sum(o["numRowsTotal"] for o in ops if "ransformWithState" in o["operatorName"])
    return {"seconds": seconds, "events_per_s": actions / seconds, "state_rows": held}


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    users = int(ctx.param("users", 10_000, 100_000))
    reps = ctx.param("reps", 2, 2)
    folder = ctx.scratch("actions")
    ctx.log(f"  generating 30 minutes of actions from {users:,} users")
    actions = write_actions(folder, users)
    result.params = {"users": users, "actions": actions, "repetitions": reps,
                     "inactive_after": "1h", "watermark": "10m"}  # fmt: skip
    variants = ["rows", "pandas"]

    def one(variant: str, rep: int) -> dict[str, Any]:
        return measure(ctx, variant, folder, actions)

    metrics = {"seconds": "seconds", "events_per_s": "events_per_s", "state_rows": "state_rows"}
    by = Comparison(metrics, "events_per_s", [("rows", "pandas")], "events/s")
    by.run(ctx, result, variants, one, reps, actions=actions)
    return result
