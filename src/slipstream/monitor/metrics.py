"""Prometheus metrics from query progress, on a registry the caller owns.

``SlipstreamMetrics(registry)`` registers its metrics on the given ``CollectorRegistry``
(never prometheus-client's global one, so tests and several runs in one process do not
collide). Feed it progress events with ``observe``, or hand ``handle`` to the listener as a
record handler. ``serve_metrics`` exposes a registry over HTTP for Prometheus to scrape.

Counters count per-batch numbers (rows dropped by the watermark, quarantined rows,
expectation violations): Spark reports those per micro-batch, and a batch seen twice (a
replayed log) is counted once. The watermark lag is computed when scraped, against the data's
clock (``health.data_clock``: the newest event time read, advanced by the time since), so it
keeps growing while a query makes no progress and a replay of old data is not months behind.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Counter, Gauge, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from slipstream.core.closing import Closing
from slipstream.monitor.events import Event, QueryProgress, QueryTerminated, parse_event
from slipstream.monitor.health import data_clock
from slipstream.monitor.hosts import IDLE_TIMEOUT, BoundedServer, guarded
from slipstream.monitor.kafka_lag import partition_lag
from slipstream.monitor.state import operator_label
from slipstream.monitor.timestamps import Clock, utc_now

LABELS = ("pipeline", "query")


class _WatermarkLag(Collector):
    """``slipstream_watermark_lag_seconds``: the data clock at scrape time minus the last
    watermark."""

    NAME = "slipstream_watermark_lag_seconds"
    HELP = "Seconds between the newest event read (advanced by the time since) and the watermark"

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._marks: dict[tuple[str, str], datetime] = {}
        self._newest: dict[tuple[str, str], tuple[datetime, datetime]] = {}  # event, read at
        self._lock = threading.Lock()

    def set(self, pipeline: str, query: str, progress: QueryProgress) -> None:
        """The batch's watermark (if any) and the newest event time it read (if newer)."""
        key, newest = (pipeline, query), progress.newest_event
        with self._lock:
            if progress.watermark is not None:
                self._marks[key] = progress.watermark
            if newest is not None and newest >= self._newest.get(key, (newest, newest))[0]:
                self._newest[key] = (newest, progress.ts)

    def remove(self, pipeline: str, query: str) -> None:
        with self._lock:
            self._marks.pop((pipeline, query), None)
            self._newest.pop((pipeline, query), None)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(self.NAME, self.HELP, labels=LABELS)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(self.NAME, self.HELP, labels=LABELS)
        now = self._clock()
        with self._lock:
            marks, newest = dict(self._marks), dict(self._newest)
        for (pipeline, query), mark in sorted(marks.items()):
            seen, read_at = newest.get((pipeline, query), (None, None))
            lag = data_clock(seen, read_at, now) - mark
            family.add_metric([pipeline, query], lag.total_seconds())
        yield family


