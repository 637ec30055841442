"""A local web dashboard: per-query charts from the event log and a live results table.

Standard library only: a ``ThreadingHTTPServer`` serves the page and its script and style
from the package (``monitor/static``) and three JSON endpoints:

- ``/api/status``  ``{"generated", "since", "runs", "queries": [status + "series"]}`` from a
  status provider (``since``: when the page began to wait; ``runs``: each pipeline's latest
  run record, so the page can say that a run is still starting Spark)
- ``/api/results`` whatever the results provider returns, e.g. ``{"title", "columns",
  "rows", "updated"}``
- ``/healthz``     ``{"ok": true}``

Providers are plain callables, so the server knows nothing about Spark; ``EventLogStatus``
is the provider that follows the event logs under a state directory.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from slipstream.core.closing import Closing
from slipstream.monitor.eventlog import EventLogFollower, event_log_path, json_safe, pipelines_in
from slipstream.monitor.hosts import IDLE_TIMEOUT, REFUSAL, BoundedServer, host_allowed
from slipstream.monitor.status import (
    DEFAULT_STALL_AFTER,
    PidCheck,
    ProgressPoint,
    StatusTracker,
    pid_alive,
)
from slipstream.monitor.timestamps import Clock, format_ts, utc_now

logger = logging.getLogger(__name__)

StatusProvider = Callable[[], Mapping[str, Any]]
ResultsProvider = Callable[[], Mapping[str, Any] | None]

STATIC_FILES: dict[str, str] = {
    "index.html": "text/html; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
}
EMPTY_RESULTS: dict[str, Any] = {"title": None, "columns": [], "rows": [], "updated": None}
INTERNAL_ERROR = "internal error; the run's log has the details"


def series_of(points: Sequence[ProgressPoint]) -> dict[str, list[Any]]:
    """Column-wise chart data: ``t`` in epoch milliseconds, one list per measure."""
    return {
        "t": [int(p.ts.timestamp() * 1000) for p in points],
        "batch": [p.batch_id for p in points],
        "input_rps": [p.input_rps for p in points],
        "processed_rps": [p.processed_rps for p in points],
        "batch_duration_s": [
            None if p.batch_duration_ms is None else p.batch_duration_ms / 1000 for p in points
        ],
        "watermark_lag_s": [p.watermark_lag_s for p in points],
        "state_rows": [p.state_rows for p in points],
    }


def status_payload(
    tracker: StatusTracker, now: datetime, points: int = 120, since: datetime | None = None
) -> dict[str, Any]:
    """The ``/api/status`` document for everything ``tracker`` has seen: each query with its
    chart series, each pipeline's latest run record, and since when the page has been served
    (``since``: how long it has waited for a run that is still starting Spark)."""
    queries = []
    for status in tracker.statuses(now):
        entry = status.to_dict()
        entry["series"] = series_of(tracker.series(status.pipeline, status.query, points))
        queries.append(entry)
    return {
        "generated": format_ts(now),
        "since": format_ts(since or now),
        "runs": tracker.runs(),
        "queries": queries,
    }


class EventLogStatus:
    """Status provider over ``<state_dir>/events/*.jsonl``, read incrementally per call.

    New pipelines are picked up as their logs appear. Safe to call from several threads.
    """

    def __init__(
        self,
        state_dir: Path | str,
        clock: Clock = utc_now,
        pid_check: PidCheck = pid_alive,
        stall_after: timedelta = DEFAULT_STALL_AFTER,
        points: int = 120,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.clock = clock
        self.points = points
        self.tracker = StatusTracker(
            stall_after=stall_after, pid_check=pid_check, history=max(points, 5)
        )
        self._followers: dict[str, EventLogFollower] = {}
        self._lock = threading.Lock()
        self.since = clock()  # served before Spark starts: the page says how long it waited

    def __call__(self) -> dict[str, Any]:
        with self._lock:
            for pipeline in pipelines_in(self.state_dir):
                if pipeline not in self._followers:
                    path = event_log_path(self.state_dir, pipeline)
                    self._followers[pipeline] = EventLogFollower(path)
            for follower in self._followers.values():
                self.tracker.feed(follower.poll())
            return status_payload(self.tracker, self.clock(), self.points, self.since)

    def close(self) -> None:
        with self._lock:
            for follower in self._followers.values():
                follower.close()


def _static(name: str) -> bytes:
    return resources.files("slipstream.monitor").joinpath("static", name).read_bytes()


class _Handler(BaseHTTPRequestHandler):
    server: DashboardServer
    server_version = "slipstream-dashboard"
    timeout = IDLE_TIMEOUT  # a silent connection is closed (its thread freed)

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        if not host_allowed(self.headers.get("Host"), self.server.host, self.server.port):
            self._send(HTTPStatus.MISDIRECTED_REQUEST, "application/json", REFUSAL)
            return
        path = urlsplit(self.path).path
        if path in ("/", "/index.html"):
            self._file("index.html")
        elif path.startswith("/static/") and path[len("/static/") :] in STATIC_FILES:
            self._file(path[len("/static/") :])
        elif path == "/api/status":
            self._api(self.server.status_provider)
        elif path == "/api/results":
            self._api(lambda: self.server.results_provider() or EMPTY_RESULTS)
        elif path == "/healthz":
            self._json(HTTPStatus.OK, {"ok": True})
        else:
            self._json(HTTPStatus.NOT_FOUND, {"error": f"no such page: {path}"})

    def _file(self, name: str) -> None:
        self._send(HTTPStatus.OK, STATIC_FILES[name], _static(name))

    def _api(self, provider: Callable[[], Mapping[str, Any] | None]) -> None:
        try:
            payload = provider()
        except Exception:  # a broken provider must not take the page down
            # the exception's text stays in the log: it can name paths, tables or hosts
            logger.exception("dashboard provider failed")
            self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": INTERNAL_ERROR})
            return
        self._json(HTTPStatus.OK, payload or {})

    def _json(self, status: HTTPStatus, payload: Mapping[str, Any]) -> None:
        body = json.dumps(json_safe(payload), default=str, allow_nan=False).encode("utf-8")
        self._send(status, "application/json", body)

    def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (base signature)
        logger.debug("%s - %s", self.address_string(), format % args)


class DashboardServer(Closing, BoundedServer, ThreadingHTTPServer):
    """The dashboard's HTTP server; ``start()`` serves from a daemon thread (connections
    bounded, idle ones timed out: monitor/hosts.py)."""

    def __init__(
        self,
        status_provider: StatusProvider,
        results_provider: ResultsProvider | None = None,
        port: int = 0,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__((host, port), _Handler)
        self.status_provider = status_provider
        self.results_provider: ResultsProvider = results_provider or (lambda: None)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self.server_address[0])

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    def start(self) -> DashboardServer:
        self._thread = threading.Thread(
            target=self.serve_forever, name="slipstream-dashboard", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._thread is not None:
            self.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self.server_close()


def serve_dashboard(
    status_provider: StatusProvider,
    results_provider: ResultsProvider | None = None,
    port: int = 0,
    host: str = "127.0.0.1",
) -> DashboardServer:
    """Start the dashboard in the background; ``port=0`` picks a free port (``server.port``)."""
    return DashboardServer(status_provider, results_provider, port=port, host=host).start()
