"""Monitoring a run: the servers `--metrics-port` and `--dashboard` ask for, in one call that
every way of running a pipeline shares (`slipstream run`, the demos, your own scripts):

    # before Spark starts, so a taken port fails fast
    monitoring = start_monitoring(prepared.settings, prepared.pipeline)
    monitoring.announce(out)
    run = runner.start(spark, prepared, [*my_handlers, *monitoring.handlers])
    ...
    monitoring.close()

Metrics are fed from the run's listener records; the dashboard follows the event logs under the
state directory (so it shows every pipeline there) and the pipeline's own results view."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO, TypeVar

from prometheus_client import CollectorRegistry

from slipstream.config import DEFAULT_DASHBOARD_PORT, Settings, load_settings
from slipstream.errors import ConfigError
from slipstream.monitor.dashboard import DashboardServer, EventLogStatus, serve_dashboard
from slipstream.monitor.eventlog import event_log_path, pipelines_in
from slipstream.monitor.events import Clock, utc_now
from slipstream.monitor.listener import Handler
from slipstream.monitor.metrics import MetricsServer, SlipstreamMetrics, serve_metrics
from slipstream.pipelines import Pipeline, get_pipeline
from slipstream.pipelines.registry import registered_pipeline

Server = TypeVar("Server")


@dataclass
class MonitorHandles:
    """What `start_monitoring` started: listener handlers for `runner.start`, and servers."""

    handlers: list[Handler] = field(default_factory=list)
    metrics: MetricsServer | None = None
    dashboard: DashboardServer | None = None
    registry: CollectorRegistry | None = None

    def addresses(self) -> list[str]:
        lines = []
        if self.dashboard is not None:
            lines.append(f"dashboard   {self.dashboard.url}")
        if self.metrics is not None:
            lines.append(f"metrics     {self.metrics.url}")
        return lines

    def announce(self, out: TextIO) -> None:
        for line in self.addresses():
            print(line, file=out, flush=True)

    def close(self) -> None:
        if self.dashboard is not None:
            self.dashboard.close()
            self.dashboard = None
        if self.metrics is not None:
            self.metrics.close()
            self.metrics = None

    def __enter__(self) -> MonitorHandles:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def start_monitoring(
    settings: Settings,
    pipeline: Pipeline | None = None,
    *,
    clock: Clock = utc_now,
) -> MonitorHandles:
    """Start what `settings` asks for (`metrics_port`, `dashboard`, both on `bind`).

    Port 0 picks a free port. The dashboard's default port falls back to a free one when taken;
    a port given explicitly that is taken fails with PORT_IN_USE."""
    pipeline = pipeline or get_pipeline(settings.pipeline)
    settings = pipeline.resolve(settings)
    handles = MonitorHandles()
    try:
        if settings.metrics_port is not None:
            registry = CollectorRegistry()
            metrics = SlipstreamMetrics(registry, clock)
            handles.registry = registry
            handles.metrics = bind_server(
                "--metrics-port",
                settings.metrics_port,
                lambda port: serve_metrics(registry, port, settings.bind),
                settings.bind,
            )
            handles.handlers.append(metrics.handle)
        if settings.dashboard is not None:
            status = EventLogStatus(settings.state_dir, clock=clock)

            def results() -> dict[str, Any] | None:
                return pipeline.results_view(settings)

            handles.dashboard = bind_server(
                "--dashboard",
                settings.dashboard,
                lambda port: serve_dashboard(status, results, port, settings.bind),
                settings.bind,
                fallback=settings.dashboard == DEFAULT_DASHBOARD_PORT,
            )
    except BaseException:
        handles.close()
        raise
    return handles


def bind_server(
    flag: str, port: int, serve: Callable[[int], Server], host: str, fallback: bool = False
) -> Server:
    """`serve(port)`, turning a taken port into PORT_IN_USE (or `serve(0)` with `fallback`)."""
    try:
        return serve(port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE and fallback:
            return serve(0)
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                "PORT_IN_USE",
                f"{flag} {port}: {host}:{port} is already in use",
                f"give {flag} another port, or 0 for any free port",
            ) from None
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{flag} {port}: cannot listen on {host}:{port}: {exc.strerror}",
            "give --bind an address of this machine (default 127.0.0.1)",
        ) from None


class StateDirResults:
    """Results provider of `slipstream dashboard`: the results view of `pipeline`, or of the
    pipeline whose event log changed last, with its default sink under `state_dir`."""

    def __init__(self, state_dir: Path, pipeline: str | None = None) -> None:
        self.state_dir = Path(state_dir)
        self.pipeline = pipeline
        self._resolved: dict[str, tuple[Pipeline, Settings] | None] = {}

    def latest(self) -> str | None:
        changed = {}
        for name in pipelines_in(self.state_dir):
            with contextlib.suppress(FileNotFoundError):  # reset meanwhile
                changed[name] = os.stat(event_log_path(self.state_dir, name)).st_mtime
        return max(changed, key=changed.__getitem__) if changed else None

    def __call__(self) -> dict[str, Any] | None:
        name = self.pipeline or self.latest()
        if name is None:
            return None
        if name not in self._resolved:
            try:
                pipeline = registered_pipeline(name)  # never a module named by a file
            except ConfigError:  # a log of a pipeline this installation does not know
                self._resolved[name] = None
            else:
                settings = pipeline.resolve(load_settings(name, {"state_dir": self.state_dir}))
                self._resolved[name] = (pipeline, settings)
        found = self._resolved[name]
        return None if found is None else found[0].results_view(found[1])
