"""Parsing event-log records (recorded from real PySpark queries) into typed events."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from slipstream.monitor import events as ev

FIXTURES = Path(__file__).parents[2] / "fixtures" / "eventlogs"
SCENARIOS = ("healthy", "falling_behind", "stalled", "failed")


def records(name: str) -> list[dict[str, Any]]:
    with open(FIXTURES / f"{name}.jsonl") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def progress_records(name: str, query: str | None = None) -> list[dict[str, Any]]:
    return [
        r
        for r in records(name)
        if r["event"] == "progress" and (query is None or r["query"] == query)
    ]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_recorded_line_parses_to_its_kind(scenario: str) -> None:
    kinds = {
        "run_started": ev.RunStarted,
        "run_stopped": ev.RunStopped,
        "started": ev.QueryStarted,
        "progress": ev.QueryProgress,
        "idle": ev.QueryIdle,
        "terminated": ev.QueryTerminated,
    }
    for record in records(scenario):
        event = ev.parse_event(record)
        assert isinstance(event, kinds[record["event"]])
        assert event.ts.tzinfo is not None
        assert event.pipeline == record["pipeline"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_progress_accessors_match_the_raw_spark_json(scenario: str) -> None:
    for record in progress_records(scenario):
        raw = record["progress"]
        event = ev.parse_event(record)
        assert isinstance(event, ev.QueryProgress)
        assert event.batch_id == raw["batchId"]
        assert event.input_rows == raw["numInputRows"]
        # the first batch after a start reads rows at "0.0 rows/s": Spark had no earlier
        # trigger to measure from, so no rate
        first = raw["inputRowsPerSecond"] == 0 and raw["numInputRows"] > 0
        assert event.input_rps == (None if first else pytest.approx(raw["inputRowsPerSecond"]))
        assert event.processed_rps == pytest.approx(raw["processedRowsPerSecond"])
        assert event.duration_ms == raw["durationMs"]
        assert event.batch_duration_ms == raw["batchDuration"]
        operators = raw["stateOperators"]
        assert event.state_rows == sum(op["numRowsTotal"] for op in operators)
        assert event.state_memory_bytes == sum(op["memoryUsedBytes"] for op in operators)
        assert event.dropped_by_watermark == sum(
            op["numRowsDroppedByWatermark"] for op in operators
        )
        quality = raw.get("observedMetrics", {}).get("quality", {})
        assert event.quarantined == (quality.get("quarantined") or 0)
        expectations = raw.get("observedMetrics", {}).get("expectations", {})
        counted = {rule: n for rule, n in expectations.items() if n is not None}
        assert event.expectation_violations == counted
        watermark = raw.get("eventTime", {}).get("watermark")
        if watermark is None or watermark.startswith("1970-01-01"):
            assert event.watermark is None
        else:
            assert event.watermark == datetime.fromisoformat(watermark)


def test_recorded_stateful_batches_carry_watermark_state_and_late_rows() -> None:
    events = [ev.parse_event(r) for r in progress_records("healthy", "trending.windows")]
    assert any(e.watermark is not None for e in events)
    assert any(e.state_rows > 0 for e in events)
    assert sum(e.dropped_by_watermark for e in events) > 0
    assert sum(e.quarantined for e in events) > 0
    assert {"article_id_present", "views_non_negative"} <= set(events[-1].expectation_violations)


def test_terminated_with_exception_is_failed() -> None:
    (term,) = [ev.parse_event(r) for r in records("failed") if r["event"] == "terminated"]
    assert isinstance(term, ev.QueryTerminated)
    assert term.failed
    assert term.exception is not None and "connection to 127.0.0.1:5432 refused" in term.exception


def test_missing_keys_and_non_finite_rates_are_tolerated() -> None:
    record = {
        "event": "progress",
        "ts": "2024-05-01T12:00:00Z",
        "pipeline": "p",
        "query_id": "q-1",
        "progress": {
            "name": "p.q",
            "inputRowsPerSecond": math.nan,
            "processedRowsPerSecond": "Infinity",
            "sources": [{"numInputRows": 3}, {"numInputRows": 4}],
            "stateOperators": [{"numRowsTotal": None}, "junk"],
            "observedMetrics": {"quality": {"quarantined": None}, "expectations": "junk"},
            "eventTime": {"watermark": "1970-01-01T00:00:00.000Z"},
        },
    }
    event = ev.parse_event(record)
    assert isinstance(event, ev.QueryProgress)
    assert event.query == "p.q"  # falls back to the progress's name
    assert event.input_rows == 7  # summed over sources when numInputRows is absent
    assert event.input_rps is None and event.processed_rps is None
    assert event.batch_id is None and event.batch_duration_ms is None
    assert event.watermark is None  # Spark's epoch placeholder means "no watermark yet"
    assert event.state_rows == 0 and event.dropped_by_watermark == 0
    assert event.quarantined == 0 and event.expectation_violations == {}


def test_events_round_trip_through_to_dict() -> None:
    for scenario in SCENARIOS:
        for record in records(scenario):
            event = ev.parse_event(record)
            assert ev.parse_event(json.loads(json.dumps(event.to_dict()))) == event


@pytest.mark.parametrize(
    ("record", "code"),
    [
        ({"event": "progress", "pipeline": "p", "query_id": "x"}, "EVENT_MISSING_FIELD"),
        ({"event": "progress", "ts": "yesterday", "pipeline": "p"}, "EVENT_BAD_TIMESTAMP"),
        ({"event": "boom", "ts": "2024-05-01T12:00:00Z", "pipeline": "p"}, "EVENT_UNKNOWN_KIND"),
        ({"event": "idle", "ts": "2024-05-01T12:00:00Z", "pipeline": "p"}, "EVENT_MISSING_FIELD"),
        ({"event": "idle", "ts": "2024-05-01T12:00:00Z", "query_id": "x"}, "EVENT_MISSING_FIELD"),
        (["progress", "2024-05-01T12:00:00Z"], "EVENT_NOT_AN_OBJECT"),
    ],
)
def test_records_that_are_not_events_are_refused_with_a_code(
    record: dict[str, Any], code: str
) -> None:
    with pytest.raises(ev.EventFormatError) as caught:
        ev.parse_event(record)
    assert caught.value.code == code


def test_timestamps_are_aware_utc_and_format_like_spark() -> None:
    assert ev.parse_ts("2024-05-01T12:00:00.250Z") == datetime(2024, 5, 1, 12, 0, 0, 250000, UTC)
    assert ev.parse_ts("2024-05-01T14:00:00+02:00") == datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert ev.parse_ts("not a time") is None
    assert ev.format_ts(datetime(2024, 5, 1, 12, 0, 0, 250999, UTC)) == "2024-05-01T12:00:00.250Z"
    with pytest.raises(ValueError, match="timezone-aware"):
        ev.format_ts(datetime(2024, 5, 1, 12))


def test_a_batch_whose_state_rows_were_not_counted_shows_none_not_zero() -> None:
    """A finite run's stores do not count their rows (runtime/partitions.py): Spark reports 0,
    the record says `state_rows_counted: false`, and every reader shows no count."""
    from prometheus_client import CollectorRegistry

    from slipstream.monitor.metrics import SlipstreamMetrics
    from slipstream.monitor.state import live_operators

    operators = [{"operatorName": "stateStoreSave", "numRowsTotal": 0, "numRowsUpdated": 5}]
    progress = {"name": "p.q", "batchId": 0, "numInputRows": 5, "stateOperators": operators}
    base = {"event": "progress", "ts": "2024-05-01T12:00:00Z", "pipeline": "p", "query_id": "q"}
    counted = ev.parse_event({**base, "progress": progress})
    uncounted = ev.parse_event({**base, "progress": progress, "state_rows_counted": False})
    assert isinstance(counted, ev.QueryProgress) and isinstance(uncounted, ev.QueryProgress)
    assert counted.state_rows == 0 and uncounted.state_rows is None
    assert [op.rows for op in uncounted.state_operators] == [None]
    assert [op.rows for op in live_operators(progress)] == [0]
    assert ev.parse_event(uncounted.to_dict()) == uncounted  # the flag survives the event log
    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry)
    metrics.observe(uncounted)
    assert (
        registry.get_sample_value("slipstream_state_rows", {"pipeline": "p", "query": "p.q"})
        is None
    )
    metrics.observe(counted)
    assert (
        registry.get_sample_value("slipstream_state_rows", {"pipeline": "p", "query": "p.q"}) == 0
    )
