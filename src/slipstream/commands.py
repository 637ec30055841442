"""What each CLI command does, as plain functions of typed settings (the tests call these)."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from slipstream import runner
from slipstream.checkpoints import CheckpointLock, delete_checkpoint, is_locked
from slipstream.config import Settings
from slipstream.control import StopControl
from slipstream.errors import CheckpointError, find_error, out_of_memory
from slipstream.monitor.backfill import BackfillBar, pending_files, source_log
from slipstream.monitor.listener import ConsoleReporter
from slipstream.pipelines.registry import discover

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


def list_pipelines(out: TextIO) -> int:
    loaded, broken = discover()
    for name, pipeline in sorted(loaded.items()):
        print(f"{name:<12} {pipeline.description}  -> {pipeline.output}", file=out)
    for failed in broken:
        print(f"{failed.name:<12} BROKEN: {failed.error}", file=out)
    return EXIT_FAILED if broken else EXIT_OK


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
    from slipstream.monitor.serve import start_monitoring
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
    # servers before Spark: a taken port fails fast (they are daemon threads if Spark fails)
    monitoring = start_monitoring(s, prepared.pipeline)
    monitoring.announce(out)
    spark = build_session(
        s.master,
        s.conf,
        app_name=f"slipstream-{s.pipeline}",
        log_level="WARN" if s.verbose else "ERROR",
    )
    handlers = [] if s.quiet else [ConsoleReporter(out, verbose=s.verbose)]
    bar = backfill_bar(prepared, out)
    if bar is not None and not s.verbose:
        handlers = [bar]  # the bar instead of one line per batch
    # metrics first: once a batch line is printed, /metrics shows that batch
    run_ = runner.start(spark, prepared, [*monitoring.handlers, *handlers], origin="cli")
    try:
        with stop_on_sigterm(run_):
            run_.wait(s.duration)
    except Exception as exc:  # noqa: BLE001 - report a failed query, exit non-zero
        # a sink's own error wrapped by Spark's foreachBatch, or memory that ran out
        ours = find_error(str(exc)) or out_of_memory(str(exc), s.master)
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
    return EXIT_OK


def backfill_bar(prepared: runner.Prepared, out: TextIO) -> BackfillBar | None:
    """A progress bar for a finite run over the files source, when `out` is a terminal."""
    s = prepared.settings
    if not s.trigger.finite or s.source != "files" or s.input is None or s.quiet:
        return None
    log_dir = source_log(prepared.ctx.checkpoint)
    bar = BackfillBar(prepared.ctx.query_name, log_dir, pending_files(s.input, log_dir), out)
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


def status(state_dir: Path, pipeline: str | None, as_json: bool, out: TextIO) -> int:
    """Health of each query from the event logs under `state_dir` (no Spark)."""
    from slipstream.monitor.events import utc_now
    from slipstream.monitor.status import format_status_table, load_status, to_json

    now = utc_now()
    statuses = [s for s in load_status(state_dir, now) if pipeline in (None, s.pipeline)]
    print(to_json(statuses, now) if as_json else format_status_table(statuses, now), file=out)
    if pipeline is not None and not statuses:
        print(f"slipstream: no event log of {pipeline} under {state_dir}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def stop(settings: Settings, out: TextIO, *, wait: bool = True, timeout: float = 120.0) -> int:
    """Ask the run holding this pipeline's checkpoint to stop at a batch boundary; by default
    wait until it has released the checkpoint."""
    from slipstream.control import request_stop, wait_released
    from slipstream.errors import SlipstreamError
    from slipstream.monitor.eventlog import read_events
    from slipstream.monitor.events import RunStopped
    from slipstream.monitor.status import pid_alive

    root = settings.checkpoint_root
    request = request_stop(root)
    if request is None:
        print(f"{settings.pipeline} is not running (no run holds {root})", file=out)
        return EXIT_OK
    print(f"asked {settings.pipeline} (pid {request.pid}) to stop at a batch boundary", file=out)
    if not wait:
        return EXIT_OK
    if not wait_released(root, request.pid, timeout, pid_alive):
        raise SlipstreamError(
            "STOP_TIMEOUT",
            f"{settings.pipeline} (pid {request.pid}) still holds {root} after {timeout:.0f} s",
            "a long batch may still be running: wait, or stop it with `kill PID` (SIGTERM stops "
            "at a batch boundary too)",
        )
    stopped = [e for e in read_events(settings.event_log) if isinstance(e, RunStopped)]
    mine = [e for e in stopped if e.pid == request.pid]
    print(f"stopped: {mine[-1].reason}" if mine else "stopped", file=out)
    return EXIT_OK


def dashboard(state_dir: Path, pipeline: str | None, port: int, bind: str, out: TextIO) -> int:
    """Serve the dashboard of every pipeline under `state_dir` until Ctrl-C (no Spark)."""
    from slipstream.monitor.dashboard import DashboardServer, EventLogStatus
    from slipstream.monitor.serve import StateDirResults, bind_server

    status_provider = EventLogStatus(state_dir)
    results = StateDirResults(state_dir, pipeline)
    server = bind_server(
        "--port", port, lambda p: DashboardServer(status_provider, results, p, bind), bind
    )
    print(
        f"dashboard   {server.url}  (state dir {state_dir}; Ctrl-C to stop)", file=out, flush=True
    )
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.server_close()
        status_provider.close()
    return EXIT_OK
