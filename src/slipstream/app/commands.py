"""What each CLI command does, as plain functions of typed settings (the tests call these)."""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from slipstream.app.summary import summary
from slipstream.checkpoint import start as checkpoint_start
from slipstream.checkpoint.integrity import refuse_damaged
from slipstream.checkpoint.lifecycle import (
    checkpoint_is_ours,
    clearing,
    interrupted_reset,
    is_locked,
    mark_reset,
    not_ours,
    refuse_in_use,
    refuse_interrupted_reset,
    require_writable,
)
from slipstream.errors import (
    CheckpointError,
    SlipstreamError,
    ValidationError,
    find_error,
    out_of_memory,
)
from slipstream.monitor.backfill import BackfillBar, pending_files, source_log
from slipstream.monitor.listener import ConsoleReporter
from slipstream.pipelines.registry import discover
from slipstream.runtime import compat, runner
from slipstream.runtime.bound import jdbc_drivers, uses_kafka
from slipstream.runtime.control import StopControl
from slipstream.runtime.deadletter import late_is_ours, reset_late
from slipstream.runtime.explain import explain
from slipstream.runtime.interrupt import EXIT_INTERRUPTED, CtrlC, ctrl_c
from slipstream.runtime.ownership import outputs_to_reset, refuse_foreign_outputs
from slipstream.settings.config import Settings
from slipstream.tools.views import results_view

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

EXIT_OK, EXIT_FAILED, EXIT_REFUSED = 0, 1, 2


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
        ours = find_error(str(exc)) or out_of_memory(
            str(exc), s.remote or spark.sparkContext.master
        )
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


@contextlib.contextmanager
def deferred_sigterm() -> Iterator[None]:
    """SIGTERM during the block ends the process after it (exit 143), not in the middle of a
    reset's deletes (main thread only; elsewhere the block runs as is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
    if received:
        print("slipstream: SIGTERM received: the reset finished first", file=sys.stderr)
        raise SystemExit(128 + signal.SIGTERM)


def reset(
    settings: Settings,
    *,
    outputs: bool | str,
    yes: bool,
    out: TextIO,
    confirm_input: TextIO | None = None,
) -> int:
    prepared = runner.prepare(settings, check_source=False)
    s = prepared.settings
    root = s.checkpoint_root
    if isinstance(outputs, str):
        return reset_output(prepared, outputs, yes=yes, out=out, confirm_input=confirm_input)
    if is_locked(root):
        raise CheckpointError(
            "CHECKPOINT_IN_USE",
            f"checkpoint {root} is in use by a run",
            f"stop it first: slipstream stop {s.pipeline}",
        )
    unfinished = interrupted_reset(root)
    if unfinished is not None and unfinished.get("outputs") and not outputs:
        print("an interrupted reset --outputs is finished first (its outputs too)", file=out)
        outputs = True
    targets = [f"checkpoint {root}"]
    if s.bronze_root.is_dir():
        targets.append(f"the ingest stage's typed rows {s.bronze_root}")
    # also those earlier runs recorded, but not those of another checkpoint (a copy's record)
    every, kept = outputs_to_reset(prepared) if outputs else ([], [])
    for line in kept:
        print(line, file=out)
    if outputs:
        targets += [f"output {out.name}: {out.sink.describe(out.ctx)}" for out in every]
        targets.append(f"late rows {s.late_root}")
        targets.append(f"event log {s.event_log}")
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
    # nothing is deleted unless everything to delete carries slipstream's mark
    if not checkpoint_is_ours(root):
        raise not_ours(root, "checkpoint")
    if outputs:
        for out_ in every:
            if not out_.sink.owns(out_.ctx):
                raise not_ours(out_.sink.describe(out_.ctx), f"output {out_.name}")
        if not late_is_ours(s.late_root):
            raise not_ours(s.late_root, "late-row dead-letter")
    removed: list[str] = []
    with deferred_sigterm(), clearing(root) as existed:  # the lock held while anything goes
        mark_reset(root, outputs)  # before the first delete: an interrupted reset is known
        # the ingest stage's typed rows belong to its checkpoint: a batch N found there would
        # be taken for a replay of the new checkpoint's batch N (runtime/ingest_stage.py)
        if s.bronze_root.is_dir():
            shutil.rmtree(s.bronze_root)
            removed.append(str(s.bronze_root))
        if outputs:
            for out_ in every:
                removed += out_.sink.reset(out_.ctx)
            removed += reset_late(s.late_root)
            if s.event_log.exists():
                s.event_log.unlink()
                removed.append(str(s.event_log))
    if existed:
        removed.insert(0, str(root))
    print("removed: " + (", ".join(removed) if removed else "nothing (already clean)"), file=out)
    return EXIT_OK


def reset_output(
    prepared: runner.Prepared,
    name: str,
    *,
    yes: bool,
    out: TextIO,
    confirm_input: TextIO | None = None,
) -> int:
    """`reset PIPELINE --outputs NAME`: one output's checkpoint and results, nothing else (a
    way out of STATE_INCOMPATIBLE that keeps the other outputs' state)."""
    from slipstream.checkpoint.lifecycle import clearing_query, query_checkpoint
    from slipstream.errors import ConfigError

    s = prepared.settings
    names = [o.name for o in prepared.pipeline.outputs]
    if name not in names:
        raise ConfigError(
            "CONFIG_UNKNOWN_KEY",
            f"--outputs {name}: pipeline {s.pipeline} has no output {name!r}",
            f"its outputs: {', '.join(names)}",
        )
    if is_locked(s.checkpoint_root):
        raise CheckpointError(
            "CHECKPOINT_IN_USE",
            f"checkpoint {s.checkpoint_root} is in use by a run",
            f"stop it first: slipstream stop {s.pipeline}",
        )
    every, kept = outputs_to_reset(prepared)
    mine = [o for o in every if o.name == name]
    for line in kept:
        if line.startswith(f"output {name} "):
            print(line, file=out)
    folder = query_checkpoint(s.checkpoint_root, name)
    targets = [f"checkpoint {folder}"] + [f"output {name}: {o.sink.describe(o.ctx)}" for o in mine]
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
    for o in mine:
        if not o.sink.owns(o.ctx):
            raise not_ours(o.sink.describe(o.ctx), f"output {o.name}")
    removed: list[str] = []
    late = s.late_root / name  # this output's late rows (runtime.deadletter)
    if late.exists() and not late_is_ours(s.late_root):
        raise not_ours(s.late_root, "late-row dead-letter")
    with clearing_query(s.checkpoint_root, name) as existed:
        for o in mine:
            removed += o.sink.reset(o.ctx)
        if late.is_dir():
            shutil.rmtree(late)
            removed.append(str(late))
    if existed:
        removed.insert(0, str(folder))
    print("removed: " + (", ".join(removed) if removed else "nothing (already clean)"), file=out)
    return EXIT_OK


