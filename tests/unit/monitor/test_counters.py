"""Counters that say what they count (issue 30, items 7 and 8), without Spark: the run's lines
read from a real run's event log (tests/fixtures/eventlogs/trending_counts.jsonl, recorded by
`slipstream run trending`), the demo's complete window, counts in words."""

from __future__ import annotations

import io
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from slipstream.analysis.plan import Plan
from slipstream.core.specs import TriggerSpec
from slipstream.core.words import count
from slipstream.monitor.console import render
from slipstream.monitor.eventlog import read_events
from slipstream.monitor.health import FallingBehindRule
from slipstream.monitor.listener import ConsoleReporter
from slipstream.monitor.status import query_status
from slipstream.monitor.status_view import status_table
from slipstream.monitor.totals import RunTotals
from slipstream.runtime.bound import QueryKind
from slipstream.runtime.summary import summary
from slipstream.testing import article_views_db
from slipstream.tools.demo_view import RESULTS_QUERY, TopView
from slipstream.tools.serving import top_articles

LOG = Path(__file__).parents[2] / "fixtures" / "eventlogs" / "trending_counts.jsonl"
OUTPUT, QUARANTINE = "trending.views", "trending.quarantine.events"


def _records() -> list[dict[str, Any]]:
    return [json.loads(line) for line in LOG.read_text().splitlines()]


def _progress(query: str) -> list[dict[str, Any]]:
    return [r["progress"] for r in _records() if r["event"] == "progress" and r["query"] == query]


def _sum(progress: list[dict[str, Any]], pick: Any) -> int:
    return int(sum(pick(p) for p in progress))


def _fake_run(totals: RunTotals, *, plans: dict[str, Plan] | None = None, mode: str = "update",
              late_written: int = 0, output: str = OUTPUT) -> Any:  # fmt: skip
    """What `summary` reads of a run: its totals, outputs, inputs, plans and settings."""
    settings = SimpleNamespace(
        trigger=TriggerSpec.parse("available-now"),
        checkpoint_root=Path("state/checkpoints/trending"),
        quarantine_root=Path("state/quarantine/trending"),
        late_root=Path("state/late/trending"),
        quarantine_delta=False,
        late_delta=False,
    )
    views = SimpleNamespace(
        spec=object(), name="views", reads=(), is_output=True, kind=QueryKind.OUTPUT,
        ctx=SimpleNamespace(query_name=output, mode=mode),
    )  # fmt: skip
    prepared = SimpleNamespace(
        settings=settings,
        pipeline=SimpleNamespace(name="trending"),
        outputs={"views": views},
        inputs={"events": SimpleNamespace(quarantine=Path("state/quarantine/trending/events"))},
        plans=plans or {},
        quarantines={"events": "views"},  # the output writes its input's quarantine
    )
    dead_letter = SimpleNamespace(written=late_written) if late_written else None
    return SimpleNamespace(
        totals=totals,
        prepared=prepared,
        dead_letter=dead_letter,
        accounts=lambda: totals.by_query,  # no ingest stage in these runs: as counted
    )


def _totals() -> RunTotals:
    """The recorded run's totals, without its quarantine query (the version that recorded it
    ran one; the output's own progress counts what it left out)."""
    totals = RunTotals()
    for record in _records():
        if record.get("query") != QUARANTINE:
            totals(record)
    return totals


# --- the output counts what it quarantined; every line reconciles --------------------------


def test_the_outputs_lines_say_how_many_records_it_quarantined_and_where_they_are() -> None:
    """Its batch lines say the records it left out (observed on its own query: the recorded
    run's quarantine query wrote as many), and the summary says where they are."""
    written = _sum(_progress(QUARANTINE), lambda p: p["observedMetrics"]["quality"]["quarantined"])
    left_out = _sum(_progress(OUTPUT), lambda p: p["observedMetrics"]["quality"]["quarantined"])
    assert written == left_out > 0  # the recorded run wrote 212 lines to its quarantine

    out = io.StringIO()
    reporter = ConsoleReporter(out)
    for record in _records():
        reporter(record)
    lines = [line for line in out.getvalue().splitlines() if line.startswith(OUTPUT)]
    found = [re.search(r"quarantined ([\d,]+)", line) for line in lines]
    shown = [int(m[1].replace(",", "")) for m in found if m is not None]
    assert len(shown) == len(lines) and sum(shown) == left_out

    text = io.StringIO()
    summary(_fake_run(_totals()), text)
    said = text.getvalue().splitlines()
    assert f"{left_out:,} quarantined" in next(x for x in said if x.startswith(f"summary {OUTPUT}"))
    assert (
        "quarantine events: the records trending.views rejected are in "
        "state/quarantine/trending/events"
    ) in said


