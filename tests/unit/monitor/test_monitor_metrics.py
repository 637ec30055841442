"""Prometheus metrics after observing recorded progress equal the progress's own numbers."""

from __future__ import annotations

import json
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from slipstream.monitor.eventlog import read_events
from slipstream.monitor.events import QueryProgress, QueryTerminated
from slipstream.monitor.metrics import SlipstreamMetrics, serve_metrics

FIXTURES = Path(__file__).parents[2] / "fixtures" / "eventlogs"
LABELS = {"pipeline": "trending", "query": "trending.windows"}


def scrape(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Sample name + sorted labels -> value, from the text exposition format."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted({**LABELS, **labels}.items())))]


def raw_progress(name: str, query: str) -> list[dict[str, Any]]:
    with open(FIXTURES / f"{name}.jsonl") as handle:
        records = [json.loads(line) for line in handle]
    return [r["progress"] for r in records if r["event"] == "progress" and r["query"] == query]


def progress_events(name: str, query: str) -> list[QueryProgress]:
    return [
        e
        for e in read_events(FIXTURES / f"{name}.jsonl")
        if isinstance(e, QueryProgress) and e.query == query
    ]


class FixedClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_metrics_equal_the_recorded_progress() -> None:
    events = progress_events("healthy", "trending.windows")
    raw = raw_progress("healthy", "trending.windows")
    clock = FixedClock(events[-1].ts + timedelta(seconds=3))
    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry, clock=clock)
    for event in events:
        metrics.observe(event, "trending")

    samples = scrape(generate_latest(registry).decode())
    last = raw[-1]
    assert value(samples, "slipstream_input_rows_per_second") == last["inputRowsPerSecond"]
    assert value(samples, "slipstream_processed_rows_per_second") == last["processedRowsPerSecond"]
    assert value(samples, "slipstream_batch_duration_seconds") == last["batchDuration"] / 1000
    assert value(samples, "slipstream_batch_input_rows") == last["numInputRows"]
    assert value(samples, "slipstream_state_rows") == sum(
        op["numRowsTotal"] for op in last["stateOperators"]
    )
    assert value(samples, "slipstream_state_memory_bytes") == sum(
        op["memoryUsedBytes"] for op in last["stateOperators"]
    )
    assert value(samples, "slipstream_last_progress_timestamp_seconds") == pytest.approx(
        datetime.fromisoformat(last["timestamp"]).timestamp()
    )
    watermark = datetime.fromisoformat(last["eventTime"]["watermark"])
    # against the data's clock: the newest event read, advanced by the time since that batch
    newest, read_at = max(
        (datetime.fromisoformat(p["eventTime"]["max"]), e.ts)
        for p, e in zip(raw, events, strict=True)
        if "max" in p["eventTime"]
    )
    assert value(samples, "slipstream_watermark_lag_seconds") == pytest.approx(
        (newest + (clock.now - read_at) - watermark).total_seconds()
    )

    assert value(samples, "slipstream_batches_completed_total") == len(raw)
    assert value(samples, "slipstream_rows_dropped_by_watermark_total") == sum(
        op["numRowsDroppedByWatermark"] for p in raw for op in p["stateOperators"]
    )
    assert value(samples, "slipstream_quarantined_rows_total") == sum(
        p["observedMetrics"]["quality"]["quarantined"] or 0 for p in raw
    )
    for rule in ("article_id_present", "views_non_negative"):
        assert value(samples, "slipstream_expectation_violations_total", rule=rule) == sum(
            p["observedMetrics"]["expectations"][rule] or 0 for p in raw
        )


def test_watermark_lag_grows_with_the_clock_between_batches() -> None:
    events = progress_events("stalled", "clickstream.sessions")
    clock = FixedClock(events[-1].ts)
    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry, clock=clock)
    for event in events:
        metrics.observe(event)
    labels = {"pipeline": "clickstream", "query": "clickstream.sessions"}
    key = ("slipstream_watermark_lag_seconds", tuple(sorted(labels.items())))
    before = scrape(generate_latest(registry).decode())[key]
    clock.now += timedelta(minutes=5)
    after = scrape(generate_latest(registry).decode())[key]
    assert after - before == pytest.approx(300)


def test_replayed_batches_are_counted_once() -> None:
    events = progress_events("healthy", "trending.windows")
    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry)
    for event in events + events:
        metrics.observe(event)
    samples = scrape(generate_latest(registry).decode())
    assert value(samples, "slipstream_batches_completed_total") == len(events)


def test_listener_records_drive_the_metrics_and_termination_drops_the_lag() -> None:
    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry)
    with open(FIXTURES / "failed.jsonl") as handle:
        for line in handle:
            metrics.handle(json.loads(line))
    text = generate_latest(registry).decode()
    samples = scrape(text)
    batches = raw_progress("failed", "orders.to_db")
    key = (("pipeline", "orders"), ("query", "orders.to_db"))
    assert samples[("slipstream_batches_completed_total", key)] == len(batches)
    assert samples[("slipstream_quarantined_rows_total", key)] == sum(
        p["observedMetrics"]["quality"]["quarantined"] or 0 for p in batches
    )
    assert "slipstream_watermark_lag_seconds{" not in text
    assert any(isinstance(e, QueryTerminated) for e in read_events(FIXTURES / "failed.jsonl"))


def test_metrics_stay_off_the_global_registry() -> None:
    before = set(REGISTRY._names_to_collectors)  # noqa: SLF001 (checking isolation)
    SlipstreamMetrics(CollectorRegistry())
    SlipstreamMetrics(CollectorRegistry())  # a second set does not collide
    assert set(REGISTRY._names_to_collectors) == before  # noqa: SLF001


def test_unknown_rates_keep_the_last_known_value() -> None:
    events = progress_events("healthy", "trending.windows")
    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry)
    metrics.observe(events[-1])
    blank = QueryProgress(
        events[-1].ts,
        "trending",
        "trending.windows",
        events[-1].query_id,
        events[-1].run_id,
        None,
        progress={"batchId": 10_000, "inputRowsPerSecond": float("nan")},
    )
    metrics.observe(blank)
    samples = scrape(generate_latest(registry).decode())
    assert value(samples, "slipstream_input_rows_per_second") == events[-1].input_rps


def test_serve_metrics_on_a_free_port() -> None:
    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry)
    for event in progress_events("healthy", "trending.windows"):
        metrics.observe(event)
    with serve_metrics(registry, port=0) as server:
        assert server.port > 0
        with urllib.request.urlopen(server.url, timeout=10) as response:
            body = response.read().decode()
    samples = scrape(body)
    assert value(samples, "slipstream_batch_input_rows") > 0