def state(
    settings: Settings,
    out: TextIO,
    *,
    output: str | None = None,
    as_json: bool = False,
    keys: int = 0,
    batch: int | None = None,
    spark: SparkSession | None = None,
) -> int:
    """The state each output's checkpoint holds, per stateful operator, from the checkpoint
    alone (Spark's state-metadata and statestore readers; no query runs)."""
    import json

    from pyspark import SparkContext

    from slipstream.checkpoint.lifecycle import query_checkpoint
    from slipstream.errors import ConfigError
    from slipstream.monitor.console import show, table
    from slipstream.monitor.state import read_state
    from slipstream.pipelines import get_pipeline
    from slipstream.settings.session import build_session

    pipeline = get_pipeline(settings.pipeline)
    names = [o.name for o in pipeline.outputs]
    if output is not None and output not in names:
        raise ConfigError(
            "CONFIG_UNKNOWN_KEY",
            f"--output {output}: pipeline {pipeline.name} has no output {output!r}",
            f"its outputs: {', '.join(names)}",
        )
    root = settings.checkpoint_root
    wanted = [n for n in names if output in (None, n) and query_checkpoint(root, n).is_dir()]
    if not wanted:
        print(f"slipstream: no checkpoint of {pipeline.name} under {root}", file=sys.stderr)
        return EXIT_FAILED
    started_here = spark is None and SparkContext._active_spark_context is None
    spark = spark or build_session(
        "local[1]", settings.conf, app_name=f"slipstream-state-{pipeline.name}", log_level="ERROR"
    )
    try:
        found = {
            f"{pipeline.name}.{n}": read_state(
                spark, query_checkpoint(root, n), batch=batch, keys=keys
            )
            for n in wanted
        }
    finally:
        if started_here:
            spark.stop()
    if as_json:
        payload = {q: [op.to_dict() for op in ops] for q, ops in found.items()}
        print(json.dumps(payload, indent=2), file=out)
        return EXIT_OK
    started = checkpoint_start.read_record(root)  # a new version's start (--from-checkpoint)
    for line in checkpoint_start.report(started)[1:]:
        print(line.strip(), file=out)
    for query, ops in found.items():
        print(f"{query} ({query_checkpoint(root, query.split('.', 1)[1])})", file=out)
        if not ops:
            print("  no state: a stateless query", file=out)
            continue
        rows = [
            (
                f"{op.operator_id} {op.operator}"
                + ("" if op.store == "default" else f"/{op.store}"),
                "?" if op.rows is None else f"{op.rows:,}",
                f"{op.bytes_on_disk:,}",
                op.partitions,
                op.watermark or "-",
                op.oldest_event_time or "-",
                op.newest_event_time or "-",
                op.latest_batch,
            )
            for op in ops
        ]
        header = (
            "OPERATOR",
            "ROWS",
            "BYTES",
            "PARTITIONS",
            "WATERMARK",
            "OLDEST",
            "NEWEST",
            "BATCH",
        )
        show(out, table(header, rows))
        for op in ops:
            if op.error:
                print(f"  operator {op.operator_id}: rows not read: {op.error}", file=out)
            for line in op.sample:
                print(f"  {op.operator_id}: {line}", file=out)
    return EXIT_OK


