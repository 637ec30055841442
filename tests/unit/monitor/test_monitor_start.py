"""What `slipstream status` and the dashboard say through a start, from a recorded event log
(trending's demo: its quarantine query runs several batches while the output's batch 0 is still
running): starting, then no verdict before evidence, then the verdicts; arrival rates that
match the input; and the watermark lag of a stopped run over historical data. No Spark.

Expected values are recomputed from the raw JSON records. The browser test (``-m browser``)
drives the dashboard through the same start and saves the screenshots the docs show."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from statistics import fmean
from typing import Any

import pytest

from slipstream.monitor.dashboard import EventLogStatus, serve_dashboard
from slipstream.monitor.eventlog import EventLog, event_log_path, read_events
from slipstream.monitor.events import format_ts, parse_event
from slipstream.monitor.status import QueryStatus, human_duration, query_status
from slipstream.monitor.status_view import format_status_table
from tests.unit.monitor.test_monitor_dashboard import chromium, require_chromium

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "eventlogs"
SCREENSHOTS = Path(__file__).resolve().parents[3] / "docs" / "img"
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


# --------------------------------------------------------------------------- the browser

CARD = """([key, health, text]) => {
    const card = document.querySelector(`article.query[data-key="${key}"]`);
    return card !== null && card.querySelector('.badge').dataset.health === health
        && card.querySelector('.reason').textContent.includes(text);
}"""


def fact(page: Any, key: str, name: str) -> str:
    return page.inner_text(f'article.query[data-key="{key}"] [data-fact="{name}"]')


@pytest.mark.browser
def test_dashboard_through_a_start_in_headless_chromium(tmp_path: Path) -> None:
    """The page while the event log grows record by record, as trending's demo wrote it:
    waiting for a run, its queries starting (batch 0 running), no verdict before evidence,
    then the verdicts. Each step waits (bounded) for the page's text; no sleeps."""
    require_chromium()
    raw = records("trending_counts")
    clock = MovingClock(ts(raw[0]) - timedelta(seconds=20))
    status = EventLogStatus(tmp_path, clock=clock, pid_check=alive)
    views, quarantine = f"trending/{OUTPUT}", f"trending/{QUARANTINE}"
    written = 0

    def grow(upto: int, after: timedelta) -> None:  # the log up to record `upto`, and the time
        nonlocal written
        for record in raw[written:upto]:
            log.append(parse_event(record))
        written, clock.now = upto, ts(raw[upto - 1]) + after

    def shot(name: str, selector: str = f'article.query[data-key="{views}"]') -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.locator(selector).screenshot(path=str(SCREENSHOTS / name))

    batch0 = first(raw, "progress", OUTPUT)
    outputs = [i for i, r in enumerate(raw) if r.get("query") == OUTPUT and "progress" in r]
    table = {"title": "Top 10 articles, current window", "columns": ["rank", "article", "views"]}
    with (
        serve_dashboard(status, lambda: {**table, "rows": [], "updated": None}) as server,
        chromium() as browser,
        EventLog(event_log_path(tmp_path, "trending")) as log,
    ):
        page = browser.new_page(viewport={"width": 1000, "height": 320})
        problems: list[str] = []
        page.on("pageerror", lambda e: problems.append(str(e)))
        clock.now += timedelta(seconds=19)  # Spark starting: nothing recorded yet
        page.goto(server.url + "?poll=200")
        waiting = "() => !document.getElementById('waiting').hidden && document.getElementById"
        page.wait_for_function(
            waiting + "('waiting').textContent.includes('No run has recorded anything here yet')"
        )
        assert "(waiting 19 s)" in page.inner_text("#waiting")
        assert "once Spark is up" in page.inner_text("#waiting")
        shot("dashboard-waiting.png", "body")

        # the run started both queries; no batch has completed: batch 0 running for 24 s
        grow(first(raw, "progress"), timedelta(seconds=24))
        page.wait_for_function(CARD, arg=[views, "starting", "starting: batch 0 running for"])
        assert page.is_hidden("#waiting")
        assert page.inner_text(f'article.query[data-key="{views}"] .badge') == "STARTING"
        shot("dashboard-starting.png")

        # batch 0 done: rows read, no arrival rate yet, so no verdict; the quarantine query
        # (several batches done) shows its own rate and verdict
        grow(batch0 + 1, timedelta(seconds=1))
        page.wait_for_function(
            CARD, arg=[views, "pending", "not enough batches to judge yet: 0 of 3"]
        )
        assert fact(page, views, "in") == "–"
        assert fact(page, views, "rows") == f"{raw[batch0]['progress']['numInputRows'] / 1000:g}k"
        page.wait_for_function(CARD, arg=[quarantine, "healthy", "keeping up"])
        shot("dashboard-no-verdict.png")

        # the third batch with an arrival rate: the verdict
        grow(outputs[3] + 1, timedelta(seconds=1))
        page.wait_for_function(CARD, arg=[views, "healthy", "keeping up:"])
        shot("dashboard-verdicts.png")
        assert page.evaluate("() => window.__slipstream.lastError()") is None
    assert problems == []
