"""The build step: every query of a run as a DataFrame and its plan, nothing started.

Per stream input: read, parse with reasons, guard, expectations (runtime/inputs.py), then
either the valid rows go to the pipeline (the rejected ones are written to the input's
quarantine by the first output that reads it, in the same pass: ingest/quarantine.py) or,
staged, the input's ingest query parses once and the outputs read its typed rows (bronze,
runtime/ingest_stage.py). Per output: `pipeline.build`'s frame and the plan Spark analyzed for
it, from which every rule and the dead-letter's late-row rules are read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.analysis.plan import analyzed_text, read_plan
from slipstream.ingest.expectations import apply_expectations
from slipstream.ingest.parse import RAW, REASON
from slipstream.ingest.quarantine import (
    FUNCTION,
    QUALITY_METRICS,
    quality_metrics,
    register,
    tapped,
)
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
from slipstream.runtime.late_rows import late_settings, late_tap
from slipstream.runtime.partitions import query_settings
from slipstream.runtime.shared_stage import read_rows


@dataclass(frozen=True)
class Query:
    """One query of the run, built and not started."""

    output: BoundOutput
    frame: DataFrame
    tree: str = ""  # Spark's analyzed plan, as text
    ingest: IngestBatch | None = None  # the ingest stage's query of an input (ingest_stage.py)
    #: the inputs whose quarantine this query writes, and where (ingest/quarantine.py)
    quarantines: Mapping[str, Path] = field(default_factory=dict)
    #: its own session settings while it starts: its late rules (runtime/late_rows.py), its
    #: state store where the run's does not fit it and its row count (runtime/partitions.py)
    settings: Mapping[str, str] = field(default_factory=dict)


@dataclass
class _Read:
    """What the inputs give the queries: each input's rows for the pipeline (`valid`), each
    staged input's ingest frame, the inputs whose quarantine an output writes (`tapped`)."""

    valid: dict[str, DataFrame]
    staged: dict[str, DataFrame]
    tapped: dict[str, Path]
    #: each shared input's shared query frame (runtime/shared_stage.py)
    shared: dict[str, DataFrame] = field(default_factory=dict)


def build(spark: SparkSession, prepared: Prepared) -> list[Query]:
    """Every query of the run, built and not started; `prepared.plans` gets each output's plan,
    read from Spark. The ingest queries come first: they feed the outputs."""
    read = _read_inputs(spark, prepared)
    frames = _outputs(spark, prepared, read)
    queries = [_query(prepared, out, read, frames) for out in prepared.outputs.values()]
    queries = _owners(queries, read.tapped)
    prepared.quarantines.update({name: q.output.name for q in queries for name in q.quarantines})
    return sorted(queries, key=lambda q: _ORDER.index(q.output.kind))


#: the order queries start in: each feeds the next
_ORDER = (QueryKind.INGEST, QueryKind.SHARED, QueryKind.OUTPUT)


def _outputs(spark: SparkSession, prepared: Prepared, read: _Read) -> Mapping[str, DataFrame]:
    """The pipeline's output frames: over the inputs read (`Pipeline.assemble`), or, for a
    shared input, over its shared query's rows (runtime/shared_stage.py)."""
    pipeline, params = prepared.pipeline, prepared.params
    sharing = {o.reads[0]: o for o in prepared.outputs.values() if o.kind is QueryKind.SHARED}
    if not sharing:
        return pipeline.assemble(spark, read.valid, params)
    steps = pipeline.shared(spark, read.valid, params)
    views = dict(read.valid)
    for name, query in sharing.items():
        if name not in steps:
            raise AssertionError(f"pipeline {pipeline.name}.shared returned no frame for {name}")
        read.shared[name] = steps[name]
        views[name] = read_rows(spark, query.ctx.checkpoint, steps[name])
    return pipeline.build(spark, views, params)


def _owners(queries: list[Query], tapped: dict[str, Path]) -> list[Query]:
    """Each tapped input's quarantine is written by the first output whose plan reads it."""
    owned: dict[int, dict[str, Path]] = {}
    for name, folder in tapped.items():
        calls = re.compile(rf"\b{FUNCTION}\({re.escape(name)},")
        owner = next((i for i, q in enumerate(queries) if calls.search(q.tree)), None)
        if owner is not None:
            owned.setdefault(owner, {})[name] = folder
    return [replace(q, quarantines=owned[i]) if i in owned else q for i, q in enumerate(queries)]


def _read_inputs(spark: SparkSession, prepared: Prepared) -> _Read:
    several = len([b for b in prepared.inputs.values() if b.source is not None]) > 1
    read = _Read({}, {}, {})
    for bound in prepared.inputs.values():
        if bound.source is None:  # a static input: a table read again at each micro-batch
            read.valid[bound.name] = read_table(spark, bound)
            continue
        parsed = read_guarded(spark, prepared, bound)
        if not bound.parses:
            read.valid[bound.name] = parsed
        elif bound.staged:
            read.valid[bound.name] = _staged(spark, prepared, bound, parsed, read)
        else:
            # expectations: counted (and `fail` enforced), `drop` rules setting a reason, so
            # the quarantine receives those rows. Observed metrics are named per input when a
            # query may read several.
            rules = bound.expectations
            suffix = f".{bound.name}" if several else ""
            checked = apply_expectations(parsed, rules, suffix)
            metrics = QUALITY_METRICS + suffix
            register(spark)
            assert bound.quarantine is not None
            read.tapped[bound.name] = bound.quarantine
            valid = tapped(checked.observe(metrics, *quality_metrics()), bound.name)
            read.valid[bound.name] = late_tap(valid, bound).drop(RAW, REASON)
    return read


def _staged(
    spark: SparkSession, prepared: Prepared, bound: BoundInput, parsed: DataFrame, read: _Read
) -> DataFrame:
    """A staged input: parsed, guarded and routed once, in its ingest query; the outputs read
    the typed rows it writes (bronze)."""
    rules = bound.expectations
    checked = apply_expectations(parsed, rules)
    read.staged[bound.name] = quality(checked)
    schema = bronze_schema(checked.filter(F.col(REASON).isNull()).drop(REASON))
    prepared.bronze[bound.name] = schema
    where = bronze_dir(prepared.settings, bound)
    register(spark)  # the late-row function (runtime/late_rows.py)
    return typed_rows(late_tap(read_bronze(spark, where, schema, per_batch(bound)), bound))


def _query(
    prepared: Prepared, output: BoundOutput, read: _Read, frames: Mapping[str, DataFrame]
) -> Query:
    ingest = None
    if output.kind is QueryKind.INGEST:
        bound = prepared.inputs[output.reads[0]]
        frame = read.staged[bound.name]
        ingest = ingest_batch(prepared.settings, bound)
    elif output.kind is QueryKind.SHARED:
        frame = read.shared[output.reads[0]]
    elif output.name in frames:
        frame = frames[output.name]
    else:
        raise AssertionError(
            f"pipeline {prepared.pipeline.name}.build returned no frame for {output.name}"
        )
    tree = analyzed_text(frame)
    plan = replace(read_plan(tree), quarantine=prepared.parses)
    prepared.plans[output.name] = plan
    own = query_settings(frame.sparkSession, prepared, plan, output.ctx.mode)
    if output.kind is not QueryKind.INGEST and plan.watermark_column is not None:
        found = prepared.late[output.name] = late_plan(prepared, output, tree, plan)
        own.update(late_settings(prepared.settings, output, found))
    return Query(output, frame, tree, ingest, settings=own)