def status(state_dir: Path, pipeline: str | None, as_json: bool, out: TextIO) -> int:
    """Health of each query from the event logs under `state_dir` (no Spark); with a pipeline
    named, also the latest rows of each of its outputs, asked of their sinks."""
    import json

    from slipstream.monitor.console import show, table
    from slipstream.monitor.events import utc_now
    from slipstream.monitor.status import load_status
    from slipstream.monitor.status_view import format_status_table, status_table, to_json

    now = utc_now()
    statuses = [s for s in load_status(state_dir, now) if pipeline in (None, s.pipeline)]
    latest = latest_rows(state_dir, pipeline) if pipeline and statuses else {}
    if as_json:
        payload = json.loads(to_json(statuses, now))
        if pipeline:
            payload["latest_rows"] = latest
        print(json.dumps(payload, indent=2, default=str), file=out)
    elif not statuses:
        print(f"{format_status_table(statuses, now)} (read {state_dir / 'events'})", file=out)
    else:
        show(out, status_table(statuses, now))
        print("\n" + "\n".join(f"{s.pipeline}/{s.query}: {s.reason}" for s in statuses), file=out)
        for name, view in latest.items():
            print(f"\nlatest rows of {name} ({view['sink']}):", file=out)
            show(out, table(view["columns"], view["rows"]) if view["rows"] else "(none yet)")
    if pipeline is not None and not statuses:
        print(f"slipstream: no event log of {pipeline} under {state_dir}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def latest_rows(state_dir: Path, pipeline: str, limit: int = 5) -> dict[str, dict[str, object]]:
    """query name -> the latest rows of each output of `pipeline` on its default sink under
    `state_dir` (what its sink can show; none for sinks that cannot be read back)."""
    prepared = StateDirResults(state_dir, pipeline).prepared(pipeline)
    if prepared is None:
        return {}
    shown: dict[str, dict[str, object]] = {}
    for out in prepared.outputs.values():
        if out.spec is None:
            continue  # the quarantine: raw records, not results
        view = out.sink.preview(out.ctx, limit=limit)
        if view is not None:
            shown[out.ctx.query_name] = {"sink": out.sink.describe(out.ctx), **view}
    return shown


def stop(settings: Settings, out: TextIO, *, wait: bool = True, timeout: float = 120.0) -> int:
    """Ask the run holding this pipeline's checkpoint to stop at a batch boundary; by default
    wait until it has released the checkpoint."""
    from slipstream.errors import SlipstreamError
    from slipstream.monitor.eventlog import read_events
    from slipstream.monitor.events import RunStopped
    from slipstream.monitor.status import pid_alive
    from slipstream.runtime.control import request_stop, wait_released

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
    from slipstream.monitor.serve import bind_server

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


class StateDirResults:
    """Results provider of `slipstream dashboard`: the results view of `pipeline`, or of the
    pipeline whose event log changed last, with its default sinks under `state_dir`."""

    def __init__(self, state_dir: Path, pipeline: str | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.pipeline = pipeline
        self._resolved: dict[str, runner.Prepared | None] = {}

    def latest(self) -> str | None:
        from slipstream.monitor.eventlog import event_log_path, pipelines_in

        changed = {}
        for name in pipelines_in(self.state_dir):
            with contextlib.suppress(FileNotFoundError):  # reset meanwhile
                changed[name] = event_log_path(self.state_dir, name).stat().st_mtime
        return max(changed, key=changed.__getitem__) if changed else None

    def prepared(self, name: str) -> runner.Prepared | None:
        """The pipeline `name` bound to its default sinks under the state dir (cached)."""
        from slipstream.errors import ConfigError
        from slipstream.pipelines.registry import registered_pipeline
        from slipstream.settings.config import load_settings

        if name not in self._resolved:
            try:
                pipeline = registered_pipeline(name)  # never a module named by a file
                settings = load_settings(name, {"state_dir": self.state_dir}, environ={})
                self._resolved[name] = runner.prepare(settings, pipeline, check_source=False)
            except ConfigError:  # a log of a pipeline this installation does not know
                self._resolved[name] = None
        return self._resolved[name]

    def __call__(self) -> dict[str, object] | None:
        name = self.pipeline or self.latest()
        found = None if name is None else self.prepared(name)
        return None if found is None else results_view(found)
