"""From settings to running queries: the one path `run`, `check` and the test harness share.

prepare()  no Spark: bind inputs, parameters and outputs; the checks that need no plan
build()    Spark, nothing started: read and parse each input, the pipeline's frames, one query
           per output plus one quarantine query per parsed input; each output's plan is read
           from Spark's analyzed plan and every rule applies to it
start()    lock the checkpoint, build, refuse what a rule refuses, start the queries
Run.wait() (runtime.run) until the queries finish, --duration passes, Ctrl-C or a stop."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from slipstream.analysis.plan import analyzed_text, read_plan
from slipstream.analysis.realtime import slot_blocker, slots_needed
from slipstream.analysis.validate import key_violations, violations
from slipstream.checkpoint.integrity import refuse_damaged
from slipstream.checkpoint.lifecycle import (
    CheckpointLock,
    refuse_interrupted_reset,
    sweep_interrupted_writes,
)
from slipstream.core.specs import TriggerSpec, spark_interval
from slipstream.errors import ValidationError
from slipstream.ingest.expectations import enforce, route
from slipstream.ingest.parse import REASON
from slipstream.ingest.quarantine import QUALITY_METRICS, accepted, quality_metrics, rejected
from slipstream.monitor.listener import Handler, RunListener, RunTotals
from slipstream.monitor.recorder import RunRecorder
from slipstream.runtime.bind import prepare
from slipstream.runtime.bound import BoundOutput, Prepared, stream_inputs
from slipstream.runtime.compat import Verdicts, judge_all, refuse_or_record
from slipstream.runtime.control import StopControl
from slipstream.runtime.deadletter import dead_letter
from slipstream.runtime.from_checkpoint import begin
from slipstream.runtime.ingest_stage import (
    IngestBatch,
    applies,
    bronze_dir,
    bronze_schema,
    check_checkpoints,
    ingest_batch,
    mark_checkpoints,
    per_batch,
    quality,
    read_bronze,
    typed_rows,
)
from slipstream.runtime.inputs import read_guarded, read_table
from slipstream.runtime.landed import LandedFilesCheck
from slipstream.runtime.late_plan import late_plan
from slipstream.runtime.ownership import record_outputs, refuse_foreign_outputs
from slipstream.runtime.run import Run, batch_boundaries
from slipstream.runtime.written import WrittenRows
from slipstream.settings.config import Settings
from slipstream.settings.connect import sink_violations, start_query
from slipstream.sinks.database import DatabaseSink
from slipstream.sinks.rows import attach_rows, mark_real_time
from slipstream.sinks.spark_sinks import write_mark

_log = logging.getLogger("slipstream")


def _say(line: str) -> None:
    _log.warning(line)


__all__ = ["Prepared", "Run", "batch_boundaries", "build", "check", "prepare", "start"]


@dataclass(frozen=True)
class Query:
    """One output's query, built and not started."""

    output: BoundOutput
    frame: DataFrame
    tree: str = ""  # Spark's analyzed plan, as text
    ingest: IngestBatch | None = None  # the ingest stage's query of an input (ingest_stage.py)


