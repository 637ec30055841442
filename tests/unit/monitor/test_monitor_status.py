"""Status verdicts from recorded event logs (no Spark): healthy, falling behind, stalled,
failed, stopped. Expected numbers are recomputed from the raw JSON, not taken from the code."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from statistics import fmean
from typing import Any

import pytest

from slipstream.monitor.eventlog import EventLog, event_log_path, read_events
from slipstream.monitor.events import (
    Event,
    QueryProgress,
    QueryStarted,
    QueryTerminated,
    RunStopped,
    format_ts,
    parse_event,
)
from slipstream.monitor.status import (
    FallingBehindRule,
    QueryStatus,
    StatusTracker,
    human_duration,
    load_status,
    query_status,
)
from slipstream.monitor.status_view import format_status_table, state_line, to_json

FIXTURES = Path(__file__).parents[2] / "fixtures" / "eventlogs"


def alive(pid: int) -> bool:
    return True


def dead(pid: int) -> bool:
    return False


def events(name: str) -> list[Event]:
    return read_events(FIXTURES / f"{name}.jsonl")


def raw_progress(name: str, query: str) -> list[dict[str, Any]]:
    with open(FIXTURES / f"{name}.jsonl") as handle:
        records = [json.loads(line) for line in handle]
    return [r["progress"] for r in records if r["event"] == "progress" and r["query"] == query]


def last_ts(evs: list[Event]) -> datetime:
    return max(e.ts for e in evs)


def by_query(statuses: list[QueryStatus]) -> dict[str, QueryStatus]:
    return {s.query: s for s in statuses}


# --------------------------------------------------------------------------- recorded verdicts


def test_healthy_log_is_healthy_and_totals_match_the_raw_progress() -> None:
    evs = events("healthy")
    now = last_ts(evs) + timedelta(seconds=5)
    statuses = by_query(query_status(evs, now, pid_check=alive))
    assert set(statuses) == {"trending.windows", "trending.ingest"}

    windows = statuses["trending.windows"]
    assert windows.health == "healthy", windows.reason
    assert windows.running
    assert windows.reason.startswith("keeping up")
    raw = raw_progress("healthy", "trending.windows")
    assert windows.last_batch_id == raw[-1]["batchId"]
    assert windows.total_batches == len(raw)
    assert windows.total_input_rows == sum(p["numInputRows"] for p in raw)
    assert windows.total_quarantined == sum(
        p["observedMetrics"]["quality"]["quarantined"] or 0 for p in raw
    )
    assert windows.total_dropped_by_watermark == sum(
        op["numRowsDroppedByWatermark"] for p in raw for op in p["stateOperators"]
    )
    assert windows.total_dropped_by_watermark > 0
    assert windows.input_rps == pytest.approx(fmean(p["inputRowsPerSecond"] for p in raw[-5:]))
    assert windows.processed_rps == pytest.approx(
        fmean(p["processedRowsPerSecond"] for p in raw[-5:])
    )
    assert windows.state_rows == raw[-1]["stateOperators"][0]["numRowsTotal"]
    # per operator, in plan order: what Spark reported for the last batch
    assert [
        (op.operator_id, op.operator, op.rows, op.memory_bytes) for op in windows.state_operators
    ] == [
        (i, op["operatorName"], op["numRowsTotal"], op["memoryUsedBytes"])
        for i, op in enumerate(raw[-1]["stateOperators"])
    ]
    assert windows.to_dict()["state_operators"][0]["rows"] == windows.state_rows
    line = state_line(windows)
    assert line is not None and line.startswith("trending/trending.windows state: 0:")
    assert f"{windows.state_rows:,} rows" in line
    assert state_line(statuses["trending.ingest"]) is None  # stateless: no line
    watermark = datetime.fromisoformat(raw[-1]["eventTime"]["watermark"])
    assert windows.watermark == watermark
    # against the data's clock: the newest event read, plus the time since that batch ended
    records = [json.loads(line) for line in (FIXTURES / "healthy.jsonl").open()]
    read = [
        (datetime.fromisoformat(r["progress"]["eventTime"]["max"]), datetime.fromisoformat(r["ts"]))
        for r in records
        if r["event"] == "progress" and "max" in r["progress"].get("eventTime", {})
    ]
    newest, read_at = max(read)
    assert windows.watermark_lag == newest + (now - read_at) - watermark
    assert windows.expectation_violations["article_id_present"] == sum(
        p["observedMetrics"]["expectations"]["article_id_present"] or 0 for p in raw
    )

    ingest = statuses["trending.ingest"]
    assert ingest.health == "healthy"
    assert ingest.reason.startswith("idle: no new data since")
    assert ingest.total_input_rows == 3


def test_falling_behind_log_is_falling_behind() -> None:
    evs = events("falling_behind")
    now = last_ts(evs) + timedelta(seconds=2)
    (status,) = query_status(evs, now, pid_check=alive)
    assert status.health == "falling_behind", status.reason
    assert status.running
    raw = raw_progress("falling_behind", "trending.windows")
    # batches that started right after a batch that read rows (batch 0 read none: not 1)
    pairs = zip(raw, raw[1:], strict=False)
    busy = [p for prev, p in pairs if prev["numInputRows"] and p["numInputRows"]]
    ratios = [p["processedRowsPerSecond"] / p["inputRowsPerSecond"] for p in busy[-5:]]
    assert sum(r < 1 for r in ratios) >= 3 and fmean(ratios) < 0.95  # the recording itself
    assert f"{fmean(ratios):.0%} of the arrival rate" in status.reason
    assert status.processed_rps is not None and status.input_rps is not None
    assert status.processed_rps < status.input_rps


def test_stalled_log_is_stalled_once_quiet_longer_than_the_limit() -> None:
    evs = events("stalled")
    quiet_since = last_ts(evs)
    last_batch = raw_progress("stalled", "clickstream.sessions")[-1]["batchId"]

    (early,) = query_status(evs, quiet_since + timedelta(seconds=30), pid_check=alive)
    assert early.health == "healthy"

    (late,) = query_status(evs, quiet_since + timedelta(minutes=3), pid_check=alive)
    assert late.health == "stalled"
    assert late.running
    assert late.reason.startswith("no progress for 3m00s (limit 2m00s)")
    assert f"last batch {last_batch}" in late.reason

    (strict,) = query_status(
        evs, quiet_since + timedelta(seconds=30), stall_after=timedelta(seconds=10), pid_check=alive
    )
    assert strict.health == "stalled"


def test_failed_log_is_failed_with_the_error() -> None:
    evs = events("failed")
    (status,) = query_status(evs, last_ts(evs) + timedelta(seconds=1), pid_check=alive)
    assert status.health == "failed"
    assert not status.running
    assert status.error is not None and "127.0.0.1:5432 refused" in status.error
    assert status.reason.startswith("failed at ")
    assert status.last_batch_id == raw_progress("failed", "orders.to_db")[-1]["batchId"]


def test_a_running_query_whose_process_is_gone_failed() -> None:
    evs = events("healthy")
    statuses = query_status(evs, last_ts(evs), pid_check=dead)
    assert {s.health for s in statuses} == {"failed"}
    assert all("without a terminated event" in s.reason for s in statuses)


# --------------------------------------------------------------------------- synthetic logs

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
QID, RID = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"


def started(at: datetime, run_id: str = RID) -> QueryStarted:
    return QueryStarted(at, "p", "p.q", QID, run_id, 7)


def batch(seq: int, in_rps: float, out_rps: float, rows: int = 100) -> QueryProgress:
    return QueryProgress(
        T0 + timedelta(seconds=seq + 1),
        "p",
        "p.q",
        QID,
        RID,
        7,
        progress={
            "batchId": seq,
            "numInputRows": rows,
            "inputRowsPerSecond": in_rps,
            "processedRowsPerSecond": out_rps,
        },
    )


def verdict(evs: list[Event], **kwargs: Any) -> QueryStatus:
    (status,) = query_status(evs, max(e.ts for e in evs), pid_check=alive, **kwargs)
    return status


def test_two_slow_batches_of_five_are_not_falling_behind() -> None:
    rates = [(100, 50), (100, 50), (100, 200), (100, 200), (100, 200)]
    evs: list[Event] = [started(T0)] + [batch(i, a, b) for i, (a, b) in enumerate(rates)]
    assert verdict(evs).health == "healthy"


def test_slow_batches_within_five_percent_are_not_falling_behind() -> None:
    rates = [(100, 97)] * 5
    evs: list[Event] = [started(T0)] + [batch(i, a, b) for i, (a, b) in enumerate(rates)]
    assert verdict(evs).health == "healthy"
    assert verdict(evs, rule=FallingBehindRule(max_ratio=0.99)).health == "falling_behind"


def test_empty_batches_and_unknown_rates_do_not_count_as_slow() -> None:
    """Nor as evidence: with no batch of known arrival rate there is no verdict yet."""
    evs: list[Event] = [started(T0)] + [batch(i, 100, 10, rows=0) for i in range(5)]
    evs.append(batch(5, float("nan"), 1))
    status = verdict(evs)
    assert status.health == "pending", status.reason
    assert "not enough batches to judge yet: 0 of 3" in status.reason


def test_clean_termination_is_stopped() -> None:
    evs: list[Event] = [started(T0), batch(0, 10, 20)]
    evs.append(QueryTerminated(T0 + timedelta(seconds=5), "p", "p.q", QID, RID, 7))
    status = verdict(evs)
    assert (status.health, status.running, status.error) == ("stopped", False, None)


def test_a_stopped_run_without_terminated_events_is_stopped() -> None:
    evs: list[Event] = [started(T0), batch(0, 10, 20)]
    evs.append(RunStopped(T0 + timedelta(seconds=5), "p", 7, ("p.q",), "ctrl-c"))
    status = verdict(evs)
    assert status.health == "stopped"
    assert "ctrl-c" in status.reason


def test_a_restart_after_a_failure_is_running_again() -> None:
    failed = QueryTerminated(T0 + timedelta(seconds=2), "p", "p.q", QID, RID, 7, "boom", None)
    evs: list[Event] = [started(T0), batch(0, 10, 20), failed]
    assert verdict(evs).health == "failed"
    restarted = "33333333-3333-4333-8333-333333333333"
    evs.append(started(T0 + timedelta(seconds=3), run_id=restarted))
    status = verdict(evs)
    assert status.health == "starting" and status.running and status.run_id == restarted
    assert status.reason == "starting: batch 1 running for 0ms"  # the failed run ended at 0


def test_a_query_that_never_completes_a_batch_stalls() -> None:
    status = query_status([started(T0)], T0 + timedelta(minutes=5), pid_check=alive)[0]
    assert status.health == "stalled"
    assert "no batch completed yet" in status.reason


def test_tracker_history_is_bounded() -> None:
    tracker = StatusTracker(history=10, pid_check=alive)
    tracker.feed([started(T0)] + [batch(i, 10, 20) for i in range(50)])
    assert len(tracker.series("p", "p.q")) == 10
    assert [p.batch_id for p in tracker.series("p", "p.q", points=3)] == [47, 48, 49]
    (status,) = tracker.statuses(T0 + timedelta(seconds=51))
    assert status.total_batches == 50  # totals are kept beyond the history


def test_bad_rule_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="min_slow"):
        FallingBehindRule(window=3, min_slow=4)
    with pytest.raises(ValueError, match="stall_after"):
        StatusTracker(stall_after=timedelta(0))


# --------------------------------------------------------------------------- output


def test_load_status_reads_every_pipeline_under_a_state_dir(tmp_path: Path) -> None:
    for name in ("healthy", "failed"):
        with open(FIXTURES / f"{name}.jsonl") as src:
            records = [json.loads(line) for line in src]
        with EventLog(event_log_path(tmp_path, records[0]["pipeline"])) as log:
            for record in records:
                log.append(parse_event(record))
    now = max(e.ts for e in events("healthy")) + timedelta(seconds=5)
    statuses = load_status(tmp_path, now, pid_check=alive)
    assert [(s.pipeline, s.query) for s in statuses] == [
        ("orders", "orders.to_db"),
        ("trending", "trending.ingest"),
        ("trending", "trending.windows"),
    ]


def test_table_and_json_render_every_query() -> None:
    evs = events("healthy") + events("failed")
    now = last_ts(evs) + timedelta(seconds=1)  # the two logs were recorded minutes apart
    statuses = query_status(evs, now, stall_after=timedelta(hours=1), pid_check=alive)
    table = format_status_table(statuses, now)
    header = table.splitlines()[0]
    assert header.split()[:3] == ["PIPELINE", "QUERY", "HEALTH"]
    assert "FAILED" in table and "orders/orders.to_db: failed at" in table
    assert "trending/trending.windows: keeping up" in table

    payload = json.loads(to_json(statuses, now))
    assert payload["generated"] == format_ts(now)
    assert {q["query"]: q["health"] for q in payload["queries"]} == {
        s.query: s.health for s in statuses
    }
    assert format_status_table([], now) == "no pipelines have an event log yet"


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(milliseconds=850), "850ms"),
        (timedelta(seconds=4.25), "4.2s"),
        (timedelta(seconds=42), "42s"),
        (timedelta(minutes=3, seconds=12), "3m12s"),
        (timedelta(hours=2, minutes=5), "2h05m"),
        (timedelta(days=3, hours=4), "3d04h"),
        (timedelta(seconds=-42), "-42s"),
    ],
)
def test_human_durations(delta: timedelta, text: str) -> None:
    assert human_duration(delta) == text


# --------------------------------------------------------------------------- out of memory
SPARK_OOM = (
    "org.apache.spark.sql.streaming.StreamingQueryException: Job aborted due to stage failure: "
    "Task 1 in stage 1130.0 failed 1 times, most recent failure: Lost task 1.0 (TID 2281): "
    "org.apache.spark.memory.SparkOutOfMemoryError: [AGGREGATE_OUT_OF_MEMORY] No enough memory "
    "for aggregation SQLSTATE: 82001\n\tat org.apache.spark.sql.execution.aggregate..."
)


def test_a_query_that_ran_out_of_memory_says_so_and_names_the_setting() -> None:
    from dataclasses import replace

    from slipstream.errors import out_of_memory

    evs = [
        replace(e, exception=SPARK_OOM) if isinstance(e, QueryTerminated) else e
        for e in events("failed")
    ]
    (status,) = query_status(evs, last_ts(evs) + timedelta(seconds=1), pid_check=alive)
    assert status.health == "failed"
    assert status.reason.startswith("failed: out of memory at ")
    assert "AGGREGATE_OUT_OF_MEMORY" in status.reason

    local = out_of_memory(SPARK_OOM, "local[2]")
    assert local is not None and local.code == "OUT_OF_MEMORY"
    assert "--conf spark.driver.memory=" in local.fix
    cluster = out_of_memory("java.lang.OutOfMemoryError: Java heap space", "spark://h:7077")
    assert cluster is not None and "spark.executor.memory" in cluster.fix
    # the failure of the plain 'failed' fixture (a refused connection) is not a memory problem
    refused = next(e for e in events("failed") if isinstance(e, QueryTerminated))
    assert refused.exception and out_of_memory(refused.exception) is None


def kafka_batch(seq: int, read_to: int, latest: int) -> QueryProgress:
    """A batch of a query reading topic acts: read up to `read_to`, `latest` on the broker."""
    event = batch(seq, 100.0, 100.0)
    source = {
        "description": "KafkaV2[Subscribe[acts]]",
        "endOffset": {"acts": {"0": read_to}},
        "latestOffset": {"acts": {"0": latest}},
    }
    return replace(event, progress={**event.progress, "sources": [source]})


def test_a_kafka_lag_that_grows_batch_after_batch_is_falling_behind() -> None:
    """Rates alone look even; the lag from Spark's offsets rose at each of the last three
    batches: falling behind, with the path of the lag; status shows the last lag."""
    from slipstream.monitor.status_view import format_status_table

    lags = [(100, 100), (200, 300), (300, 600), (400, 1100)]  # behind: 0, 100, 300, 700
    evs: list[Event] = [started(T0)]
    evs += [kafka_batch(i, done, latest) for i, (done, latest) in enumerate(lags)]
    status = verdict(evs)
    assert status.health == "falling_behind"
    assert "Kafka lag growing: 100 -> 300 -> 700 records behind latest" in status.reason
    assert status.kafka_lag == 700 and status.to_dict()["kafka_lag_records"] == 700
    text = format_status_table([status], max(e.ts for e in evs))
    assert "kafka lag: 700 records behind latest" in text

    # a capped backfill catching up: the lag falls, the query is healthy
    backfill = [(250, 1000), (500, 1000), (750, 1000), (1000, 1000)]
    evs = [started(T0), *(kafka_batch(i, d, t) for i, (d, t) in enumerate(backfill))]
    status = verdict(evs)
    assert status.health == "healthy" and status.kafka_lag == 0
    assert verdict([started(T0), batch(0, 1.0, 1.0)]).kafka_lag is None  # no Kafka input
