"""What `slipstream status` and the dashboard say through a start, from a recorded event log
(trending's demo: its quarantine query runs several batches while the output's batch 0 is still
running): starting, then no verdict before evidence, then the verdicts; arrival rates that
match the input; and the watermark lag of a stopped run over historical data. No Spark.

Expected values are recomputed from the raw JSON records."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from statistics import fmean
from typing import Any

from slipstream.monitor.dashboard import EventLogStatus
from slipstream.monitor.eventlog import EventLog, event_log_path, read_events
from slipstream.monitor.events import format_ts, parse_event
from slipstream.monitor.status import QueryStatus, human_duration, query_status
from slipstream.monitor.status_view import format_status_table

FIXTURES = Path(__file__).parent / "fixtures" / "eventlogs"
OUTPUT, QUARANTINE = "trending.views", "trending.quarantine.events"


def alive(pid: int) -> bool:
    return True


def records(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").open()]


def ts(record: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(record["ts"])


def first(raw: list[dict[str, Any]], event: str, query: str | None = None) -> int:
    """Index of the first record of this kind (and query)."""
    return next(
        i for i, r in enumerate(raw) if r["event"] == event and query in (None, r.get("query"))
    )


def statuses(raw: list[dict[str, Any]], now: datetime) -> dict[str, QueryStatus]:
    evs = [parse_event(r) for r in raw]
    return {s.query: s for s in query_status(evs, now, pid_check=alive)}


def test_before_any_batch_each_query_is_starting_and_says_what_runs() -> None:
    raw = records("trending_counts")
    # the run's record only: Spark has not started the queries yet
    now = ts(raw[0]) + timedelta(seconds=30)
    shown = statuses(raw[:1], now)
    assert set(shown) == {OUTPUT, QUARANTINE} == set(raw[0]["queries"])
    for status in shown.values():
        assert (status.health, status.running) == ("starting", True)
        assert status.reason == (
            "starting: the run started 30s ago; Spark has not started this query yet"
        )
    # both queries started, no batch reported: batch 0 running since the query started
    upto = first(raw, "progress")
    now = ts(raw[upto - 1]) + timedelta(seconds=42)
    shown = statuses(raw[:upto], now)
    started = ts(raw[first(raw, "started", OUTPUT)])
    assert shown[OUTPUT].health == "starting"
    assert shown[OUTPUT].reason == f"starting: batch 0 running for {human_duration(now - started)}"
    assert shown[OUTPUT].input_rps is None and shown[OUTPUT].last_batch_id is None
    text = format_status_table(list(shown.values()), now)
    assert "starting" in text and "batch 0 running for" in text


def test_no_verdict_until_enough_batches_have_a_known_arrival_rate() -> None:
    raw = records("trending_counts")
    batch0 = first(raw, "progress", OUTPUT)
    progress = raw[batch0]["progress"]
    # Spark's first batch after a start: rows read, "0.0 rows/s arriving" (no earlier trigger)
    assert progress["numInputRows"] > 0 and progress["inputRowsPerSecond"] == 0
    now = ts(raw[batch0]) + timedelta(seconds=1)
    shown = statuses(raw[: batch0 + 1], now)
    output = shown[OUTPUT]
    assert output.health == "pending" and output.running
    assert output.reason.startswith("not enough batches to judge yet: 0 of 3 batches")
    assert f"batch 0, {progress['numInputRows']:,} rows in" in output.reason
    assert output.input_rps is None  # not 0: nothing says no rows arrive
    assert "keeping up" not in output.reason
    # the quarantine query reads the same input: its rate is the mean of its own batches that
    # have one (the first after the start has none)
    own = [r["progress"] for r in raw[:batch0] if r.get("query") == QUARANTINE and "progress" in r]
    assert len(own) <= 5  # the mean is over the last five batches
    rated = [p["inputRowsPerSecond"] for p in own if p["inputRowsPerSecond"] != 0]
    assert shown[QUARANTINE].input_rps == fmean(rated)
    assert shown[QUARANTINE].health == "healthy"

    # batch by batch: pending with a count until the third batch with a rate, then a verdict
    outputs = [i for i, r in enumerate(raw) if r.get("query") == OUTPUT and "progress" in r]
    seen = []
    for n, i in enumerate(outputs):
        status = statuses(raw[: i + 1], ts(raw[i]) + timedelta(seconds=1))[OUTPUT]
        rated_so_far = sum(1 for j in outputs[: n + 1] if raw[j]["progress"]["inputRowsPerSecond"])
        seen.append((rated_so_far, status.health))
        if rated_so_far < 3:
            assert status.reason.startswith(
                f"not enough batches to judge yet: {rated_so_far} of 3"
            ), status.reason
    assert [h for n, h in seen if n < 3] == ["pending"] * sum(1 for n, _ in seen if n < 3)
    assert {h for n, h in seen if n >= 3} == {"healthy"}


def test_a_stopped_run_over_historical_data_shows_no_watermark_lag() -> None:
    """mobile's sample data is from 2018: a lag against the clock would read thousands of
    days. Stopped: no lag (`-`), the watermark itself kept."""
    raw = records("mobile_append_written")
    now = ts(raw[-1]) + timedelta(days=1)
    counts = statuses(raw, now)["mobile.counts"]
    assert counts.health == "stopped"
    last = [r["progress"] for r in raw if r.get("query") == "mobile.counts" and "progress" in r]
    assert counts.watermark == datetime.fromisoformat(last[-1]["eventTime"]["watermark"])
    assert counts.watermark_lag is None and counts.to_dict()["watermark_lag_seconds"] is None
    table = format_status_table(list(statuses(raw, now).values()), now).splitlines()
    end = table[0].index("WM LAG") + len("WM LAG")  # numbers align right: the cell ends here
    row = next(line for line in table if " mobile.counts " in line)
    assert row[:end].split()[-1] == "-"


def test_a_running_replay_lags_by_the_data_not_by_its_age() -> None:
    """trending's demo data is dated 2026-01-01 and replayed months later: while it runs, the
    lag is the newest event read (advanced by the time since) minus the watermark."""
    raw = records("trending_counts")
    outputs = [r for r in raw if r.get("query") == OUTPUT and "progress" in r]
    upto = raw.index(outputs[-2]) + 1  # running, before its last batch and its end
    now = ts(raw[upto - 1]) + timedelta(seconds=3)
    output = statuses(raw[:upto], now)[OUTPUT]
    read = [
        (datetime.fromisoformat(r["progress"]["eventTime"]["max"]), ts(r))
        for r in outputs[:-1]
        if "max" in r["progress"]["eventTime"]
    ]
    newest, read_at = max(read)
    mark = datetime.fromisoformat(outputs[-2]["progress"]["eventTime"]["watermark"])
    assert output.running and output.watermark_lag == newest + (now - read_at) - mark
    assert output.watermark_lag < timedelta(minutes=5)  # not the data's age (months)


def test_the_dashboard_api_says_since_when_it_waits_and_which_runs_run(tmp_path: Path) -> None:
    raw = records("trending_counts")
    clock = MovingClock(ts(raw[0]) - timedelta(seconds=20))
    status = EventLogStatus(tmp_path, clock=clock, pid_check=alive)
    empty = status()
    assert (empty["queries"], empty["runs"]) == ([], [])
    assert empty["since"] == empty["generated"] == format_ts(clock.now)
    with EventLog(event_log_path(tmp_path, "trending")) as log:
        log.append(parse_event(raw[0]))
        clock.now = ts(raw[0]) + timedelta(seconds=5)
        payload = status()
    assert payload["since"] == empty["since"]
    assert payload["runs"] == [
        {"pipeline": "trending", "running": True, "since": payload["runs"][0]["since"],
         "queries": raw[0]["queries"]}
    ]  # fmt: skip
    assert {q["health"] for q in payload["queries"]} == {"starting"}
    status.close()
    assert read_events(event_log_path(tmp_path, "trending"))[0].ts == ts(raw[0])


class MovingClock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now