def build(spark: SparkSession, prepared: Prepared) -> list[Query]:
    """Every query of the run, built and not started; `prepared.plans` gets each output's plan,
    read from Spark."""
    pipeline = prepared.pipeline
    streams = [b for b in prepared.inputs.values() if b.source is not None]
    several = len(streams) > 1
    valid: dict[str, DataFrame] = {}
    records: dict[str, DataFrame] = {}
    staged: dict[str, DataFrame] = {}  # the ingest stage's query of each staged input
    for bound in prepared.inputs.values():
        if bound.source is None:
            valid[bound.name] = read_table(spark, bound)
            continue
        parsed = read_guarded(spark, prepared, bound)
        records[bound.name] = parsed
        if not bound.parses:
            valid[bound.name] = parsed
            continue
        if applies(prepared.settings, bound):
            # parsed, guarded and routed once, in the ingest query; the outputs read bronze
            rules = bound.expectations
            checked = route(enforce(parsed, rules), rules)
            staged[bound.name] = quality(checked)
            schema = bronze_schema(checked.filter(F.col(REASON).isNull()).drop(REASON))
            prepared.bronze[bound.name] = schema
            where = bronze_dir(prepared.settings, bound)
            bronze = read_bronze(spark, where, schema, per_batch(bound))
            valid[bound.name] = typed_rows(bronze)
            continue
        # expectations: counted (and `fail` enforced) on the branch the outputs read; `drop`
        # rules set a reason on both branches, so the quarantine query receives those rows.
        # Observed metrics are named per input when a query may read several.
        rules = bound.expectations
        suffix = f".{bound.name}" if several else ""
        checked = route(enforce(parsed, rules, suffix), rules)
        metrics = QUALITY_METRICS + suffix
        valid[bound.name] = accepted(checked.observe(metrics, *quality_metrics()))
    frames = pipeline.build(spark, valid, prepared.params)
    queries: list[Query] = []
    for name, output in prepared.outputs.items():
        ingest = None
        if output.spec is None and output.reads[0] in staged:  # the ingest query
            bound = prepared.inputs[output.reads[0]]
            frame = staged[bound.name]
            ingest = ingest_batch(prepared.settings, bound)
        elif output.spec is None:  # a quarantine
            # it counts what it reads and what it writes (`quality`), so its batch line, the
            # summary and the dashboard say how many records it quarantined
            bound = prepared.inputs[output.reads[0]]
            routed = route(records[bound.name], bound.expectations)
            frame = rejected(routed.observe(QUALITY_METRICS, *quality_metrics()))
        elif name in frames:
            frame = frames[name]
        else:
            raise AssertionError(f"pipeline {pipeline.name}.build returned no frame for {name}")
        tree = analyzed_text(frame)
        plan = replace(read_plan(tree), quarantine=prepared.parses)
        prepared.plans[name] = plan
        if output.spec is not None and plan.watermark_column is not None:
            prepared.late[name] = late_plan(prepared, output, tree, plan)
        queries.append(Query(output, frame, tree, ingest))
    # the ingest queries first: they feed the outputs (harness and available-now order)
    return sorted(queries, key=lambda q: q.ingest is None)


def check(prepared: Prepared, queries: list[Query]) -> list[ValidationError]:
    """Every rule on every output's plan; each message names the output."""
    s = prepared.settings
    problems = []
    for query in queries:
        out = query.output
        plan = prepared.plans[out.name]
        offered = out.spec.modes if out.spec is not None else None
        source = _source_of(prepared, out)
        trigger = query_trigger(s, quarantine=out.spec is None)
        found = violations(plan, out.ctx.mode, out.sink.spec, trigger, source, offered)
        if out.spec is not None:
            nullable = {f.name: f.nullable for f in query.frame.schema.fields}
            found += key_violations(out.ctx.mode, out.sink.spec, out.ctx.key, nullable)
        if s.remote is not None:
            found += sink_violations(out.sink.spec)
        for v in found:
            problems.append(
                ValidationError(v.code, f"output {out.ctx.query_name}: {v.message}", v.fix)
            )
    if s.trigger.kind == "real-time" and not problems:
        problems += real_time_slots(prepared, queries)
    return problems


def real_time_slots(prepared: Prepared, queries: list[Query]) -> list[ValidationError]:
    """REAL_TIME_NEEDS_SLOTS when the run's real-time queries cannot all run at once."""
    topics = [
        b.source.real_time_slots(b.binding, b.source_options)
        for b in prepared.inputs.values()
        if b.source is not None and b.source.real_time
    ]
    if not queries or not topics:
        return []
    spark = queries[0].frame.sparkSession
    try:
        cores = int(spark.sparkContext.defaultParallelism)
    except Exception:  # Spark Connect: the cluster's size is not the client's to read
        return []
    shuffle = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
    real_time = [q for q in queries if q.output.spec is not None]
    needs = {
        q.output.ctx.query_name: slots_needed(prepared.plans[q.output.name], sum(topics), shuffle)
        for q in real_time
    }
    blocker = slot_blocker(needs, len(queries) - len(real_time), cores)
    if blocker is None:
        return []
    return [
        ValidationError(
            "REAL_TIME_NEEDS_SLOTS",
            blocker,
            "give Spark more cores (--master local[N]), fewer shuffle partitions "
            "(--conf spark.sql.shuffle.partitions=1) or a topic with fewer partitions",
        )
    ]


