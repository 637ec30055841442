"""Top articles from the `article_views` table the trending pipeline upserts (SQLite).

Two windows are served, both chosen in *event time* from what the table holds (or from `now`):

- `current`: the window in progress that closes first, i.e. the one holding the latest event
  time and ending soonest. With 10-minute windows sliding by 1 minute it covers the trailing
  ~10 minutes: "most popular now". (The window that *started* last covers only the last minute
  and would flicker; it is not what a reader means by "now".)
- `latest_complete`: the latest window whose end has passed in event time. No on-time event can
  still arrive for it; an out-of-order event within the watermark still may, until the
  watermark passes its end, after which Spark drops the window's state and the row is final.

Without `now`, the latest event time is estimated by the latest `window_start` in the table
(every event is counted in a window that starts at most one slide before it), so `current` is
the window ending right after it. Pass `now` (an aware datetime) to anchor on a clock instead.
Reads open the database read-only and never block the writer (WAL mode).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slipstream.sinks.base import quote_ident
from slipstream.sinks.sqlite import has_table, read_only

COLUMNS = ("window_start", "window_end", "article_id", "title", "section", "views", "in_catalog")


def _parse(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def top_articles(
    db_path: Path | str,
    n: int = 10,
    now: datetime | None = None,
    *,
    table: str = "article_views",
) -> dict[str, list[dict[str, Any]]]:
    """{"current": [...], "latest_complete": [...]}: up to `n` rows each, most views first
    (ties by article_id), with `rank` from 1. Empty lists when nothing is there yet."""
    empty: dict[str, list[dict[str, Any]]] = {"current": [], "latest_complete": []}
    with read_only(db_path) as conn:
        if conn is None or not has_table(conn, table):
            return empty
        t = quote_ident(table)
        windows = [
            (_parse(start), _parse(end), start)
            for start, end in conn.execute(f"SELECT DISTINCT window_start, window_end FROM {t}")
        ]
        if not windows:
            return empty
        latest = max(windows)
        length = latest[1] - latest[0]
        windows = [w for w in windows if w[1] - w[0] == length]  # one window length only
        if now is None:
            anchor = latest[0]
        else:  # a naive `now` is UTC, like every timestamp slipstream stores
            anchor = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
        open_ = [w for w in windows if w[1] > anchor and w[0] <= anchor]
        closed = [w for w in windows if w[1] <= anchor]
        result: dict[str, list[dict[str, Any]]] = {}
        for name, chosen in (
            ("current", min(open_, key=lambda w: w[1]) if open_ else None),
            ("latest_complete", max(closed, key=lambda w: w[1]) if closed else None),
        ):
            if chosen is None:
                result[name] = []
                continue
            cols = ", ".join(quote_ident(c) for c in COLUMNS)
            rows = conn.execute(
                f"SELECT {cols} FROM {t} WHERE window_start = ? "
                "ORDER BY views DESC, article_id LIMIT ?",
                (chosen[2], n),
            ).fetchall()
            result[name] = [
                {**dict(row), "in_catalog": bool(row["in_catalog"]), "rank": i}
                for i, row in enumerate(rows, start=1)
            ]
        return result
