"""What each CLI command does, as plain functions of typed settings (the tests call these)."""

from __future__ import annotations

import sys
from functools import partial
from typing import TYPE_CHECKING, TextIO

from slipstream.app.exits import EXIT_FAILED, EXIT_OK, EXIT_REFUSED
from slipstream.checkpoint import start as checkpoint_start
from slipstream.errors import SlipstreamError, ValidationError
from slipstream.pipelines.registry import discover
from slipstream.runtime import checks, compat, partitions
from slipstream.runtime.bind import prepare
from slipstream.runtime.bound import uses_delta, uses_kafka
from slipstream.runtime.build import build
from slipstream.runtime.checks import restart_verdicts
from slipstream.runtime.explain import explain
from slipstream.runtime.interrupt import EXIT_INTERRUPTED, CtrlC, ctrl_c
from slipstream.runtime.launch import failure_line, launch
from slipstream.runtime.run import Run, batch_boundaries
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
        prepare(settings)
    except ValidationError as problem:
        print(f"refused {problem.render()}", file=out)
        return EXIT_REFUSED
    prepared = prepare(settings, check_rules=False)  # the rules need the plans
    s = prepared.settings
    print("building the queries to read their plans from Spark (no query starts)...", file=out)
    from pyspark import SparkContext

    began = time.monotonic()
    started_here = spark is None and SparkContext._active_spark_context is None
    spark = spark or build_session(
        s.master,
        {**s.conf, **partitions.choose(prepared).conf()},
        app_name=f"slipstream-check-{s.pipeline}",
        remote=s.remote,
        connect_wait=s.connect_wait.total_seconds(),
        kafka=uses_kafka(prepared),
        delta=uses_delta(prepared),
    )
    try:
        built = build(spark, prepared)
        problems: list[SlipstreamError] = list(checks.check(prepared, built))
        verdicts = restart_verdicts(spark, prepared, built)
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
    for refused in problems:
        print(f"refused {refused.render()}", file=out)
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
    at once; SIGTERM stops at a batch boundary too (runtime.interrupt)."""
    with ctrl_c() as interrupt:
        return _run(settings, out, interrupt)


def _run(settings: Settings, out: TextIO, interrupt: CtrlC) -> int:
    prepared = prepare(settings)  # every check that needs no plan, before Spark starts
    s = prepared.settings
    with launch(
        prepared,
        out,
        origin="cli",
        interrupt=interrupt,
        results=partial(results_view, prepared),
        starting=None if s.quiet else "starting Spark (Ctrl-C stops)...",
        summarise=True,
        console=True,  # after a refusal, which is the whole answer: the header, then batches
    ) as launched:
        try:
            launched.run.wait(s.duration, idle=s.stop_when_idle)
        except Exception as exc:  # noqa: BLE001 - report a failed query, exit non-zero
            shown = failure_line(exc, launched)
            print(f"slipstream: the query failed: {shown}", file=sys.stderr)
            return EXIT_FAILED
    if interrupt.interrupted:
        print(f"stopped by Ctrl-C: {interrupted_where(launched.run)}", file=out, flush=True)
        return EXIT_INTERRUPTED
    return EXIT_OK


def interrupted_where(run_: Run) -> str:
    """Where a run stopped by Ctrl-C left its checkpoint, and how to go on."""
    where = batch_boundaries(run_.prepared.settings.checkpoint_root, run_.queries)
    return f"{where or 'no batch had started'}; the same command resumes from there"