def restart_verdicts(spark: SparkSession, prepared: Prepared, queries: list[Query]) -> Verdicts:
    """Each output's new build against the one its checkpoint recorded (runtime.compat)."""
    try:
        partitions: int | None = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
    except (ValueError, TypeError):
        partitions = None
    return judge_all(prepared, {q.output.name: q.tree for q in queries}, partitions)


def _source_of(prepared: Prepared, output: BoundOutput) -> tuple[str, ...]:
    """The source kinds of the inputs `output` reads (runtime.bound.stream_inputs): the
    continuous and real-time rules judge every one of them."""
    return tuple(b.source.kind for b in stream_inputs(prepared, output) if b.source is not None)


def apply_trigger(writer: Any, trigger: TriggerSpec) -> Any:
    """The edge where a TriggerSpec becomes Spark's trigger call."""
    if trigger.kind == "default":
        return writer
    if trigger.kind == "available-now":
        return writer.trigger(availableNow=True)
    if trigger.kind == "once":
        return writer.trigger(once=True)
    assert trigger.interval is not None
    interval = spark_interval(trigger.interval)
    if trigger.kind == "interval":
        return writer.trigger(processingTime=interval)
    if trigger.kind == "continuous":
        return writer.trigger(continuous=interval)
    return writer.trigger(realTime=interval)


def query_trigger(settings: Settings, quarantine: bool) -> TriggerSpec:
    """A quarantine query takes `--quarantine-trigger` while the outputs run micro-batches on
    and on, and micro-batches (or `--quarantine-trigger`) while they run in real-time mode;
    with a finite trigger (available-now, once) every query takes the run's."""
    own = settings.quarantine_trigger
    if quarantine and own is not None and settings.trigger.kind in ("default", "interval"):
        return own
    if quarantine and settings.trigger.kind == "real-time":
        # rejected records go to files, which real-time mode cannot write: micro-batches
        return own or TriggerSpec()
    return settings.trigger


def row_by_row(settings: Settings, output: BoundOutput) -> DatabaseSink | None:
    """The database sink of an output that real-time mode writes row by row (sinks/rows.py)."""
    if settings.trigger.kind != "real-time" or output.spec is None:
        return None
    return output.sink if isinstance(output.sink, DatabaseSink) else None


def checkpoints_of(prepared: Prepared) -> dict[str, Path]:
    """Each query's checkpoint, by query name."""
    return {o.ctx.query_name: Path(o.ctx.checkpoint) for o in prepared.outputs.values()}