def test_a_query_that_ran_no_batch_still_has_its_summary_line() -> None:
    """A restart with nothing new for the output: it reported no batch, and the summary still
    gives it a line (0 batches), as the first run did."""
    text = io.StringIO()
    summary(_fake_run(RunTotals()), text)
    lines = text.getvalue().splitlines()
    assert [x for x in lines if x.startswith("summary ")] == [
        f"summary {OUTPUT}: 0 batches, 0 records read = 0 valid + 0 quarantined + 0 late "
        "(dropped by the watermark)"
    ]


def test_the_outputs_summary_accounts_for_every_record_read() -> None:
    """read = valid + quarantined + late + duplicates, each term from Spark's own progress:
    numInputRows, the observed quality metrics, the deduplication's late and duplicate rows."""
    progress = _progress(OUTPUT)
    read = _sum(progress, lambda p: p["numInputRows"])
    quarantined = _sum(progress, lambda p: p["observedMetrics"]["quality"]["quarantined"])
    operators = [o for p in progress for o in p["stateOperators"]]
    dedupe = [o for o in operators if o["operatorName"].startswith("dedupe")]
    late = int(sum(o["numRowsDroppedByWatermark"] for o in dedupe))
    duplicates = int(sum(o["customMetrics"]["numDroppedDuplicateRows"] for o in dedupe))
    valid = read - quarantined - late - duplicates
    assert late > 0 and duplicates > 0 and valid > 0

    text = io.StringIO()
    summary(_fake_run(_totals(), late_written=late), text)
    lines = text.getvalue().splitlines()
    line = next(x for x in lines if x.startswith(f"summary {OUTPUT}:"))
    assert (
        f"{read:,} records read = {valid:,} valid + {quarantined:,} quarantined + {late:,} late "
        f"(dropped by the watermark) + {duplicates:,} duplicates dropped"
    ) in line
    assert f"dead-letter: {late:,} late records (dropped by the watermark)" in text.getvalue()
    assert "state/late/trending" in text.getvalue()
    assert not any(re.search(r"\b1 (batches|records|rows)\b", x) for x in lines)


def test_the_dashboard_card_and_status_show_the_quarantine_querys_count() -> None:
    """The card's `quarantined` is `total_quarantined` of the query's status."""
    now = datetime(2026, 11, 27, tzinfo=UTC)
    statuses = {s.query: s for s in query_status(read_events(LOG), now)}
    written = _sum(_progress(QUARANTINE), lambda p: p["observedMetrics"]["quality"]["quarantined"])
    assert statuses[QUARANTINE].total_quarantined == written
    assert statuses[OUTPUT].total_quarantined == written
    header = render(status_table(list(statuses.values()), now)).splitlines()[0]
    # Spark's processedRowsPerSecond is rows read over batch time, not rows written
    assert "PROCESSED ROWS/S" in header and "OUT ROWS/S" not in header


def test_an_aggregations_late_partial_aggregates_are_not_taken_for_records() -> None:
    """A window aggregation first (mobile, iot_steps) counts late partial aggregates: the
    summary does not subtract them from the valid records, and says what they are."""
    totals = RunTotals()
    totals(_aggregation_record(0, rows=10, quarantined=1, late=0, removed=0, state=4))
    totals(_aggregation_record(1, rows=6, quarantined=0, late=2, removed=3, state=3))
    text = io.StringIO()
    summary(_fake_run(totals), text)
    line = next(x for x in text.getvalue().splitlines() if x.startswith(f"summary {OUTPUT}:"))
    assert "2 batches, 16 records read = 15 valid + 1 quarantined + 0 late" in line
    assert "late windows: 2 partial aggregates dropped by the watermark" in line


# --- item 8: an append-mode run whose windows are all still open says so -------------------


def _aggregation_record(batch: int, *, rows: int, quarantined: int, late: int, removed: int,
                        state: int) -> dict[str, Any]:  # fmt: skip
    progress = {
        "id": "q", "runId": "r", "name": OUTPUT, "batchId": batch, "numInputRows": rows,
        "timestamp": "2026-01-01T00:00:00.000Z", "durationMs": {"triggerExecution": 10},
        "eventTime": {"watermark": "2026-01-01T00:04:00.000Z"},
        "observedMetrics": {"quality": {"input": rows, "quarantined": quarantined}},
        "stateOperators": [{"operatorName": "stateStoreSave", "numRowsTotal": state,
                            "numRowsRemoved": removed, "numRowsDroppedByWatermark": late}],
    }  # fmt: skip
    return {"event": "progress", "query": OUTPUT, "progress": progress}


