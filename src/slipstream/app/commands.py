"""What each CLI command does, as plain functions of typed settings (the tests call these)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING, TextIO

from slipstream.app.exits import EXIT_FAILED, EXIT_OK, EXIT_REFUSED
from slipstream.app.summary import summary
from slipstream.checkpoint import start as checkpoint_start
from slipstream.checkpoint.integrity import refuse_damaged
from slipstream.checkpoint.lifecycle import (
    refuse_in_use,
    refuse_interrupted_reset,
    require_writable,
)
from slipstream.errors import SlipstreamError, ValidationError, query_failure
from slipstream.monitor.backfill import BackfillBar, pending_files, source_log
from slipstream.monitor.listener import ConsoleReporter
from slipstream.pipelines.registry import discover
from slipstream.runtime import compat, runner
from slipstream.runtime.bound import jdbc_drivers, uses_kafka
from slipstream.runtime.control import StopControl
from slipstream.runtime.explain import explain
from slipstream.runtime.interrupt import EXIT_INTERRUPTED, CtrlC, ctrl_c
from slipstream.runtime.ownership import refuse_foreign_outputs
from slipstream.settings.config import Settings
from slipstream.tools.views import results_view

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def list_pipelines(out: TextIO) -> int:
    from slipstream.monitor.console import show, table

    loaded, broken = discover()
    rows = [
        (
            name,
            ", ".join(i.name for i in p.inputs),
            ", ".join(o.name for o in p.outputs),
            p.description,
        )
        for name, p in sorted(loaded.items())
    ]
    rows += [(failed.name, "", "", f"BROKEN: {failed.error}") for failed in broken]
    show(out, table(("PIPELINE", "INPUTS", "OUTPUTS", "WHAT IT COMPUTES"), rows))
    return EXIT_FAILED if broken else EXIT_OK


def check(settings: Settings, out: TextIO, spark: SparkSession | None = None) -> int:
    """Bind and check the settings (no Spark), then build every query and apply every rule
    to the plan Spark analyzed for it. Starting Spark takes about 10 s here; no query starts."""
    import time

    from slipstream.settings.session import build_session

    try:  # what needs no plan is refused before Spark starts, as `run` does
        runner.prepare(settings)
    except ValidationError as problem:
        print(f"refused {problem.render()}", file=out)
        return EXIT_REFUSED
    prepared = runner.prepare(settings, check_rules=False)  # the rules need the plans
    s = prepared.settings
    print("building the queries to read their plans from Spark (no query starts)...", file=out)
    from pyspark import SparkContext

    began = time.monotonic()
    started_here = spark is None and SparkContext._active_spark_context is None
    spark = spark or build_session(
        s.master,
        s.conf,
        app_name=f"slipstream-check-{s.pipeline}",
        remote=s.remote,
        kafka=uses_kafka(prepared),
    )
    try:
        built = runner.build(spark, prepared)
        problems: list[SlipstreamError] = list(runner.check(prepared, built))
        verdicts = runner.restart_verdicts(spark, prepared, built)
    finally:
        if started_here:  # a caller's session (a test's) stays
            spark.stop()
    print(f"(Spark analyzed the plans in {time.monotonic() - began:.1f} s)\n", file=out)
    print(explain(prepared), file=out)
    print_verdicts(verdicts, out)
    for line in checkpoint_start.report(prepared.start_from):
        print(line, file=out)
    problems += [compat.refusal(prepared, v) for v, _ in verdicts.values() if v.refused]
    if not problems:
        print("\nok: no rule refuses these queries", file=out)
        return EXIT_OK
    print("", file=out)
    for problem in problems:
        print(f"refused {problem.render()}", file=out)
    return EXIT_REFUSED


def print_verdicts(verdicts: compat.Verdicts, out: TextIO) -> None:
    """Per output: what its checkpoint was built for, and whether this run fits it."""
    for verdict, _ in verdicts.values():
        print(f"\ncheckpoint of {verdict.output} ({verdict.checkpoint})", file=out)
        if verdict.recorded is not None:
            print("  built for:", file=out)
            for line in compat.describe_build(verdict.recorded):
                print(f"    {line}", file=out)
        print(f"  this run: {verdict.summary()}", file=out)
        for notice in verdict.notices:
            print(f"  note: {notice}", file=out)


def run(settings: Settings, out: TextIO) -> int:
    """Check, start and wait; Ctrl-C stops like `slipstream stop` (exit 130), a second one
    at once (runtime.interrupt)."""
    with ctrl_c() as interrupt:
        return _run(settings, out, interrupt)


def _run(settings: Settings, out: TextIO, interrupt: CtrlC) -> int:
    from slipstream.monitor.serve import start_monitoring
    from slipstream.settings.session import build_session

    prepared = runner.prepare(settings)  # every check that needs no plan, before Spark starts
    s = prepared.settings
    # Refuse a checkpoint in use now, not after ~10 s of Spark start-up (start() takes the lock;
    # looking here never takes it, so a run starting meanwhile is not refused because of us).
    require_writable(s.state_dir, "--state-dir")  # not a PermissionError after Spark started
    if s.checkpoint is not None:
        require_writable(s.checkpoint, "--checkpoint")
    refuse_in_use(s.checkpoint_root)
    refuse_interrupted_reset(s.checkpoint_root, s.pipeline)  # again under the lock, in start()
    refuse_damaged(runner.checkpoints_of(prepared))  # again under the lock, in start()
    refuse_foreign_outputs(prepared)  # again under the lock when the queries start
    if not s.quiet:
        print(explain(prepared), file=out, flush=True)
        print("", file=out, flush=True)
    from pyspark import SparkContext

    # process-wide (getActiveSession is per thread); no public API says "a context exists"
    started_here = SparkContext._active_spark_context is None
    # servers before Spark: a taken port fails fast (they are daemon threads if Spark fails)
    monitoring = start_monitoring(s, partial(results_view, prepared))
    monitoring.announce(out)
    if not s.quiet:
        print("starting Spark (Ctrl-C stops)...", file=out, flush=True)
    spark = build_session(
        s.master,
        s.conf,
        app_name=f"slipstream-{s.pipeline}",
        log_level="WARN" if s.verbose else "ERROR",
        remote=s.remote,
        kafka=uses_kafka(prepared),
        jdbc=jdbc_drivers(prepared),
    )
    interrupt.install()  # PySpark's SparkContext installed its own SIGINT handler
    handlers = [] if s.quiet else [ConsoleReporter(out, verbose=s.verbose)]
    bar = backfill_bar(prepared, out)
    if bar is not None and not s.verbose:
        handlers = [bar]  # the bar instead of one line per batch
    # metrics first: once a batch line is printed, /metrics shows that batch
    run_ = runner.start(spark, prepared, [*monitoring.handlers, *handlers], origin="cli")
    interrupt.attach(run_.request_stop)
    try:
        with stop_on_sigterm(run_):
            run_.wait(s.duration)
    except Exception as exc:  # noqa: BLE001 - report a failed query, exit non-zero
        # a sink's own error wrapped by Spark's foreachBatch, or memory that ran out
        ours = query_failure(str(exc), s.remote or spark.sparkContext.master, s.state_dir)
        shown = ours.render() if ours else str(exc).splitlines()[0]
        print(f"slipstream: the query failed: {shown}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if bar is not None:
            bar.close()
        monitoring.close()
        summary(run_, out)
        # Stop Spark before the interpreter exits: its listener bus may still be delivering a
        # progress event to the Python listener, which fails with a Py4J stack trace once the
        # callback server is gone. Only a session started here: a caller's (a test's) stays.
        if started_here:
            spark.stop()
    if interrupt.interrupted:
        print(f"stopped by Ctrl-C: {interrupted_where(run_)}", file=out, flush=True)
        return EXIT_INTERRUPTED
    return EXIT_OK


def interrupted_where(run_: runner.Run) -> str:
    """Where a run stopped by Ctrl-C left its checkpoint, and how to go on."""
    where = runner.batch_boundaries(run_.prepared.settings.checkpoint_root, run_.queries)
    return f"{where or 'no batch had started'}; the same command resumes from there"


def backfill_bar(prepared: runner.Prepared, out: TextIO) -> BackfillBar | None:
    """A progress bar for a finite run over the files source, when `out` is a terminal."""
    s = prepared.settings
    streams = [b for b in prepared.inputs.values() if b.source is not None]
    if not s.trigger.finite or s.quiet or len(streams) != 1 or streams[0].source.kind != "files":
        return None
    landing = streams[0].binding.path
    assert landing is not None
    log_dir = source_log(prepared.ctx.checkpoint)
    bar = BackfillBar(prepared.ctx.query_name, log_dir, pending_files(landing, log_dir), out)
    return bar if bar.enabled else None


@contextlib.contextmanager
def stop_on_sigterm(run_: runner.Run) -> Iterator[None]:
    """`kill PID` stops the run like `slipstream stop`: at a batch boundary, recorded."""
    control = run_.stop_requested
    if not isinstance(control, StopControl) or (
        threading.current_thread() is not threading.main_thread()
    ):
        yield
        return
    previous = signal.signal(
        signal.SIGTERM, lambda signum, frame: control.request("SIGTERM received")
    )
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
