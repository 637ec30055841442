"""Starting one query: the edge where a built query becomes Spark's `writeStream` call.

Its name, output mode and checkpoint; the sink's `attach` (or, in real-time mode into a
database, the JVM's upserting ForeachWriter, sinks/rows.py; or, for an ingest query, its
`foreachBatch`); the trigger; the quarantines it writes (ingest/quarantine.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from slipstream.core.specs import TriggerSpec, spark_interval
from slipstream.ingest.quarantine import owned as quarantine_settings
from slipstream.runtime.bound import BoundOutput, Prepared
from slipstream.runtime.build import Query
from slipstream.settings.config import Settings
from slipstream.settings.connect import start_query
from slipstream.sinks.base import SinkContext
from slipstream.sinks.database import DatabaseSink
from slipstream.sinks.rows import attach_rows, mark_real_time
from slipstream.sinks.spark_sinks import write_mark


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


def micro_batch_queries(prepared: Prepared) -> list[str]:
    """The queries (by slipstream's names) that run micro-batches: all but the outputs of a
    real-time run, whose batch is an epoch (minutes, while their rows flow)."""
    settings = prepared.settings
    return [
        o.ctx.query_name
        for o in prepared.outputs.values()
        if settings.trigger.kind != "real-time" or not o.is_output
    ]


def row_by_row(settings: Settings, output: BoundOutput) -> DatabaseSink | None:
    """The database sink of an output that real-time mode writes row by row (sinks/rows.py)."""
    if settings.trigger.kind != "real-time" or not output.is_output:
        return None
    return output.sink if isinstance(output.sink, DatabaseSink) else None


def start_one(
    settings: Settings, query: Query, name: str | None = None
) -> tuple[StreamingQuery, Callable[[], Any]]:
    """Start one built query, named `name` in Spark (default: slipstream's PIPELINE.OUTPUT);
    returns it and how to start it again (Run._start_again)."""
    out = query.output
    frame = out.sink.shape(query.frame, out.ctx)
    attach: Callable[[DataStreamWriter, SinkContext], DataStreamWriter] = out.sink.attach
    rows = row_by_row(settings, out)
    if rows is not None:  # real-time mode into a database: a ForeachWriter
        frame, foreach = attach_rows(rows, frame, out.ctx)

        def attach(stream: DataStreamWriter, _ctx: SinkContext) -> DataStreamWriter:
            return foreach(stream)

    writer = frame.writeStream.queryName(name or out.ctx.query_name)
    writer = writer.outputMode(out.ctx.mode)
    writer = writer.option("checkpointLocation", str(out.ctx.checkpoint))
    if query.ingest is not None:
        # the ingest stage feeds the outputs: it runs at the run's trigger; it writes the
        # quarantine itself, so it marks the folder as the file sink would (reset)
        write_mark(query.ingest.quarantine, out.ctx.checkpoint)
        ready = apply_trigger(writer.foreachBatch(query.ingest), settings.trigger)
    else:
        ready = apply_trigger(attach(writer, out.ctx), settings.trigger)
    start = out.sink.start if rows is None and query.ingest is None else None

    def begin() -> StreamingQuery:
        # the inputs whose quarantine it writes (their folders) and its own settings (late
        # rules, state store, the state's row count), in the session's settings while it
        # starts (Spark keeps a started query's settings and carries them to its tasks); the
        # session's own come back after
        conf = frame.sparkSession.conf
        owned = {**quarantine_settings(query.quarantines), **query.settings}
        before = {key: conf.get(key, None) for key in owned}
        for key, value in owned.items():
            conf.set(key, value)
        try:
            return start_query(ready, start=start)
        finally:
            for key, old in before.items():
                if old is None:
                    conf.unset(key)
                else:
                    conf.set(key, old)

    started = begin()
    if rows is not None:
        mark_real_time(rows, out.ctx, str(started.id))
    return started, begin