WINDOWED = Plan(steps=(), aggregation=True, window="tumbling", watermark_column="ts")
MOBILE = "mobile.counts"


def _replayed(name: str) -> RunTotals:
    totals = RunTotals()
    for line in (LOG.parent / name).read_text().splitlines():
        totals(json.loads(line))
    return totals


def test_an_append_run_that_wrote_no_row_because_every_window_is_open_says_so() -> None:
    """Two real `run mobile --mode append` event logs (record.py): file1.json alone, whose
    windows the watermark has not passed (the table stayed empty), and all four files (3 rows
    written: the windows the aggregation removed from its state)."""
    open_ = _replayed("mobile_append_open.jsonl")
    text = io.StringIO()
    summary(_fake_run(open_, plans={"views": WINDOWED}, mode="append", output=MOBILE), text)
    said = text.getvalue()
    assert f"{MOBILE}: no row written" in said and "every window is still open" in said
    assert "(watermark 2018-03-02T09:54:35.000Z, 2 rows in state)" in said

    written = _replayed("mobile_append_written.jsonl")
    assert written.by_query[MOBILE]["evicted"] == 3  # the rows the recorded run's table held
    for run_ in (_fake_run(written, plans={"views": WINDOWED}, mode="append", output=MOBILE),
                 _fake_run(open_, plans={"views": WINDOWED}, mode="update", output=MOBILE),
                 _fake_run(open_, mode="append", output=MOBILE)):  # fmt: skip
        text = io.StringIO()
        summary(run_, text)
        assert "no row written" not in text.getvalue()


# --- the demo calls a window complete once the watermark has passed its end ----------------


def _row(start_min: int, article: str, views: int) -> tuple[Any, ...]:
    start = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=start_min)
    end = start + timedelta(minutes=10)
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return (start.strftime(fmt), end.strftime(fmt), article, f"t {article}", "x", views, True)


def _complete_by_full_scan(rows: list[tuple[Any, ...]], watermark: datetime) -> str | None:
    """The reference: the latest window end at or before the watermark, over every row."""
    ends = [r[1] for r in rows if datetime.fromisoformat(r[1].replace("Z", "+00:00")) <= watermark]
    return max(ends) if ends else None


def test_latest_complete_waits_for_the_watermark(tmp_path: Path) -> None:
    # 10-minute windows sliding by 1 minute, starts 00:00 .. 00:40: events up to ~00:41
    rows = [_row(m, a, v + m) for m in range(0, 41) for a, v in (("a1", 1), ("a2", 3))]
    db = article_views_db(tmp_path / "v.db", rows)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    for seconds in range(0, 60 * 60, 37):
        watermark = t0 + timedelta(seconds=seconds)
        tops = top_articles(db, n=1, watermark=watermark)
        got = tops["latest_complete"][0]["window_end"] if tops["latest_complete"] else None
        assert got == _complete_by_full_scan(rows, watermark), watermark
        assert tops["current"][0]["window_end"] == "2026-01-01T00:41:00Z"  # not the watermark's
    # no watermark yet (Spark reports 1970-01-01): no window is complete
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    assert top_articles(db, watermark=epoch)["latest_complete"] == []


def test_the_demo_names_a_complete_window_only_past_the_batchs_watermark(tmp_path: Path) -> None:
    rows = [_row(m, a, v + m) for m in range(0, 41) for a, v in (("a1", 1), ("a2", 3))]
    db = article_views_db(tmp_path / "v.db", rows)

    def screen(watermark: str) -> str:
        out = io.StringIO()
        view = TopView(db, out, n=3, rate=10.0)
        progress = {"batchId": 4, "numInputRows": 100, "durationMs": {"triggerExecution": 1000},
                    "eventTime": {"watermark": watermark}}  # fmt: skip
        view({"event": "progress", "query": RESULTS_QUERY, "progress": progress})
        return out.getvalue()

    # the newest window ended 00:50, but the watermark has passed only 00:31
    shown = screen("2026-01-01T00:31:10.000Z")
    assert "latest complete window 00:21:00-00:31:00" in shown, shown
    assert "00:40:00-00:50:00" not in shown.split("latest complete")[1]
    assert "latest complete" not in screen("1970-01-01T00:00:00.000Z")


