"""The shared stage (`--shared-stage`, issue 40): the steps every output of a pipeline takes
first on an input (`Pipeline.shared`: sensors' watermark and deduplication) run once, in one
query per input, instead of once in each output's query.

The shared query of input I (`PIPELINE.shared.I`) is built as an output's query is: it reads the
source (or the ingest stage's bronze), parses and guards, writes the input's quarantine
(ingest/quarantine.py) and the rows its deduplication drops as late (runtime/late_rows.py: its
dead-letter folder is `shared.I`), and its state operator counts the duplicates. Its sink is
Spark's Parquet file sink, exactly-once by the sink's own log (`_spark_metadata`), into
`CHECKPOINT/shared.I/rows`: inside its checkpoint, so a reset or a new `--checkpoint` starts the
rows over with it. Each output reads them as a stream (Spark's file source reads only the files
that log committed) under the watermark the shared steps set (the same column and delay), and
`build` receives them in place of the input.

Nothing the shared query kept is late for an output: when an output judges a row, its watermark
comes from rows it read before, a subset of those the shared query had read when it judged the
same row; and a window ends after its rows' time. So the shared query writes every late row,
and the outputs none. Each output's summary accounts from the source as before: its records
read are the shared query's, with the ones that query quarantined, dropped as late and as
duplicates (runtime/feeds.py).

When: `--shared-stage auto` (the default) goes on with a checkpoint as it was made (a mark in
each output's checkpoint); a new one uses the stage under a finite trigger (available-now,
once) with two or more outputs, which the outputs then run after the shared queries have ended,
over all their rows, as they would over the input (a `sensors` backfill runs at about 1.5x the
events/s it has without the stage: docs/benchmarks.md section 52). Live, a checkpoint made with
it goes on with it, the outputs beside the shared query. Never under real-time or continuous
triggers (their outputs read the source record by record), under Spark Connect, or for an input
whose batches are bounded (`--max-files-per-trigger`, `maxOffsetsPerTrigger`): its outputs would
see other batch boundaries, so other watermarks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from slipstream.analysis.plan import analyzed_text, plan_nodes, watermark
from slipstream.checkpoint.lifecycle import last_planned_batch
from slipstream.core.specs import SinkSpec, spark_interval
from slipstream.errors import CheckpointError, ConfigError
from slipstream.runtime.bound import QueryKind
from slipstream.runtime.ingest_stage import per_batch

if TYPE_CHECKING:
    from slipstream.api.pipeline import Pipeline
    from slipstream.runtime.bound import BoundInput, BoundOutput, Prepared
    from slipstream.settings.config import Settings

PREFIX = "shared."  # a shared query's name after the pipeline's: PIPELINE.shared.INPUT
ROWS = "rows"  # its rows' folder, in its checkpoint
MARK = ".slipstream-shared-stage"  # in each output checkpoint a run with the stage made
WITHOUT = "CHECKPOINT_WITHOUT_SHARED_STAGE"
WITH = "CHECKPOINT_FROM_SHARED_STAGE"


def query_name(input_name: str) -> str:
    return PREFIX + input_name


def rows_dir(checkpoint: Path) -> Path:
    """Where a shared query's rows are: `rows` in its own checkpoint."""
    return Path(checkpoint) / ROWS


def rows_sink(checkpoint: Path) -> SinkSpec:
    return SinkSpec("parquet", str(rows_dir(checkpoint)))


def why_not(settings: Settings, pipeline: Pipeline, inputs: dict[str, BoundInput]) -> str | None:
    """Why this run cannot use the shared stage, or None."""
    if not pipeline.shared_inputs:
        return f"pipeline {pipeline.name} declares no steps its outputs share"
    if settings.remote is not None:
        return "not under Spark Connect"
    if settings.trigger.kind in ("real-time", "continuous"):
        return f"not under a {settings.trigger.kind} trigger (its outputs read the source itself)"
    for name in pipeline.shared_inputs:
        bound = inputs[name]
        if bound.source is None:
            return f"input {name} is a table, not a stream"
        if per_batch(bound):
            return (
                f"input {name}'s batches are bounded (--max-files-per-trigger or "
                "maxOffsetsPerTrigger): its outputs would read other batch boundaries"
            )
    return None


