"""The dashboard: its JSON API over recorded event logs, and the page in a real headless
Chromium (``-m browser``; fails under CI when Chromium is missing, skips locally)."""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from slipstream.monitor.dashboard import (
    EMPTY_RESULTS,
    INTERNAL_ERROR,
    EventLogStatus,
    serve_dashboard,
)
from slipstream.monitor.eventlog import EventLog, event_log_path
from slipstream.monitor.events import format_ts, parse_event, parse_ts

FIXTURES = Path(__file__).parents[2] / "fixtures" / "eventlogs"
ARTIFACTS = Path(__file__).resolve().parents[3] / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
NOW = datetime.fromisoformat("2026-01-15T09:30:00+00:00")


class FixedClock:
    def __call__(self) -> datetime:
        return NOW


def alive(pid: int) -> bool:
    return True


# --------------------------------------------------------------------------- a state dir


def _shift(value: Any, delta: timedelta) -> Any:
    parsed = parse_ts(value)
    return value if parsed is None or parsed.year == 1970 else format_ts(parsed + delta)


def replay(
    state_dir: Path, fixture: str, ends_before_now: timedelta, rename: str | None = None
) -> None:
    """Copy a recorded log into ``state_dir`` as if it had ended ``ends_before_now`` ago.

    Every timestamp moves by the same amount (envelope, batch time, event times, watermark),
    so lags and rates stay as recorded. ``rename`` gives the pipeline another name, so two
    recordings of one pipeline can be shown side by side.
    """
    with open(FIXTURES / f"{fixture}.jsonl") as handle:
        records = [json.loads(line) for line in handle]
    delta = NOW - ends_before_now - max(datetime.fromisoformat(r["ts"]) for r in records)
    pipeline = rename or records[0]["pipeline"]
    with EventLog(event_log_path(state_dir, pipeline)) as log:
        for record in records:
            record["ts"] = _shift(record["ts"], delta)
            if rename and record.get("query"):
                record["query"] = rename + record["query"][len(record["pipeline"]) :]
            if rename and record.get("queries"):  # a run record names its queries
                cut = len(record["pipeline"])
                record["queries"] = [rename + q[cut:] for q in record["queries"]]
            record["pipeline"] = pipeline
            progress = record.get("progress")
            if progress:
                progress["timestamp"] = _shift(progress.get("timestamp"), delta)
                times = progress.get("eventTime", {})
                for key in list(times):
                    times[key] = _shift(times[key], delta)
            log.append(parse_event(record))


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    replay(tmp_path, "healthy", timedelta(seconds=1))
    replay(tmp_path, "falling_behind", timedelta(seconds=2), rename="backfill")
    replay(tmp_path, "stalled", timedelta(minutes=3))
    replay(tmp_path, "failed", timedelta(seconds=30))
    return tmp_path


class Results:
    """A results provider whose table the test can change."""

    def __init__(self, rows: list[list[Any]]) -> None:
        self._lock = threading.Lock()
        self.set(rows)

    def set(self, rows: list[list[Any]], more: list[dict[str, Any]] | None = None) -> None:
        with self._lock:
            self._payload = {
                "title": "Top 10 articles, current window",
                "columns": ["rank", "article", "views"],
                "rows": rows,
                "updated": format_ts(NOW),
            }
            if more:
                self._payload["more"] = more

    def __call__(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._payload)


def get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers["Content-Type"], error.read()


# --------------------------------------------------------------------------- the API


def test_status_api_reports_each_recorded_verdict(state_dir: Path) -> None:
    status = EventLogStatus(state_dir, clock=FixedClock(), pid_check=alive)
    with serve_dashboard(status) as server:
        assert server.host == "127.0.0.1" and server.port > 0
        code, kind, body = get(server.url + "api/status")
    assert (code, kind) == (200, "application/json")
    payload = json.loads(body)
    assert payload["generated"] == format_ts(NOW)
    health = {(q["pipeline"], q["query"]): q["health"] for q in payload["queries"]}
    assert health == {
        ("backfill", "backfill.windows"): "falling_behind",
        ("clickstream", "clickstream.sessions"): "stalled",
        ("orders", "orders.to_db"): "failed",
        ("trending", "trending.ingest"): "healthy",
        ("trending", "trending.windows"): "healthy",
    }
    windows = next(q for q in payload["queries"] if q["query"] == "trending.windows")
    series = windows["series"]
    assert len(series["t"]) == windows["total_batches"]
    assert series["batch"] == sorted(series["batch"])
    assert all(len(values) == len(series["t"]) for values in series.values())
    assert any(lag is not None and lag > 0 for lag in series["watermark_lag_s"])


