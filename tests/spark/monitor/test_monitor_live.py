"""Monitoring real running pipelines through the harness: the Prometheus endpoint against the
query's own progress and the event log every run writes (mobile over the bundled sample files),
and the live dashboard in headless Chromium (trending's top 10 as views arrive)."""

from __future__ import annotations

import csv
import json
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from slipstream.monitor.dashboard import EventLogStatus, serve_dashboard
from slipstream.monitor.eventlog import read_events
from slipstream.monitor.events import QueryProgress, RunStarted, RunStopped, parse_ts
from slipstream.monitor.metrics import SlipstreamMetrics, serve_metrics
from slipstream.testing import PipelineHarness
from slipstream.tools.generators.trending import TrendingSpec, write_catalog
from slipstream.tools.views import results_view
from tests.helpers import MOBILE_SAMPLES
from tests.unit.monitor.test_monitor_dashboard import ARTIFACTS, chromium, require_chromium

pytestmark = pytest.mark.spark

LABELS = {"pipeline": "mobile", "query": "mobile.counts"}
FAMILIES = {
    "slipstream_input_rows_per_second",
    "slipstream_processed_rows_per_second",
    "slipstream_batch_duration_seconds",
    "slipstream_batch_input_rows",
    "slipstream_watermark_lag_seconds",
    "slipstream_state_rows",
    "slipstream_state_memory_bytes",
    "slipstream_state_operator_rows",
    "slipstream_state_operator_memory_bytes",
    "slipstream_rows_dropped_by_watermark",
    "slipstream_quarantined_rows",
    "slipstream_expectation_violations",
    "slipstream_batches_completed",
    "slipstream_last_progress_timestamp_seconds",
}
BAD_LINES = ["this is not json", '{"id": "phone9", "action": "open"}']  # no ts: quarantined
LATE_LINE = '{"id": "phone9", "action": "open", "ts": "2018-03-02T10:05:00"}'


def sample(name: str) -> list[str]:
    return (MOBILE_SAMPLES / name).read_text().splitlines()


@contextmanager
def no_idle_reports(spark: SparkSession) -> Iterator[None]:
    """Queries started inside report progress only when a batch runs, so `lastProgress` and
    what the listener saw can be compared without a race (the interval is read at start)."""
    key = "spark.sql.streaming.noDataProgressEventInterval"
    before = spark.conf.get(key)
    spark.conf.set(key, str(3_600_000))
    try:
        yield
    finally:
        spark.conf.set(key, before)


def scrape(url: str) -> tuple[dict[str, dict[tuple[tuple[str, str], ...], float]], datetime]:
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    at = datetime.now(UTC)
    families: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        values = families.setdefault(family.name, {})
        for s in family.samples:
            if not s.name.endswith("_created"):
                values[tuple(sorted(s.labels.items()))] = s.value
    return families, at


def value(families: dict[str, Any], name: str, **extra: str) -> float:
    return families[name][tuple(sorted({**LABELS, **extra}.items()))]


