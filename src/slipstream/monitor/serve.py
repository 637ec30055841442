"""Monitoring a run: the servers `--metrics-port` and `--dashboard` ask for, in one call that
every way of running a pipeline shares (`slipstream run`, the demos, your own scripts):

    # before Spark starts, so a taken port fails fast; `results` feeds the dashboard's table
    monitoring = start_monitoring(prepared.settings, results)
    monitoring.announce(out)
    run = runner.start(spark, prepared, [*my_handlers, *monitoring.handlers])
    ...
    monitoring.close()

Metrics are fed from the run's listener records; the dashboard follows the event logs under the
state directory (so it shows every pipeline there); its results table comes from a callable the
caller gives (the pipeline's results view, asked of its sink). Nothing here imports pipelines."""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

from prometheus_client import CollectorRegistry

from slipstream.core.closing import Closing
from slipstream.errors import ConfigError
from slipstream.monitor.dashboard import DashboardServer, EventLogStatus, serve_dashboard
from slipstream.monitor.listener import Handler
from slipstream.monitor.metrics import MetricsServer, SlipstreamMetrics, serve_metrics
from slipstream.monitor.timestamps import Clock, utc_now
from slipstream.settings.config import DEFAULT_DASHBOARD_PORT, Settings

Server = TypeVar("Server")


@dataclass
class MonitorHandles(Closing):
    """What `start_monitoring` started: listener handlers for `runtime.start`, and servers."""

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


ResultsProvider = Callable[[], "dict[str, Any] | None"]


def start_monitoring(
    settings: Settings,
    results: ResultsProvider | None = None,
    *,
    clock: Clock = utc_now,
) -> MonitorHandles:
    """Start what `settings` asks for (`metrics_port`, `dashboard`, both on `bind`).

    Port 0 picks a free port. The dashboard's default port falls back to a free one when taken;
    a port given explicitly that is taken fails with PORT_IN_USE."""
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