def test_status_provider_follows_a_growing_log(tmp_path: Path) -> None:
    status = EventLogStatus(tmp_path, clock=FixedClock(), pid_check=alive)
    assert status()["queries"] == []
    with open(FIXTURES / "failed.jsonl") as handle:
        records = [json.loads(line) for line in handle]
    with EventLog(event_log_path(tmp_path, "orders")) as log:
        for record in records[:3]:
            log.append(record)
        (first,) = status()["queries"]
        for record in records[3:]:
            log.append(record)
        (second,) = status()["queries"]
    assert first["total_batches"] == 1
    assert second["health"] == "failed"
    assert second["total_batches"] == sum(r["event"] == "progress" for r in records)
    status.close()


def test_pages_results_health_and_errors(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> dict[str, Any]:
        raise RuntimeError("results table is gone")

    with serve_dashboard(lambda: {"queries": []}) as server:
        code, kind, page = get(server.url)
        assert (code, kind) == (200, "text/html; charset=utf-8")
        assert b'src="/static/dashboard.js"' in page
        for name, kind_prefix in [
            ("dashboard.js", "text/javascript"),
            ("dashboard.css", "text/css"),
        ]:
            code, kind, _ = get(server.url + "static/" + name)
            assert code == 200 and kind.startswith(kind_prefix)
        assert json.loads(get(server.url + "api/results")[2]) == EMPTY_RESULTS
        assert json.loads(get(server.url + "healthz")[2]) == {"ok": True}
        assert get(server.url + "static/../dashboard.py")[0] == 404
        assert get(server.url + "nothing")[0] == 404

    with serve_dashboard(lambda: {"queries": []}, broken) as server:
        code, _, body = get(server.url + "api/results")
    assert code == 500
    assert json.loads(body) == {"error": INTERNAL_ERROR}  # the exception's text is not sent
    assert "results table is gone" in caplog.text  # it is in the log

    awkward = {"rows": [[float("nan"), NOW]], "columns": ["score", "at"]}
    with serve_dashboard(lambda: {"queries": []}, lambda: awkward) as server:
        code, _, body = get(server.url + "api/results")
    assert code == 200
    assert json.loads(body)["rows"] == [[None, str(NOW)]]  # JSON has no NaN; dates as text


# --------------------------------------------------------------------------- the browser


def require_chromium() -> None:
    if CHROMIUM.exists():
        return
    message = f"headless Chromium not found at {CHROMIUM}; run `make services`"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message + " (only skipped because CI is unset)")


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def expected_points(query: dict[str, Any]) -> dict[str, int]:
    """Points each chart must draw: the non-null values of its series."""
    s = query["series"]

    def count(*names: str) -> int:
        return sum(v is not None for name in names for v in s[name])

    return {
        "rates": count("input_rps", "processed_rps"),
        "duration": count("batch_duration_s"),
        "lag": count("watermark_lag_s"),
        "state": count("state_rows"),
    }