def test_the_demo_shows_no_complete_window_that_began_before_its_events(tmp_path: Path) -> None:
    """A window that starts before the demo's generator began holds only its back-dated
    stragglers: the screen says no window of the demo's own events has closed instead."""
    rows = [_row(m, a, v + m) for m in range(0, 41) for a, v in (("a1", 1), ("a2", 3))]
    db = article_views_db(tmp_path / "v.db", rows)
    progress = {"batchId": 4, "numInputRows": 100, "durationMs": {"triggerExecution": 1000},
                "eventTime": {"watermark": "2026-01-01T00:31:10.000Z"}}  # fmt: skip

    def screen(since: datetime) -> str:
        out = io.StringIO()
        view = TopView(db, out, n=3, rate=10.0)
        view.since = since
        view({"event": "progress", "query": RESULTS_QUERY, "progress": progress})
        return out.getvalue()

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    # the latest complete window is 00:21-00:31: the demo began at 00:25, inside it
    late_start = screen(t0 + timedelta(minutes=25))
    assert "latest complete" not in late_start, late_start
    assert "no window of the demo's own events has closed yet (they began at 00:25:00)" in (
        late_start
    )
    # began at 00:21, the window's own start: every event in it is the demo's
    assert "latest complete window 00:21:00-00:31:00" in screen(t0 + timedelta(minutes=21))


# --- words -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "word", "said"),
    [(1, "batch", "1 batch"), (2, "batch", "2 batches"), (0, "record", "0 records"),
     (1_000, "row", "1,000 rows"), (1, "query", "1 query"), (3, "query", "3 queries")],
)  # fmt: skip
def test_counts_in_words(n: int, word: str, said: str) -> None:
    assert count(n, word) == said


# --- rows written per second, by the sink's own count ----------------------------------------


def test_status_shows_rows_written_per_second_from_the_sinks_count() -> None:
    """A database sink's count stamped on each progress record (`written_rows`): status gives
    rows written per second of batch time beside Spark's processed rows; a query whose sink does
    not count (the quarantine's files) shows none. The round trip through the event log keeps
    it."""
    from slipstream.monitor.events import parse_event

    records = _records()
    durations = {}
    for record in records:
        if record["event"] == "progress" and record["query"] == OUTPUT:
            ms = record["progress"]["batchDuration"]  # Spark's wall time of the batch
            record["written_rows"] = 100 + record["progress"]["batchId"]
            durations[record["progress"]["batchId"]] = (record["written_rows"], ms)
    events = [parse_event(r) for r in records]
    assert [e.to_dict().get("written_rows") for e in events] == [
        r.get("written_rows") for r in records
    ]
    now = datetime(2026, 11, 27, tzinfo=UTC)
    statuses = {s.query: s for s in query_status(events, now)}
    recent = sorted(durations)[-FallingBehindRule().window :]  # the batches status averages
    want = sum(rows * 1000 / ms for rows, ms in (durations[b] for b in recent)) / len(recent)
    assert statuses[OUTPUT].written_rps == pytest.approx(want)
    assert statuses[QUARANTINE].written_rps is None
    assert statuses[OUTPUT].to_dict()["written_rows_per_second"] == pytest.approx(want)
    rows = render(status_table(list(statuses.values()), now)).splitlines()
    assert "WRITTEN ROWS/S" in rows[0]
    assert f"{want:,.0f}" in next(r for r in rows if OUTPUT in r and "quarantine" not in r)


def test_an_output_reading_a_shared_querys_rows_accounts_from_the_source() -> None:
    """runtime/shared_stage.py: 100 lines read by the shared query, 2 of them blank (read, no
    record: `checked` 98), 5 quarantined, 3 late, 2 duplicates; 88 rows passed on. The output
    read those 88 and accounts for the 100, as the shared query does and as a direct read did."""
    from slipstream.monitor.accounts import output_account, with_shared

    shared = {"rows": 100, "checked": 98, "quarantined": 5, "late": 3, "duplicates": 2,
              "expectations": {"amount_positive": 1}, "batches": 2}  # fmt: skip
    output = {"rows": 88, "quarantined": 0, "late": 0, "duplicates": 0, "expectations": {},
              "batches": 2}  # fmt: skip
    merged = with_shared(output, shared)
    assert (merged["rows"], merged["quarantined"], merged["late"], merged["duplicates"]) == (
        100, 5, 3, 2,
    )  # fmt: skip
    assert merged["expectations"] == {"amount_positive": 1}
    line = output_account("p.out", merged)
    assert line.split(": ", 1)[1] == output_account("p.shared.in", shared).split(": ", 1)[1]
    assert "100 records read = 90 valid + 5 quarantined + 3 late" in line