class SlipstreamMetrics:
    """The slipstream metric set, labelled by ``pipeline`` and ``query``."""

    def __init__(self, registry: CollectorRegistry, clock: Clock = utc_now) -> None:
        self.registry = registry

        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> Gauge:
            return Gauge(name, doc, (*LABELS, *extra), registry=registry)

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> Counter:
            return Counter(name, doc, (*LABELS, *extra), registry=registry)

        self.input_rps = gauge(
            "slipstream_input_rows_per_second", "Rows per second arriving, last batch"
        )
        self.processed_rps = gauge(
            "slipstream_processed_rows_per_second", "Rows per second processed, last batch"
        )
        self.batch_duration = gauge(
            "slipstream_batch_duration_seconds", "Wall time of the last micro-batch"
        )
        self.batch_input_rows = gauge("slipstream_batch_input_rows", "Rows read by the last batch")
        self.state_rows = gauge("slipstream_state_rows", "Rows held in state, all operators")
        self.state_memory = gauge(
            "slipstream_state_memory_bytes", "Memory used by state stores, all operators"
        )
        self.operator_rows = gauge(
            "slipstream_state_operator_rows",
            "Rows held in state by one stateful operator (ID:NAME), last batch",
            ("operator",),
        )
        self.operator_memory = gauge(
            "slipstream_state_operator_memory_bytes",
            "Memory used by one stateful operator's store (ID:NAME), last batch",
            ("operator",),
        )
        self.last_progress = gauge(
            "slipstream_last_progress_timestamp_seconds",
            "Unix time at which the last reported batch was triggered",
        )
        # prometheus-client appends _total to counter names in the exposition
        self.dropped = counter(
            "slipstream_rows_dropped_by_watermark", "Late rows dropped by the watermark"
        )
        self.quarantined = counter("slipstream_quarantined_rows", "Rows sent to quarantine")
        self.violations = counter(
            "slipstream_expectation_violations", "Rows violating an expectation", ("rule",)
        )
        self.batches = counter("slipstream_batches_completed", "Micro-batches completed")
        self.kafka_lag = Gauge(
            "slipstream_kafka_consumer_lag_records",
            "Records behind the newest offset after the last batch, per Kafka TOPIC:PARTITION",
            (*LABELS, "partition"),
            registry=registry,
        )
        self.watermark_lag = _WatermarkLag(clock)
        registry.register(self.watermark_lag)
        self._last_batch: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock()

    def observe(self, progress: QueryProgress, pipeline: str | None = None) -> None:
        """Record one batch. ``pipeline`` defaults to the event's own pipeline."""
        labels = (pipeline or progress.pipeline, progress.query)
        self._set(self.input_rps, labels, progress.input_rps)
        self._set(self.processed_rps, labels, progress.processed_rps)
        duration = progress.batch_duration_ms
        self._set(self.batch_duration, labels, None if duration is None else duration / 1000)
        self.batch_input_rows.labels(*labels).set(progress.input_rows)
        self._set(self.state_rows, labels, progress.state_rows)
        self.state_memory.labels(*labels).set(progress.state_memory_bytes)
        for op in progress.state_operators:
            self._set(self.operator_rows, labels + (operator_label(op),), op.rows)
            self.operator_memory.labels(*labels, operator_label(op)).set(op.memory_bytes or 0)
        stamp = progress.batch_timestamp or progress.ts
        self.last_progress.labels(*labels).set(stamp.timestamp())
        if progress.executed:
            self.watermark_lag.set(*labels, progress)
        for partition, behind in (partition_lag(dict(progress.progress)) or {}).items():
            self.kafka_lag.labels(*labels, partition).set(behind)

        # an idle report names the next batch before it runs: counting it would count that
        # batch now, and skip it as a replay when it really runs
        if not progress.executed or not self._first_sighting(labels, progress):
            return
        self.batches.labels(*labels).inc()
        self.dropped.labels(*labels).inc(progress.dropped_by_watermark)
        self.quarantined.labels(*labels).inc(progress.quarantined)
        for rule, count in progress.expectation_violations.items():
            self.violations.labels(*labels, rule).inc(count)

    def observe_event(self, event: Event) -> None:
        """Progress updates the metrics; a terminated query stops reporting watermark lag."""
        if isinstance(event, QueryProgress):
            self.observe(event)
        elif isinstance(event, QueryTerminated):
            self.watermark_lag.remove(event.pipeline, event.query)

    def handle(self, record: Mapping[str, Any]) -> None:
        """A listener handler: takes one event-log record (a dict)."""
        self.observe_event(parse_event(record))

    def _first_sighting(self, labels: tuple[str, str], progress: QueryProgress) -> bool:
        batch = progress.batch_id
        if batch is None:
            return True
        key = (*labels, progress.query_id)
        with self._lock:
            if batch <= self._last_batch.get(key, -1):
                return False
            self._last_batch[key] = batch
            return True

    @staticmethod
    def _set(gauge: Gauge, labels: tuple[str, ...], value: float | None) -> None:
        if value is not None:  # unknown (NaN) rates leave the last known value
            gauge.labels(*labels).set(value)


@dataclass
class MetricsServer(Closing):
    """A running ``/metrics`` endpoint; ``close()`` stops it and frees the port."""

    host: str
    port: int
    _httpd: WSGIServer
    _thread: threading.Thread

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)


def serve_metrics(registry: CollectorRegistry, port: int, host: str = "127.0.0.1") -> MetricsServer:
    """Serve ``registry`` at ``http://host:port/metrics`` from a daemon thread.

    ``port=0`` picks a free port; the bound one is ``server.port``. The default host keeps
    the endpoint local; pass ``0.0.0.0`` deliberately to let a remote Prometheus scrape it.
    """
    box: dict[str, int] = {}
    app = guarded(make_wsgi_app(registry), host, lambda: box["port"])
    httpd = make_server(host, port, app, _BoundedWSGIServer, handler_class=_QuietHandler)
    box["port"] = bound = int(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, name="slipstream-metrics", daemon=True)
    thread.start()
    return MetricsServer(host=host, port=bound, _httpd=httpd, _thread=thread)


class _BoundedWSGIServer(BoundedServer, ThreadingWSGIServer):
    """prometheus_client's threading server, bounded (monitor/hosts.py)."""


class _QuietHandler(WSGIRequestHandler):
    timeout = IDLE_TIMEOUT  # a silent connection is closed (its thread freed)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (base signature)
        """Requests are not logged (Prometheus scrapes every few seconds)."""
