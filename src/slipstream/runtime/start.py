"""The start step: under the checkpoint's lock, refuse or record, then start every query.

lock -> the refusals again (runtime/refuse.py) -> build (runtime/build.py) -> the rules
(runtime/checks.py) -> record (runtime/record.py: the restart verdicts, `--from-checkpoint`'s
start, the ingest stage's marks, the outputs' ownership) -> the listener's guards
(runtime/watch.py) -> each query started (runtime/writers.py): ingest queries first -> a `Run`
(runtime/run.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import StreamingQuery

from slipstream.checkpoint.lifecycle import CheckpointLock
from slipstream.monitor.listener import Handler, RunListener
from slipstream.runtime.bound import Prepared, QueryKind
from slipstream.runtime.build import Query, build
from slipstream.runtime.checks import refuse_rules
from slipstream.runtime.partitions import STATE_ROWS_COUNTED
from slipstream.runtime.record import record_start
from slipstream.runtime.refuse import refuse_before_start
from slipstream.runtime.run import Run
from slipstream.runtime.watch import Watch
from slipstream.runtime.writers import start_one


def start(
    spark: SparkSession,
    prepared: Prepared,
    handlers: list[Handler] | None = None,
    *,
    origin: str = "api",
) -> Run:
    """Start the run's queries (ingest queries, outputs, then quarantines). Refuses a
    checkpoint in use, an output another checkpoint wrote, and any query a rule refuses,
    before starting any.

    Every run records its events in the pipeline's event log (`settings.event_log`);
    `origin` (cli, demo, harness, api) is the reason given in its `run_started` record."""
    lock = CheckpointLock(prepared.settings.checkpoint_root).acquire()
    watch = Watch.open(spark, prepared, list(handlers or []))
    queries: dict[str, StreamingQuery] = {}
    try:
        refuse_before_start(prepared, locked=True)  # under the lock: no reset can run meanwhile
        built = build(spark, prepared)
        refuse_rules(prepared, built)
        record_start(spark, prepared, built)
        watch.recorder.run_started([q.output.ctx.query_name for q in built], origin)
        late, landed = watch.guard(spark, prepared)
        restarts = _start_queries(prepared, built, watch.listener, queries)
    except BaseException as exc:
        for started in queries.values():
            started.stop()
        watch.abandon(spark, exc)
        lock.release()
        raise
    return Run(
        spark,
        prepared,
        queries,
        lock,
        watch.listener,
        watch.totals,
        stop_requested=watch.control,
        recorder=watch.recorder,
        dead_letter=late.start(),
        landed=landed,
        restarts=restarts,
    )


def _start_queries(
    prepared: Prepared,
    built: list[Query],
    listener: RunListener,
    queries: dict[str, StreamingQuery],
) -> dict[str, Callable[[], StreamingQuery]]:
    """Start each built query in order into `queries`; how to start each again."""
    settings = prepared.settings
    restarts: dict[str, Callable[[], StreamingQuery]] = {}
    names = prepared.spark_names
    for query in built:
        out = query.output
        started, again = start_one(settings, query, names.get(out.ctx.query_name))
        counted = query.settings.get(STATE_ROWS_COUNTED) != "false"
        listener.register(str(started.id), out.ctx.query_name, rows_counted=counted)
        queries[out.name] = started
        restarts[out.name] = again
        if query.output.kind is not QueryKind.OUTPUT and settings.trigger.finite:
            # an ingest or shared query: the outputs then read all of what it wrote, back to
            # back as they would read the input itself (an output beside it would catch up
            # and run the no-data batch of a new watermark between two batches, so a row near
            # the watermark could be judged late where a direct read keeps it). If it failed,
            # none starts, and Run.wait raises its failure with its code (KAFKA_DATA_LOST, ...)
            with contextlib.suppress(StreamingQueryException):
                started.awaitTermination()
            if started.exception() is not None:
                break
    return restarts
