"""The commands that look at a pipeline without running it: `state`, `status`, `stop`, `dashboard`
(and the dashboard's results provider)."""

from __future__ import annotations

import contextlib
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from slipstream.app.exits import EXIT_FAILED, EXIT_OK
from slipstream.checkpoint import start as checkpoint_start
from slipstream.runtime.bind import prepare
from slipstream.runtime.bound import Prepared
from slipstream.settings.config import Settings
from slipstream.tools.views import results_view

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
    from slipstream.monitor.state import no_state, read_state
    from slipstream.pipelines import get_pipeline
    from slipstream.runtime import shared_stage as shared
    from slipstream.settings.session import build_session

    pipeline = get_pipeline(settings.pipeline)
    # and the shared queries' (runtime/shared_stage.py), whose deduplication holds state
    names = [o.name for o in pipeline.outputs] + [
        shared.query_name(i) for i in pipeline.shared_inputs
    ]
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
            print(f"  {no_state(query_checkpoint(root, query.split('.', 1)[1]))}", file=out)
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
    from slipstream.monitor.status import load_status
    from slipstream.monitor.status_view import format_status_table, status_table, to_json
    from slipstream.monitor.timestamps import utc_now

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


def latest_rows(state_dir: Path, pipeline: str, limit: int = 5) -> dict[str, dict[str, Any]]:
    """query name -> the latest rows of each output of `pipeline` on its default sink under
    `state_dir` (what its sink can show; none for sinks that cannot be read back)."""
    prepared = StateDirResults(state_dir, pipeline).prepared(pipeline)
    if prepared is None:
        return {}
    shown: dict[str, dict[str, Any]] = {}
    for out in prepared.outputs.values():
        if not out.is_output:
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
        self._resolved: dict[str, Prepared | None] = {}

    def latest(self) -> str | None:
        from slipstream.monitor.eventlog import event_log_path, pipelines_in

        changed = {}
        for name in pipelines_in(self.state_dir):
            with contextlib.suppress(FileNotFoundError):  # reset meanwhile
                changed[name] = event_log_path(self.state_dir, name).stat().st_mtime
        return max(changed, key=changed.__getitem__) if changed else None

    def prepared(self, name: str) -> Prepared | None:
        """The pipeline `name` bound to its default sinks under the state dir (cached)."""
        from slipstream.errors import ConfigError
        from slipstream.pipelines.registry import registered_pipeline
        from slipstream.settings.config import load_settings

        if name not in self._resolved:
            try:
                pipeline = registered_pipeline(name)  # never a module named by a file
                settings = load_settings(name, {"state_dir": self.state_dir}, environ={})
                self._resolved[name] = prepare(settings, pipeline, check_source=False)
            except ConfigError:  # a log of a pipeline this installation does not know
                self._resolved[name] = None
        return self._resolved[name]

    def __call__(self) -> dict[str, object] | None:
        name = self.pipeline or self.latest()
        found = None if name is None else self.prepared(name)
        return None if found is None else results_view(found)