def decide(
    settings: Settings,
    pipeline: Pipeline,
    inputs: dict[str, BoundInput],
    outputs: dict[str, BoundOutput],
) -> bool:
    """`--shared-stage auto` (the default): a checkpoint that has planned a batch goes on as
    it was made (its mark); a new one shares in a finite run of two or more outputs, where the
    outputs would otherwise each compute the same steps. `true` where the stage cannot run is
    refused (CONFIG_BAD_VALUE, naming why); `false` is taken as given."""
    reason = why_not(settings, pipeline, inputs)
    if settings.shared_stage is not None:
        if settings.shared_stage and reason is not None:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--shared-stage true: {reason}",
                "drop --shared-stage (auto decides), or give --shared-stage false",
            )
        return settings.shared_stage
    if reason is not None:
        return False
    checkpoints = [Path(o.ctx.checkpoint) for o in outputs.values() if o.spec is not None]
    made = [c for c in checkpoints if last_planned_batch(c) is not None]
    if made:
        return any((c / MARK).is_file() for c in made)
    return settings.trigger.finite and len(checkpoints) >= 2


def read_rows(spark: SparkSession, checkpoint: Path, steps: DataFrame) -> DataFrame:
    """The rows a shared query appends, as its outputs read them: a stream of the files its
    sink committed, under the watermark its steps set."""
    folder = rows_dir(checkpoint)
    folder.mkdir(parents=True, exist_ok=True)
    rows = spark.readStream.schema(steps.schema).parquet(str(folder))
    marks = [
        watermark(n) for n in plan_nodes(analyzed_text(steps)) if n.name == "EventTimeWatermark"
    ]
    if not marks:
        return rows
    column, delay = marks[0]
    assert delay is not None, f"the shared steps' watermark on {column} has no delay"
    return rows.withWatermark(column, spark_interval(delay))


def shared_folders(prepared: Prepared) -> dict[str, str]:
    """Each shared query's rows folder (resolved) -> the query's name."""
    return {
        str(rows_dir(o.ctx.checkpoint).resolve()): o.ctx.query_name
        for o in prepared.outputs.values()
        if o.kind is QueryKind.SHARED
    }


def check_checkpoints(prepared: Prepared) -> None:
    """Refuse an output checkpoint made by a run of the other kind, before anything starts:
    with the stage, its offsets must name the shared query's rows; without, the input."""
    pipeline = prepared.pipeline.name
    sharing = prepared.settings.shared_stage
    for out in prepared.outputs.values():
        if out.spec is None:
            continue
        checkpoint = Path(out.ctx.checkpoint)
        marked = (checkpoint / MARK).is_file()
        if sharing and last_planned_batch(checkpoint) is not None and not marked:
            raise CheckpointError(
                WITHOUT,
                f"the checkpoint of {out.ctx.query_name} ({checkpoint}) was made without the "
                "shared stage: its offsets name the input, not the shared query's rows; it is "
                "not restarted from zero",
                f"run with --shared-stage false (or auto) to go on from it, or `slipstream reset "
                f"{pipeline}` (or a new --checkpoint) to start over with the stage",
            )
        if not sharing and marked:
            raise CheckpointError(
                WITH,
                f"the checkpoint of {out.ctx.query_name} ({checkpoint}) was made with the "
                "shared stage: its offsets name the shared query's rows, not the input",
                f"run with --shared-stage true (or auto), or `slipstream reset {pipeline}` (or a "
                "new --checkpoint) to start over without it",
            )


def mark_checkpoints(prepared: Prepared) -> None:
    if not prepared.settings.shared_stage:
        return
    for out in prepared.outputs.values():
        if out.spec is not None:
            checkpoint = Path(out.ctx.checkpoint)
            checkpoint.mkdir(parents=True, exist_ok=True)
            (checkpoint / MARK).write_text(
                "slipstream shared stage: the output reads shared rows\n"
            )