def start(
    spark: SparkSession,
    prepared: Prepared,
    handlers: list[Handler] | None = None,
    *,
    origin: str = "api",
) -> Run:
    """Start the run's queries (outputs, then quarantines). Refuses a checkpoint in use, an
    output another checkpoint wrote, and any query a rule refuses, before starting any.

    Every run records its events in the pipeline's event log (`settings.event_log`);
    `origin` (cli, demo, harness, api) is the reason given in its `run_started` record."""
    settings = prepared.settings
    pipeline = prepared.pipeline
    lock = CheckpointLock(settings.checkpoint_root).acquire()
    control = StopControl(settings.checkpoint_root)
    recorder = RunRecorder(settings.event_log, pipeline.name)
    totals = RunTotals()
    # the log first; totals last: `sync_progress` waits on it, so every handler saw the batch
    listener = RunListener(pipeline.name, [recorder, *(handlers or []), totals])
    spark.streams.addListener(listener)
    queries: dict[str, StreamingQuery] = {}
    try:
        refuse_foreign_outputs(prepared)  # under the lock: no reset can run meanwhile
        for out in prepared.outputs.values():  # a kill inside Spark's log write
            sweep_interrupted_writes(out.ctx.checkpoint)
        refuse_interrupted_reset(settings.checkpoint_root, pipeline.name)
        refuse_damaged(checkpoints_of(prepared))  # logs that disagree: before any query
        staged = {b.name for b in prepared.inputs.values() if applies(settings, b)}
        check_checkpoints(prepared, staged)  # never a silent restart from zero
        built = build(spark, prepared)
        refused = check(prepared, built)
        if refused:
            raise refused[0]
        # before any query starts: the state each checkpoint holds must fit this run's queries
        refuse_or_record(prepared, restart_verdicts(spark, prepared, built), _say)
        begin(prepared, _say)  # a new checkpoint's start (--from-checkpoint), recorded
        mark_checkpoints(prepared, staged)
        restarts: dict[str, Callable[[], StreamingQuery]] = {}  # Run._start_again
        record_outputs(prepared)
        recorder.run_started([q.output.ctx.query_name for q in built], origin)
        # before the queries start: it tells this run's batches from earlier ones
        late = dead_letter(spark, prepared)
        listener.handlers.insert(0, late.handle)  # drop counts, and a wake for its thread
        landed = LandedFilesCheck(prepared)
        landed.check_read_files()  # a file that grew since its batch (a resumed checkpoint)
        listener.handlers.insert(0, landed.handle)  # before totals: a batch's files judged
        listener.handlers.insert(0, WrittenRows(prepared))  # first: the log records it
        for query in built:
            out = query.output
            frame = out.sink.shape(query.frame, out.ctx)
            attach = out.sink.attach
            rows = row_by_row(settings, out)
            if rows is not None:  # real-time mode into a database: a ForeachWriter
                frame, foreach = attach_rows(rows, frame, out.ctx)
                attach = lambda stream, _ctx, foreach=foreach: foreach(stream)  # noqa: E731
            writer = frame.writeStream.queryName(out.ctx.query_name)
            writer = writer.outputMode(out.ctx.mode)
            writer = writer.option("checkpointLocation", str(out.ctx.checkpoint))
            if query.ingest is not None:
                # the ingest stage feeds the outputs: it runs at the run's trigger; it writes
                # the quarantine itself, so it marks the folder as the file sink would (reset)
                write_mark(query.ingest.quarantine, out.ctx.checkpoint)
                ready = apply_trigger(writer.foreachBatch(query.ingest), settings.trigger)
                started = start_query(ready)
            else:
                trigger = query_trigger(settings, quarantine=out.spec is None)
                ready = apply_trigger(attach(writer, out.ctx), trigger)
                started = start_query(ready)
                if rows is not None:
                    mark_real_time(rows, out.ctx, str(started.id))
            listener.register(str(started.id), out.ctx.query_name)
            queries[out.name] = started
            restarts[out.name] = lambda ready=ready: start_query(ready)
            if query.ingest is not None and settings.trigger.finite:
                # the outputs then read all of what it wrote, back to back as they would read
                # the input itself (an output beside it would catch up and run the no-data
                # batch of a new watermark between two batches, so a row near the watermark
                # could be judged late where a direct read keeps it). If it failed, none
                # starts, and Run.wait raises its failure with its code (KAFKA_DATA_LOST, ...)
                with contextlib.suppress(StreamingQueryException):
                    started.awaitTermination()
                if started.exception() is not None:
                    break
    except BaseException as exc:
        for started in queries.values():
            started.stop()
        spark.streams.removeListener(listener)
        first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        recorder.run_stopped([], f"failed to start: {first_line}")
        recorder.close()
        lock.release()
        raise
    return Run(
        spark,
        prepared,
        queries,
        lock,
        listener,
        totals,
        stop_requested=control,
        recorder=recorder,
        dead_letter=late.start(),
        landed=landed,
        restarts=restarts,
    )
