"""Progress records in which no batch ran name the next batch, which has not run (no Spark).

Measured on PySpark 4.3 (file source, `noDataProgressEventInterval` 1 s): after batch 0,
`recentProgress` held three records of `batchId` 1 with 0 rows and only the `latestOffset` and
`triggerExecution` phases, long before batch 1 ran. Listeners got `QueryIdleEvent`s instead;
Spark before 3.5 sent such records to listeners as progress."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from slipstream.monitor.events import QueryProgress, format_ts, parse_event
from slipstream.monitor.metrics import SlipstreamMetrics
from slipstream.monitor.status import query_status
from slipstream.monitor.totals import RunTotals

T0 = datetime(2026, 1, 15, 9, 0, tzinfo=UTC)
RAN = {"addBatch": 40, "commitOffsets": 5, "latestOffset": 2, "triggerExecution": 60}
IDLE = {"latestOffset": 1, "triggerExecution": 1}


def record(batch: int, phases: dict[str, int], rows: int, quarantined: int, at: int) -> dict:
    progress: dict[str, Any] = {
        "id": "q-1",
        "runId": "r-1",
        "name": "p.results",
        "timestamp": format_ts(T0 + timedelta(seconds=at)),
        "batchId": batch,
        "numInputRows": rows,
        "durationMs": phases,
        "observedMetrics": {"quality": {"input": rows, "quarantined": quarantined}},
    }
    return {
        "event": "progress",
        "ts": format_ts(T0 + timedelta(seconds=at)),
        "pipeline": "p",
        "query": "p.results",
        "query_id": "q-1",
        "run_id": "r-1",
        "pid": 1,
        "progress": progress,
    }


# batch 0 ran; two idle reports name batch 1; then batch 1 runs with a quarantined row
RECORDS = [
    record(0, RAN, 10, 1, 0),
    record(1, IDLE, 0, 0, 1),
    record(1, IDLE, 0, 0, 2),
    record(1, RAN, 5, 2, 3),
]


def test_idle_reports_are_not_batches() -> None:
    executed = [parse_event(r).executed for r in RECORDS]  # type: ignore[union-attr]
    assert executed == [True, False, False, True]
    handmade = {"event": "progress", "ts": format_ts(T0), "pipeline": "p", "query_id": "q"}
    assert isinstance(parse_event(handmade), QueryProgress) and parse_event(handmade).executed  # type: ignore[union-attr]


def test_metrics_count_the_batch_that_ran_after_idle_reports() -> None:
    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry, clock=lambda: T0)
    for r in RECORDS:
        metrics.handle(r)
    labels = {"pipeline": "p", "query": "p.results"}
    assert registry.get_sample_value("slipstream_batches_completed_total", labels) == 2
    assert registry.get_sample_value("slipstream_quarantined_rows_total", labels) == 3


def test_run_totals_and_status_count_batches_that_ran() -> None:
    totals = RunTotals()
    for r in RECORDS:
        totals(r)
    assert totals.by_query["p.results"]["batches"] == 2
    assert totals.by_query["p.results"]["quarantined"] == 3
    assert totals.last_batch["p.results"] == 1  # sync_progress still sees the idle report
    (status,) = query_status(
        [parse_event(r) for r in RECORDS], T0 + timedelta(seconds=4), pid_check=lambda p: True
    )
    assert status.total_batches == 2 and status.total_quarantined == 3
    assert status.last_batch_id == 1 and status.last_batch_at == T0 + timedelta(seconds=3)
