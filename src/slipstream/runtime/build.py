"""The build step: every query of a run as a DataFrame and its plan, nothing started.

Per stream input: read, parse with reasons, guard, expectations (runtime/inputs.py), then
either the valid rows go to the pipeline (and the rejected ones to the input's quarantine query)
or, staged, the input's ingest query parses once and the outputs read its typed rows (bronze,
runtime/ingest_stage.py). Per output: `pipeline.build`'s frame and the plan Spark analyzed for
it, from which every rule and the dead-letter's late-row rules are read."""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.analysis.plan import analyzed_text, read_plan
from slipstream.ingest.expectations import enforce, route
from slipstream.ingest.parse import REASON
from slipstream.ingest.quarantine import QUALITY_METRICS, accepted, quality_metrics, rejected
from slipstream.runtime.bound import BoundInput, BoundOutput, Prepared, QueryKind
from slipstream.runtime.ingest_stage import (
    IngestBatch,
    bronze_dir,
    bronze_schema,
    ingest_batch,
    per_batch,
    quality,
    read_bronze,
    typed_rows,
)
from slipstream.runtime.inputs import read_guarded, read_table
from slipstream.runtime.late_plan import late_plan


@dataclass(frozen=True)
class Query:
    """One query of the run, built and not started."""

    output: BoundOutput
    frame: DataFrame
    tree: str = ""  # Spark's analyzed plan, as text
    ingest: IngestBatch | None = None  # the ingest stage's query of an input (ingest_stage.py)


@dataclass
class _Read:
    """What the inputs give the queries: each input's rows for the pipeline (`valid`), its
    parsed records for its quarantine (`records`), each staged input's ingest frame."""

    valid: dict[str, DataFrame]
    records: dict[str, DataFrame]
    staged: dict[str, DataFrame]


def build(spark: SparkSession, prepared: Prepared) -> list[Query]:
    """Every query of the run, built and not started; `prepared.plans` gets each output's plan,
    read from Spark. The ingest queries come first: they feed the outputs."""
    read = _read_inputs(spark, prepared)
    frames = prepared.pipeline.build(spark, read.valid, prepared.params)
    queries = [_query(prepared, out, read, frames) for out in prepared.outputs.values()]
    return sorted(queries, key=lambda q: q.output.kind is not QueryKind.INGEST)


def _read_inputs(spark: SparkSession, prepared: Prepared) -> _Read:
    several = len([b for b in prepared.inputs.values() if b.source is not None]) > 1
    read = _Read({}, {}, {})
    for bound in prepared.inputs.values():
        if bound.source is None:  # a static input: a table read again at each micro-batch
            read.valid[bound.name] = read_table(spark, bound)
            continue
        parsed = read_guarded(spark, prepared, bound)
        read.records[bound.name] = parsed
        if not bound.parses:
            read.valid[bound.name] = parsed
        elif bound.staged:
            read.valid[bound.name] = _staged(spark, prepared, bound, parsed, read)
        else:
            # expectations: counted (and `fail` enforced) on the branch the outputs read; `drop`
            # rules set a reason on both branches, so the quarantine query receives those rows.
            # Observed metrics are named per input when a query may read several.
            rules = bound.expectations
            suffix = f".{bound.name}" if several else ""
            checked = route(enforce(parsed, rules, suffix), rules)
            metrics = QUALITY_METRICS + suffix
            read.valid[bound.name] = accepted(checked.observe(metrics, *quality_metrics()))
    return read


def _staged(
    spark: SparkSession, prepared: Prepared, bound: BoundInput, parsed: DataFrame, read: _Read
) -> DataFrame:
    """A staged input: parsed, guarded and routed once, in its ingest query; the outputs read
    the typed rows it writes (bronze)."""
    rules = bound.expectations
    checked = route(enforce(parsed, rules), rules)
    read.staged[bound.name] = quality(checked)
    schema = bronze_schema(checked.filter(F.col(REASON).isNull()).drop(REASON))
    prepared.bronze[bound.name] = schema
    where = bronze_dir(prepared.settings, bound)
    return typed_rows(read_bronze(spark, where, schema, per_batch(bound)))


def _query(
    prepared: Prepared, output: BoundOutput, read: _Read, frames: dict[str, DataFrame]
) -> Query:
    ingest = None
    if output.kind is QueryKind.INGEST:
        bound = prepared.inputs[output.reads[0]]
        frame = read.staged[bound.name]
        ingest = ingest_batch(prepared.settings, bound)
    elif output.kind is QueryKind.QUARANTINE:
        # it counts what it reads and what it writes (`quality`), so its batch line, the
        # summary and the dashboard say how many records it quarantined
        bound = prepared.inputs[output.reads[0]]
        routed = route(read.records[bound.name], bound.expectations)
        frame = rejected(routed.observe(QUALITY_METRICS, *quality_metrics()))
    elif output.name in frames:
        frame = frames[output.name]
    else:
        raise AssertionError(
            f"pipeline {prepared.pipeline.name}.build returned no frame for {output.name}"
        )
    tree = analyzed_text(frame)
    plan = replace(read_plan(tree), quarantine=prepared.parses)
    prepared.plans[output.name] = plan
    if output.is_output and plan.watermark_column is not None:
        prepared.late[output.name] = late_plan(prepared, output, tree, plan)
    return Query(output, frame, tree, ingest)
