"""The trending demo's screen (`slipstream demo`): after each batch of the results query, the
top N articles of the current window from the SQLite table (`tools.serving.top_articles`, the
dashboard's query) under a line of the batch's figures; redrawn in place on a terminal, one
block per batch in a log. tools/demo_trending.py runs the demo and registers the view as a
listener handler."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from rich.console import Group, RenderableType

from slipstream.monitor.console import console_for, is_terminal, render, table
from slipstream.monitor.listener import STATE_COUNTED, Record, progress_summary
from slipstream.pipelines.trending import TrendingPipeline
from slipstream.tools.serving.trending import top_articles, watermark_time

#: the query whose batches the view follows: trending's results
RESULTS_QUERY = f"{TrendingPipeline.name}.{TrendingPipeline.outputs[0].name}"


def _utc(text: str) -> datetime:
    """'2026-11-22T10:41:00Z' (a window bound as the table holds it) -> an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def _short_time(text: str | None) -> str:
    """'2026-11-22T10:41:00Z' -> '10:41:00' (the demo runs within a day)."""
    if not text:
        return "-"
    return text.replace("Z", "")[11:19]


def render_top(
    tops: dict[str, list[dict[str, Any]]], n: int = 10, since: datetime | None = None
) -> RenderableType:
    """The top-N table of the current window and a line for the latest complete window. With
    `since` (when the demo's events began), a complete window that starts before it is not
    shown: it holds only the generator's back-dated stragglers, not the demo's traffic."""
    current = tops.get("current") or []
    if not current:
        return "(no views counted yet)"
    first = current[0]
    title = (
        f"top {n} of the current window {_short_time(first['window_start'])}-"
        f"{_short_time(first['window_end'])} UTC (in progress)"
    )
    rows = [
        (
            row["rank"],
            f"{row['views']:,}",
            row["article_id"],
            row["section"] or "-",
            row["title"] if row["in_catalog"] else "(not in catalog)",
        )
        for row in current[:n]
    ]
    parts: list[RenderableType] = [
        title,
        table(("#", "views", "article", "section", "title"), rows, numeric=(0, 1)),
    ]
    done = tops.get("latest_complete") or []
    if done and since is not None and _utc(done[0]["window_start"]) < since:
        parts.append(
            f"no window of the demo's own events has closed yet (they began at "
            f"{since.strftime('%H:%M:%S')}): a window is final once the watermark passes its end"
        )
    elif done:
        leaders = ", ".join(f"{r['article_id']} {r['views']:,}" for r in done[:3])
        parts.append(
            f"latest complete window {_short_time(done[0]['window_start'])}-"
            f"{_short_time(done[0]['window_end'])} (final: the watermark passed its end): "
            f"{leaders}"
        )
    return Group(*parts)


class TopView:
    """A listener handler: after each batch of the results query, redraw the top N."""

    def __init__(self, db_path: Path, out: TextIO, n: int = 10, rate: float = 0.0) -> None:
        self.db_path = db_path
        self.out = out
        self.n = n
        self.rate = rate
        self.tty = is_terminal(out)
        self.console = console_for(out)
        # running totals of data batches, not a list of them: the demo may run for days
        self.batches = 0
        self.events = 0
        self.busy_s = 0.0
        self.rps_sum = 0.0
        self.first_batch_at: float | None = None
        self.started = time.monotonic()
        self.dashboard_url: str | None = None  # shown in the header (a redraw clears the screen)
        #: when the generator's live events began: earlier windows hold only back-dated ones
        self.since: datetime | None = None
        self._lock = threading.Lock()

    def __call__(self, record: Record) -> None:
        if record["event"] != "progress" or record["query"] != RESULTS_QUERY:
            return
        s = progress_summary(record["progress"], record.get(STATE_COUNTED, True))
        if s["rows"] == 0:
            return
        with self._lock:
            if self.first_batch_at is None:
                self.first_batch_at = time.monotonic() - self.started
            self.batches += 1
            self.events += s["rows"]
            self.busy_s += s["duration_s"]
            self.rps_sum += s["processed_rps"]
            self.draw(s)

    def draw(self, s: dict[str, Any]) -> None:
        wm = s["watermark"] or ""
        # complete: the watermark has passed its end (Spark no longer changes its row)
        tops = top_articles(self.db_path, self.n, watermark=watermark_time(wm))
        since = self.since
        header = [
            f"slipstream demo: trending articles, {self.rate:,.0f} events/s generated live"
            "  (Ctrl-C to stop)",
            f"batch {s['batch']}: {s['rows']:,} events in {s['duration_s']:.2f} s "
            f"({s['processed_rps']:,.0f}/s) | watermark "
            f"{'-' if wm.startswith('1970') else _short_time(wm)} | late {s['late']:,} | "
            f"duplicates {s['duplicates']:,} | quarantined {s['quarantined']:,}",
            "",
        ]
        if self.dashboard_url:
            header[1:1] = [f"dashboard {self.dashboard_url}"]
        screen = Group(*header, render_top(tops, self.n, since))
        if self.tty:  # redraw the screen in place
            self.console.clear()
            self.console.print(screen)
        else:  # a log: one block per batch
            self.out.write(render(screen) + "\n\n")
            self.out.flush()

    def throughput(self) -> dict[str, Any]:
        """What the pipeline sustained: events over the time spent processing them, and the
        mean of Spark's per-batch processedRowsPerSecond."""
        with self._lock:
            batches, rows, busy, rps = self.batches, self.events, self.busy_s, self.rps_sum
        return {
            "batches": batches,
            "events": rows,
            "busy_s": busy,
            "events_per_s": rows / busy if busy else 0.0,
            "mean_batch_rps": rps / batches if batches else 0.0,
        }