def test_metrics_endpoint_matches_the_running_querys_progress(
    spark: SparkSession, tmp_path: Path
) -> None:
    registry = CollectorRegistry()
    metrics = SlipstreamMetrics(registry)
    with (
        no_idle_reports(spark),
        serve_metrics(registry, 0) as server,
        PipelineHarness(
            spark, "mobile", tmp_path, sink="sqlite", mode="update", handlers=[metrics.handle]
        ) as h,
    ):
        h.feed(sample("file1.json") + BAD_LINES, name="file1.json")
        h.process()
        h.feed(sample("file4.json"), name="file4.json")  # watermark moves to 11:07:29
        h.process()
        h.feed([LATE_LINE], name="late.json")  # its window closed long ago: dropped
        h.process()
        query = h.run.queries["counts"]  # type: ignore[union-attr]
        last = json.loads(query.lastProgress.json)  # Spark's own progress, as plain JSON
        families, after = scrape(server.url)
        assert query.lastProgress["timestamp"] == last["timestamp"]  # nothing ran meanwhile
        recent = [json.loads(p.json) for p in query.recentProgress]
        # the query that judged the records: the output, or under the ingest stage its ingest
        judge = "quarantine.actions" if h.prepared.settings.ingest_stage else "counts"
        judged = [json.loads(p.json) for p in h.run.queries[judge].recentProgress]  # type: ignore[union-attr]

    assert set(families) >= FAMILIES
    ops = last["stateOperators"]
    assert value(families, "slipstream_batch_input_rows") == last["numInputRows"]
    assert value(families, "slipstream_input_rows_per_second") == last["inputRowsPerSecond"]
    assert value(families, "slipstream_processed_rows_per_second") == pytest.approx(
        last["processedRowsPerSecond"]
    )
    assert value(families, "slipstream_batch_duration_seconds") == last["batchDuration"] / 1000
    assert value(families, "slipstream_state_rows") == sum(o["numRowsTotal"] for o in ops) > 0
    assert value(families, "slipstream_state_memory_bytes") == sum(
        o["memoryUsedBytes"] for o in ops
    )
    for index, op in enumerate(ops):  # each operator, labelled ID:NAME
        label = f"{index}:{op['operatorName']}"
        assert (
            value(families, "slipstream_state_operator_rows", operator=label)
            == (op["numRowsTotal"])
        )
        assert (
            value(families, "slipstream_state_operator_memory_bytes", operator=label)
            == (op["memoryUsedBytes"])
        )
    stamp = parse_ts(last["timestamp"])
    assert stamp is not None
    assert value(families, "slipstream_last_progress_timestamp_seconds") == stamp.timestamp()
    watermark = parse_ts(last["eventTime"]["watermark"])
    assert watermark == datetime(2018, 3, 2, 11, 7, 29, tzinfo=UTC)
    # against the data's clock: the newest event read (2018), plus the time since the batch
    # that read it reported (after it began, before this scrape)
    read = [(parse_ts(p.get("eventTime", {}).get("max")), parse_ts(p["timestamp"])) for p in recent]
    newest = max(seen for seen, _ in read if seen is not None)
    began = min(at for seen, at in read if seen == newest and at is not None)
    lag = value(families, "slipstream_watermark_lag_seconds")
    assert (newest - watermark).total_seconds() <= lag
    assert lag <= (newest + (after - began) - watermark).total_seconds()

    # counters: over every batch of the query, from Spark's own progress, and from the input
    # (Spark also reported progress once before the first file landed: no batch ran then)
    ran = [p for p in recent if "addBatch" in p["durationMs"]]
    assert [p["batchId"] for p in ran] == list(range(len(ran)))
    assert value(families, "slipstream_batches_completed") == len(ran) >= 5
    dropped = sum(o["numRowsDroppedByWatermark"] for p in recent for o in p["stateOperators"])
    assert value(families, "slipstream_rows_dropped_by_watermark") == dropped == 1
    quarantined = sum(
        p["observedMetrics"]["quality"]["quarantined"]
        for p in judged
        if "addBatch" in p["durationMs"]
    )
    judged_by = {"query": f"mobile.{judge}"}
    assert value(families, "slipstream_quarantined_rows", **judged_by) == quarantined
    assert quarantined == len(BAD_LINES)

    # the harness run wrote the pipeline's event log like a CLI run
    events = read_events(tmp_path / "state" / "events" / "mobile.jsonl")
    assert isinstance(events[0], RunStarted) and events[0].reason == "harness"
    staged = {"mobile.quarantine.actions"} if h.prepared.settings.ingest_stage else set()
    assert set(events[0].queries) == {"mobile.counts", *staged}
    assert isinstance(events[-1], RunStopped)
    assert "at a batch boundary" in (events[-1].reason or "")
    logged = [
        e.batch_id for e in events if isinstance(e, QueryProgress) and e.query == "mobile.counts"
    ]
    assert logged == [p["batchId"] for p in ran]  # no-batch reports reach listeners as idle