@pytest.mark.browser
def test_dashboard_in_headless_chromium(state_dir: Path) -> None:
    require_chromium()
    status = EventLogStatus(state_dir, clock=FixedClock(), pid_check=alive)
    results = Results([[1, "article-17", 930], [2, "article-4", 871], [3, "article-52", 644]])
    expected = {f"{q['pipeline']}/{q['query']}": q for q in status()["queries"]}

    with serve_dashboard(status, results) as server, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: problems.append(str(e)))
        page.goto(server.url + "?poll=250")

        page.wait_for_function("n => window.__slipstream.queries().length === n", arg=len(expected))
        page.wait_for_function("() => window.__slipstream.pointCount() > 0")
        drawn = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('article.query')].map(
                card => [card.dataset.key, Object.fromEntries([...card.querySelectorAll('canvas')]
                    .map(c => [c.dataset.chart, Number(c.dataset.points)]))]))"""
        )
        assert drawn == {key: expected_points(q) for key, q in expected.items()}
        assert drawn["trending/trending.windows"]["rates"] > 10

        badges = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('article.query')].map(
                card => [card.dataset.key, card.querySelector('.badge').dataset.health]))"""
        )
        assert badges == {key: q["health"] for key, q in expected.items()}

        page.wait_for_function(
            "() => document.querySelector('#results tbody').innerText.includes('article-17')"
        )
        assert page.inner_text("#results-title") == "Top 10 articles, current window"
        version = page.evaluate("() => window.__slipstream.resultsVersion()")
        results.set([[1, "article-99", 1204], [2, "article-17", 955]])
        page.wait_for_function(
            "() => document.querySelector('#results tbody').innerText.includes('article-99')"
        )
        assert page.evaluate("() => window.__slipstream.resultsVersion()") == version + 1
        cells = page.eval_on_selector_all(
            "#results tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
        )
        assert cells == [["1", "article-99", "1204"], ["2", "article-17", "955"]]

        # a pipeline's other outputs: one table each under the first
        alerts = {"title": "sensor_alerts: sensor_alerts, newest rows", "updated": None,
                  "columns": ["sensor_id", "readings"], "rows": [["s0008", 30]]}  # fmt: skip
        results.set([[1, "article-99", 1204]], more=[alerts])
        page.wait_for_function("() => document.querySelectorAll('.output-panel').length === 1")
        assert page.inner_text(".output-panel h2") == alerts["title"]
        assert page.eval_on_selector_all(
            ".output-panel tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
        ) == [["s0008", "30"]]

        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        assert page.evaluate("() => window.__slipstream.lastError()") is None
        assert problems == []


@pytest.mark.browser
def test_dashboard_shows_the_kafka_lag_of_a_query_that_reads_kafka(tmp_path: Path) -> None:
    """A query whose lag rose at each batch: its card shows the last lag and falling behind;
    a query without Kafka shows no lag fact."""
    from slipstream.monitor.events import QueryProgress, QueryStarted

    replay(tmp_path, "healthy", timedelta(seconds=1))
    start = NOW - timedelta(seconds=10)
    with EventLog(event_log_path(tmp_path, "mobile")) as log:
        log.append(QueryStarted(start, "mobile", "mobile.counts", "qid", "rid", os.getpid()))
        for seq, (done, latest) in enumerate([(100, 100), (200, 300), (300, 600), (400, 1100)]):
            source = {"description": "KafkaV2[Subscribe[acts]]", "endOffset": {"acts": {"0": done}},
                      "latestOffset": {"acts": {"0": latest}}}  # fmt: skip
            progress = {"batchId": seq, "numInputRows": 100, "inputRowsPerSecond": 100.0,
                        "processedRowsPerSecond": 100.0, "sources": [source]}  # fmt: skip
            at = start + timedelta(seconds=seq + 1)
            log.append(QueryProgress(at, "mobile", "mobile.counts", "qid", "rid", os.getpid(),
                                     progress=progress))  # fmt: skip
    require_chromium()
    status = EventLogStatus(tmp_path, clock=FixedClock(), pid_check=alive)
    with serve_dashboard(status) as server, chromium() as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(server.url + "?poll=250")
        page.wait_for_function("() => window.__slipstream.queries().length >= 2")
        shown = page.evaluate(
            """() => Object.fromEntries([...document.querySelectorAll('article.query')].map(
                card => [card.dataset.key, [card.querySelector('[data-kafka]').hidden,
                    card.querySelector('[data-fact="kafka"]').textContent,
                    card.querySelector('.badge').dataset.health]]))"""
        )
    assert shown["mobile/mobile.counts"] == [False, "700", "falling_behind"]
    others = [v for k, v in shown.items() if k != "mobile/mobile.counts"]
    assert others and all(hidden for hidden, *_ in others)
