"""From settings to running queries: the one path `run`, `check` and the test harness share.

prepare()  no Spark: resolve defaults, build sources/sinks, validate every rule
start()    Spark: lock the checkpoint, read, parse, quarantine, transform, start queries
Run.wait() until the queries finish (finite triggers), --duration passes, Ctrl-C or a stop
           request; then stop at a batch boundary and release the checkpoint."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from slipstream.checkpoints import (
    CheckpointLock,
    last_committed_batch,
    last_planned_batch,
    query_checkpoint,
)
from slipstream.config import Settings
from slipstream.control import StopControl
from slipstream.errors import ConfigError, ValidationError
from slipstream.monitor.listener import Handler, RunListener, RunTotals
from slipstream.monitor.recorder import RunRecorder
from slipstream.pipelines import Pipeline, get_pipeline
from slipstream.plan import Plan, plan_of
from slipstream.quality.expectations import (
    Expectation,
    as_expectation_failure,
    check_expectations,
    enforce,
    route,
)
from slipstream.quality.parse import check_typed, parse_csv, parse_json
from slipstream.quality.quarantine import QUALITY_METRICS, accepted, quality_metrics, rejected
from slipstream.sinks import Sink, SinkContext, make_sink
from slipstream.sinks.base import SinkSpec
from slipstream.sources.base import Source, get_source
from slipstream.specs import TriggerSpec, format_duration, spark_interval
from slipstream.validate import validate, violations

RESULTS = "results"
QUARANTINE = "quarantine"


@dataclass
class Prepared:
    """Everything decided before Spark starts."""

    pipeline: Pipeline
    settings: Settings
    plan: Plan
    source: Source
    sink: Sink
    ctx: SinkContext
    expectations: tuple[Expectation, ...] = ()

    def explain(self) -> str:
        s = self.settings
        p = self.plan
        wm = (
            f"{p.watermark_column} - {format_duration(p.watermark_delay)}"
            if p.watermark_column and p.watermark_delay
            else "none"
        )
        lines = [
            f"pipeline    {self.pipeline.name}: {self.pipeline.description}",
            f"source      {self.source.describe(s)}",
            "operations  " + "\n            ".join(p.steps),
            f"stateful    {'yes' if p.stateful else 'no'}",
            f"watermark   {wm}",
            f"output mode {s.mode}",
            f"sink        {self.sink.describe(self.ctx)}",
            f"trigger     {s.trigger.describe()}",
            f"checkpoint  {s.checkpoint_root}",
            f"quarantine  {s.quarantine_dir}" if self.parses else "quarantine  none (text lines)",
        ]
        if self.expectations:
            rules = "\n            ".join(rule.describe() for rule in self.expectations)
            lines.append(f"expect      {rules}")
        return "\n".join(lines)

    @property
    def parses(self) -> bool:
        return parses_input(self.settings, self.pipeline)


def parses_input(settings: Settings, pipeline: Pipeline) -> bool:
    """Whether the run parses raw records (with reasons and a quarantine) before the pipeline."""
    return settings.format in ("json", "csv") or bool(pipeline.required)


def prepare(
    settings: Settings,
    pipeline: Pipeline | None = None,
    *,
    check_rules: bool = True,
    sink: Sink | None = None,
    check_source: bool = True,
) -> Prepared:
    pipeline = pipeline or get_pipeline(settings.pipeline)
    settings = pipeline.resolve(settings)
    assert settings.source and settings.mode and settings.sink
    if settings.source not in pipeline.sources:
        raise ConfigError(
            "SOURCE_NOT_SUPPORTED",
            f"pipeline {pipeline.name} cannot read --source {settings.source}",
            f"use one of: {', '.join(pipeline.sources)}",
        )
    source = get_source(settings.source)
    if check_source:
        source.validate(settings)
        pipeline.validate(settings)
    rules = check_expectations(pipeline.expectations(settings))
    plan = replace(pipeline.plan(settings), quarantine=parses_input(settings, pipeline))
    sink = sink or make_sink(settings.sink, settings.default_database)
    ctx = SinkContext(
        pipeline=pipeline.name,
        query_name=f"{pipeline.name}.{RESULTS}",
        table=settings.table or pipeline.output,
        key=pipeline.key,
        mode=settings.mode,
        checkpoint=query_checkpoint(settings.checkpoint_root, RESULTS),
    )
    prepared = Prepared(pipeline, settings, plan, source, sink, ctx, rules)
    if rules and not prepared.parses:
        raise ConfigError(
            "EXPECTATION_INVALID",
            f"pipeline {pipeline.name} declares expectations on unparsed {settings.format} input",
            "expectations need typed records: read json or csv with a declared schema",
        )
    if check_rules:
        validate(
            plan, settings.mode, settings.sink, settings.trigger, settings.source, pipeline.modes
        )
    return prepared


def check(prepared: Prepared) -> list[Any]:
    s = prepared.settings
    assert s.mode and s.sink and s.source
    return violations(prepared.plan, s.mode, s.sink, s.trigger, s.source, prepared.pipeline.modes)


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


@dataclass
class Run:
    """The queries of one pipeline run, with the lock on their checkpoint."""

    spark: SparkSession
    prepared: Prepared
    queries: dict[str, StreamingQuery]
    lock: CheckpointLock
    listener: RunListener
    totals: RunTotals
    stop_requested: Callable[[], bool] = field(default=lambda: False)
    recorder: RunRecorder | None = None  # the event log (run_started/run_stopped and events)
    stop_reason: str | None = None  # why the run stopped, for `run_stopped`
    _stopped: bool = False
    # queries this run stopped while they were running (see raise_failure)
    interrupted: set[str] = field(default_factory=set)

    def process_all_available(self) -> None:
        """Block until every query has processed all input available now (tests, backfills)."""
        for query in self.queries.values():
            try:
                query.processAllAvailable()
            except Exception as exc:
                failure = as_expectation_failure(exc)
                if failure is None:
                    raise
                raise failure from exc
        self.sync_progress()

    def sync_progress(self) -> None:
        """Wait until the listener has seen each query's last progress (bounded, no sleep):
        Spark updates `lastProgress` before processAllAvailable returns, but delivers listener
        events asynchronously.

        Only executed batches count: an idle query also appends progress entries (no
        `addBatch` timing, carrying the id of the batch it has not run yet) that reach
        listeners as idle events, not progress events, so waiting for `lastProgress` would
        time out (60 s) whenever a query had been idle for noDataProgressEventInterval."""
        for name, query in self.queries.items():
            executed = [p["batchId"] for p in query.recentProgress if "addBatch" in p["durationMs"]]
            if executed:
                self.totals.wait_for(f"{self.prepared.pipeline.name}.{name}", max(executed))

    def wait(self, duration: timedelta | None = None, poll: float = 0.5) -> None:
        """Until the queries finish (finite triggers: all of them; otherwise: any of them),
        `duration` passes, Ctrl-C or a stop request; then stop and raise a query's failure."""
        deadline = time.monotonic() + duration.total_seconds() if duration else None
        finite = self.prepared.settings.trigger.finite
        # Wait on this run's own queries: the session's awaitAnyTermination would also raise
        # the failure of any earlier query of the session (another run, a previous test).
        # A failure is raised after the stop, by raise_failure (which maps expectation errors).
        try:
            while True:
                ended = [n for n, q in self.queries.items() if not q.isActive]
                if ended and (not finite or len(ended) == len(self.queries)):
                    self.stop_reason = self._ended_reason(ended, finite)
                    if finite:
                        self.sync_progress()  # the summary counts the last batch
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    assert duration is not None
                    self.stop_reason = f"--duration {format_duration(duration)} elapsed"
                    break
                if self.stop_requested():
                    reason = getattr(self.stop_requested, "reason", None)
                    self.stop_reason = reason or "stop requested"
                    break
                running = next((q for q in self.queries.values() if q.isActive), None)
                if running is not None:
                    with contextlib.suppress(StreamingQueryException):
                        running.awaitTermination(poll)
        except KeyboardInterrupt:
            self.stop_reason = "interrupted (Ctrl-C)"
            raise
        finally:
            self.stop()
        self.raise_failure()

    def _ended_reason(self, ended: list[str], finite: bool) -> str:
        pipeline = self.prepared.pipeline.name
        failed = [n for n in ended if self.queries[n].exception() is not None]
        if failed:
            return "query " + ", ".join(f"{pipeline}.{n}" for n in failed) + " failed"
        if finite:
            return f"finished: all input processed (trigger {self.prepared.settings.trigger.kind})"
        return "query " + ", ".join(f"{pipeline}.{n}" for n in ended) + " stopped"

    def raise_failure(self) -> None:
        """Raise the first query failure. A query `stop()` interrupted mid-batch may end with
        an error caused by the interruption itself (inside a foreachBatch it surfaces as
        FOREACH_BATCH_USER_FUNCTION_ERROR, which Spark does not recognise as a stop); that
        batch was not committed and is replayed at the next start, so it is not a failure."""
        for name, query in self.queries.items():
            if name in self.interrupted:
                continue
            error = query.exception()
            if error is not None:
                raise as_expectation_failure(error) or error

    def stop(self, reason: str | None = None) -> None:
        """Stop every query at a batch boundary, record `run_stopped`, release the checkpoint.
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        reason = reason or self.stop_reason or "stopped by the caller"
        try:
            for name, query in self.queries.items():
                if _stop_at_batch_boundary(query):
                    self.interrupted.add(name)
        finally:
            if self.recorder is not None:
                # the listener bus delivers each query's last events after stop() returns
                self.recorder.wait_terminated(str(q.id) for q in self.queries.values())
            with contextlib.suppress(Exception):  # already removed / session gone
                self.spark.streams.removeListener(self.listener)
            if self.recorder is not None:
                where = batch_boundaries(self.prepared.settings.checkpoint_root, self.queries)
                names = [f"{self.prepared.pipeline.name}.{n}" for n in self.queries]
                self.recorder.run_stopped(names, f"{reason}; {where}" if where else reason)
                self.recorder.close()
            if isinstance(self.stop_requested, StopControl):
                self.stop_requested.clear()
            self.lock.release()

    def results(self) -> DataFrame | None:
        return self.prepared.sink.read(self.spark, self.prepared.ctx)


def _stop_at_batch_boundary(
    query: StreamingQuery, timeout: float = 60.0, poll: float = 0.005
) -> bool:
    """Stop `query` between two triggers (waiting at most `timeout`); True when it was still
    running, so that this stop ended it.

    Spark has no graceful stop: `stop()` interrupts a running batch. Between triggers
    (`isTriggerActive` false) the last batch has written its commit, and `stop()` marks the query
    terminated before the next trigger can plan a batch. `isDataAvailable` is no guide: Spark
    reports it false while it writes the next batch's offsets. What remains is the few
    milliseconds between reading the status and `stop()` reaching the JVM; `batch_boundaries`
    says afterwards where each checkpoint stands."""
    deadline = time.monotonic() + timeout
    while query.isActive:
        if not query.status.get("isTriggerActive") or time.monotonic() >= deadline:
            query.stop()
            return True
        query.awaitTermination(poll)
    return False


def batch_boundaries(root: Path, queries: dict[str, StreamingQuery]) -> str:
    """Where each query's checkpoint stands: its last committed batch, or the batch whose
    offsets were written without a commit (cut; Spark replays it on the next start)."""
    committed, cut = [], []
    for name in queries:
        checkpoint = query_checkpoint(root, name)
        planned = last_planned_batch(checkpoint)
        done = last_committed_batch(checkpoint)
        if planned is None:
            continue
        if done is not None and done >= planned:
            committed.append(f"{name} {done}")
        else:
            cut.append(f"{name} {planned}")
    parts = []
    if committed:
        parts.append("at a batch boundary, last committed batch: " + ", ".join(committed))
    if cut:
        parts.append("cut before its commit (replayed on restart): " + ", ".join(cut))
    return "; ".join(parts)


def read_records(spark: SparkSession, prepared: Prepared) -> DataFrame:
    """Source -> one row per record with typed columns and a `_reason` (NULL when valid)."""
    pipeline = prepared.pipeline
    settings = prepared.settings
    assert settings.format
    raw = prepared.source.read(spark, settings, settings.format, pipeline.schema)
    if raw.format == "json":
        assert pipeline.schema is not None, f"{pipeline.name} declares no schema for json"
        return parse_json(raw.frame, pipeline.schema, pipeline.required)
    if raw.format == "csv":
        assert pipeline.schema is not None
        return parse_csv(raw.frame, pipeline.schema, pipeline.required)
    if raw.format == "typed" and pipeline.schema is not None and pipeline.required:
        return check_typed(raw.frame, pipeline.schema, pipeline.required)
    return raw.frame


def start(
    spark: SparkSession,
    prepared: Prepared,
    handlers: list[Handler] | None = None,
    *,
    origin: str = "api",
) -> Run:
    """Start the run's queries (results, quarantine, extras). Refuses a checkpoint in use.

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
        records = read_records(spark, prepared)
        rules = prepared.expectations
        if prepared.parses:
            # expectations: counted (and `fail` enforced) on the results branch only; `drop`
            # rules set a reason on both branches, so the quarantine query receives those rows
            checked = route(enforce(records, rules), rules)
            valid = accepted(checked.observe(QUALITY_METRICS, *quality_metrics()))
        else:
            valid = records
        result = pipeline.transform(valid, settings, spark)
        outputs: list[tuple[str, DataFrame, Sink, SinkContext]] = [
            (RESULTS, result, prepared.sink, prepared.ctx)
        ]
        if prepared.parses:
            qspec = SinkSpec("json", str(settings.quarantine_dir))
            outputs.append(
                (
                    QUARANTINE,
                    rejected(route(records, rules)),
                    make_sink(qspec, Path()),
                    _ctx(prepared, QUARANTINE, "quarantine", (), "append"),
                )
            )
        for extra in pipeline.extra_outputs(result, valid, settings, spark):
            outputs.append(
                (
                    extra.name,
                    extra.frame,
                    make_sink(extra.sink, settings.default_database),
                    _ctx(prepared, extra.name, extra.name, extra.key, extra.mode),
                )
            )
        # every rule, on the plan each output's query will really run (read from Spark), before
        # any query starts: the declared plan was checked before Spark; this also covers the
        # outputs no declaration describes (quarantine, archive, extras)
        refused = [
            problem for _, frame, sink, ctx in outputs for problem in output_violations(
                frame, ctx, sink, prepared, offered=pipeline.modes if ctx is prepared.ctx else None
            )
        ]  # fmt: skip
        if refused:
            raise refused[0]
        recorder.run_started([ctx.query_name for _, _, _, ctx in outputs], origin)
        for name, frame, sink, ctx in outputs:
            writer = frame.writeStream.queryName(ctx.query_name).outputMode(ctx.mode)
            writer = writer.option("checkpointLocation", str(ctx.checkpoint))
            writer = apply_trigger(sink.attach(writer, ctx), settings.trigger)
            query = writer.start()
            listener.register(str(query.id), ctx.query_name)
            queries[name] = query
    except BaseException as exc:
        for query in queries.values():
            query.stop()
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
    )


def output_violations(
    frame: DataFrame,
    ctx: SinkContext,
    sink: Sink,
    prepared: Prepared,
    offered: tuple[Any, ...] | None = None,
) -> list[ValidationError]:
    """The rules broken by one output's query, read from its analyzed plan; each message names
    the output."""
    s = prepared.settings
    assert s.source is not None
    plan = replace(plan_of(frame), quarantine=prepared.parses and ctx is prepared.ctx)
    return [
        ValidationError(v.code, f"output {ctx.query_name}: {v.message}", v.fix)
        for v in violations(plan, ctx.mode, sink.spec, s.trigger, s.source, offered)
    ]


def _ctx(prepared: Prepared, name: str, table: str, key: tuple[str, ...], mode: Any) -> SinkContext:
    return SinkContext(
        pipeline=prepared.pipeline.name,
        query_name=f"{prepared.pipeline.name}.{name}",
        table=table,
        key=key,
        mode=mode,
        checkpoint=query_checkpoint(prepared.settings.checkpoint_root, name),
    )