def views(article: str, count: int, second: int) -> list[str]:
    """`count` page views of `article` at 09:00:SS (event time), one event id each."""
    return [
        json.dumps(
            {
                "event_id": f"{article}-{second}-{i}",
                "article_id": article,
                "user_id": f"u{i}",
                "ts": f"2026-01-15T09:00:{second:02d}Z",
            }
        )
        for i in range(count)
    ]


@pytest.mark.browser
def test_live_dashboard_follows_a_running_pipeline(spark: SparkSession, tmp_path: Path) -> None:
    """The trending pipeline runs through the harness; the page shows its top 10 of the current
    window, and the table changes when a new file makes another article the most viewed."""
    require_chromium()
    catalog = write_catalog(tmp_path / "catalog.csv", TrendingSpec(articles=5))
    catalog_of = {
        r["article_id"]: [r["title"], r["section"]] for r in csv.DictReader(catalog.open())
    }
    with PipelineHarness(spark, "trending", tmp_path, sink="sqlite", catalog=catalog) as h:
        settings = h.prepared.settings
        h.feed(views("a0001", 3, 5) + views("a0002", 2, 6) + ["not json"], name="views-1.jsonl")
        h.process()
        status = EventLogStatus(settings.state_dir)

        with (
            serve_dashboard(status, partial(results_view, h.prepared)) as server,
            chromium() as browser,
        ):
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            problems: list[str] = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto(server.url + "?poll=250")

            page.wait_for_function(
                "() => window.__slipstream.queries().includes('trending/trending.views')"
            )
            page.wait_for_function(
                "() => document.querySelector('#results tbody').innerText.includes('a0001')"
            )
            # every event is in the window 08:51-09:01, the one in progress that closes first
            title = "Top 10 articles, current window 08:51-09:01 UTC (in progress)"
            assert page.inner_text("#results-title") == title
            assert table(page) == [
                ["1", "a0001", *catalog_of["a0001"], "3"],
                ["2", "a0002", *catalog_of["a0002"], "2"],
            ]
            version = page.evaluate("() => window.__slipstream.resultsVersion()")

            h.feed(views("a0003", 5, 40), name="views-2.jsonl")  # a new most-viewed article
            h.process()
            page.wait_for_function(
                "() => document.querySelector('#results tbody').innerText.includes('a0003')"
            )
            assert page.evaluate("() => window.__slipstream.resultsVersion()") > version
            assert table(page) == [
                ["1", "a0003", *catalog_of["a0003"], "5"],
                ["2", "a0001", *catalog_of["a0001"], "3"],
                ["3", "a0002", *catalog_of["a0002"], "2"],
            ]

            # every chart of the results query draws the batches the event log holds
            card = 'article[data-key="trending/trending.views"]'
            page.wait_for_function(
                f"""() => [...document.querySelectorAll('{card} canvas')]
                    .every(c => Number(c.dataset.points) >= 2)"""
            )
            # the rejected line, on the card of the query that judged it (the output, or under
            # the ingest stage its ingest query)
            judge = "quarantine.events" if settings.ingest_stage else "views"
            judged = f'article[data-key="trending/trending.{judge}"]'
            assert page.inner_text(f'{judged} [data-fact="quarantined"]') == "1"
            # each stateful operator of the last batch, as `slipstream status` reports it
            ops = h.progress("views")[-1]["stateOperators"]
            shown = page.eval_on_selector_all(
                f"{card} [data-operators] li", "items => items.map(i => i.textContent)"
            )
            assert [line.split(" ", 1)[0] for line in shown] == [
                f"{i}:{op['operatorName']}" for i, op in enumerate(ops)
            ]
            assert ops and all(" rows, " in line and "in memory" in line for line in shown)

            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard-live.png"), full_page=True)
            assert page.evaluate("() => window.__slipstream.lastError()") is None
            assert problems == []
        status.close()


def table(page: Any) -> list[list[str]]:
    return page.eval_on_selector_all(
        "#results tbody tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
