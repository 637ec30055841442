"""What each CLI command does, as plain functions of typed settings (the tests call these)."""

from __future__ import annotations

import sys
from typing import TextIO

from slipstream import runner
from slipstream.checkpoints import CheckpointLock, delete_checkpoint, is_locked
from slipstream.config import Settings
from slipstream.errors import CheckpointError, find_error
from slipstream.monitor.listener import ConsoleReporter
from slipstream.pipelines import pipelines

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


def list_pipelines(out: TextIO) -> int:
    for name, pipeline in sorted(pipelines().items()):
        print(f"{name:<12} {pipeline.description}  -> {pipeline.output}", file=out)
    return EXIT_OK


def check(settings: Settings, out: TextIO) -> int:
    prepared = runner.prepare(settings, check_rules=False)
    print(prepared.explain(), file=out)
    problems = runner.check(prepared)
    if not problems:
        print("\nok: no rule refuses this plan", file=out)
        return EXIT_OK
    print("", file=out)
    for problem in problems:
        print(f"refused {problem.render()}", file=out)
    return EXIT_REFUSED


def run(settings: Settings, out: TextIO) -> int:
    from slipstream.session import build_session

    prepared = runner.prepare(settings)  # every rule, before Spark starts
    s = prepared.settings
    # Refuse a checkpoint in use now, not after ~10 s of Spark start-up (start() holds the lock).
    CheckpointLock(s.checkpoint_root).acquire().release()
    if not s.quiet:
        print(prepared.explain(), file=out, flush=True)
        print("", file=out, flush=True)
    from pyspark import SparkContext

    # process-wide (getActiveSession is per thread); no public API says "a context exists"
    started_here = SparkContext._active_spark_context is None
    spark = build_session(
        s.master,
        s.conf,
        app_name=f"slipstream-{s.pipeline}",
        log_level="WARN" if s.verbose else "ERROR",
    )
    handlers = [] if s.quiet else [ConsoleReporter(out, verbose=s.verbose)]
    run_ = runner.start(spark, prepared, handlers)
    try:
        run_.wait(s.duration)
    except Exception as exc:  # noqa: BLE001 - report a failed query, exit non-zero
        ours = find_error(str(exc))  # a sink's own error, wrapped by Spark's foreachBatch
        shown = ours.render() if ours else str(exc).splitlines()[0]
        print(f"slipstream: the query failed: {shown}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        summary(run_, out)
        # Stop Spark before the interpreter exits: its listener bus may still be delivering a
        # progress event to the Python listener, which fails with a Py4J stack trace once the
        # callback server is gone. Only a session started here: a caller's (a test's) stays.
        if started_here:
            spark.stop()
    return EXIT_OK


def summary(run_: runner.Run, out: TextIO) -> None:
    for query, t in sorted(run_.totals.by_query.items()):
        extra = f", duplicates dropped {t['duplicates']:,}" if t.get("duplicates") else ""
        extra += "".join(f", {rule} {n:,}" for rule, n in t["expectations"].items())
        print(
            f"summary {query}: {t['batches']} batches, {t['rows']:,} rows, quarantined "
            f"{t['quarantined']:,}, late (dropped by watermark) {t['late']:,}{extra}",
            file=out,
        )


def reset(
    settings: Settings,
    *,
    outputs: bool,
    yes: bool,
    out: TextIO,
    confirm_input: TextIO | None = None,
) -> int:
    prepared = runner.prepare(settings, check_rules=False, check_source=False)
    s = prepared.settings
    root = s.checkpoint_root
    if is_locked(root):
        raise CheckpointError(
            "CHECKPOINT_IN_USE",
            f"checkpoint {root} is in use by a run",
            f"stop it first: slipstream stop {s.pipeline}",
        )
    targets = [f"checkpoint {root}"]
    if outputs:
        targets += [
            f"results in {prepared.sink.describe(prepared.ctx)}",
            f"quarantine {s.quarantine_dir}",
            f"event log {s.event_log}",
        ]
    if not yes:
        print("This deletes:\n  " + "\n  ".join(targets), file=out)
        print("Type the pipeline name to confirm: ", end="", file=out, flush=True)
        answer = (confirm_input or sys.stdin).readline().strip()
        if answer != s.pipeline:
            raise CheckpointError(
                "RESET_REFUSED",
                "reset not confirmed; nothing was deleted",
                f"type {s.pipeline!r} at the prompt, or pass --yes",
            )
    removed = []
    if delete_checkpoint(root):
        removed.append(str(root))
    if outputs:
        import shutil

        removed += prepared.sink.reset(prepared.ctx)
        if s.quarantine_dir.exists():
            shutil.rmtree(s.quarantine_dir)
            removed.append(str(s.quarantine_dir))
        if s.event_log.exists():
            s.event_log.unlink()
            removed.append(str(s.event_log))
    print("removed: " + (", ".join(removed) if removed else "nothing (already clean)"), file=out)
    return EXIT_OK
