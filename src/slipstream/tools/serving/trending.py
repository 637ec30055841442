"""Top articles from the `article_views` table the trending pipeline upserts (SQLite).

Two windows are served, both chosen in *event time* from what the table holds (or from `now`):

- `current`: the window in progress that closes first, i.e. the one holding the latest event
  time and ending soonest. With 10-minute windows sliding by 1 minute it covers the trailing
  ~10 minutes: "most popular now". (The window that *started* last covers only the last minute
  and would flicker; it is not what a reader means by "now".)
- `latest_complete`: given the query's `watermark`, the latest window whose end it has passed:
  Spark has dropped that window's state and its row is final (the demo passes the watermark of
  the batch it shows). Without a watermark, the latest window whose end has passed in event
  time: no on-time event can still arrive for it, but an out-of-order one within the watermark
  still may, so its counts may still grow until the watermark passes its end.

Without `now`, the latest event time is estimated by the latest `window_start` in the table
(every event is counted in a window that starts at most one slide before it), so `current` is
the window ending right after it. Pass `now` (an aware datetime) to anchor on a clock instead.
Reads open the database read-only and never block the writer (WAL mode).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from slipstream.sinks.base import Sink, SinkContext
from slipstream.sinks.database import quote_ident
from slipstream.sinks.sqlite import has_table, last_commit, read_only

COLUMNS = ("window_start", "window_end", "article_id", "title", "section", "views", "in_catalog")


def _parse(text: str) -> datetime:
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _utc(moment: datetime) -> datetime:
    """A naive time is UTC, like every timestamp slipstream stores."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def watermark_time(text: str | None) -> datetime:
    """A progress event's watermark (ISO text) as a time: 1970-01-01 (Spark's own start, which
    has passed no window of today) when the query has none yet."""
    return _parse(text) if text else _EPOCH


def _windows_since(
    conn: Any, table: str, since: datetime | None
) -> list[tuple[datetime, datetime, str]]:
    """Distinct (start, end, start as stored) with a start at or after `since`, read through
    the key's index on window_start; `since=None`: those of the newest start's second.

    Stored times are ISO text, whole seconds as `...:SSZ` and fractions as `...:SS.ffffffZ`, so
    text order is time order except within one second (`.` sorts before `Z`): the bound is
    taken a second early and the rows are filtered on their parsed times."""
    if since is None:
        row = conn.execute(
            f"SELECT window_start FROM {table} ORDER BY window_start DESC LIMIT 1"
        ).fetchone()
        if row is None:
            return []
        since = _parse(row[0]).replace(microsecond=0)
    bound = "0001-01-01T00:00:00Z"
    if since > datetime.min.replace(tzinfo=since.tzinfo) + timedelta(seconds=1):
        early = since.replace(microsecond=0) - timedelta(seconds=1)
        bound = early.replace(tzinfo=None).isoformat(timespec="seconds") + "Z"
    rows = conn.execute(
        f"SELECT DISTINCT window_start, window_end FROM {table} WHERE window_start >= ?",
        (bound,),
    )
    since = since if since.tzinfo else since.replace(tzinfo=UTC)
    return [(b, _parse(e), s) for s, e in rows if (b := _parse(s)) >= since]


def top_articles(
    db_path: Path | str,
    n: int = 10,
    now: datetime | None = None,
    *,
    table: str = "article_views",
    watermark: datetime | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """{"current": [...], "latest_complete": [...]}: up to `n` rows each, most views first
    (ties by article_id), with `rank` from 1. Empty lists when nothing is there yet. With
    `watermark`, a window is complete only once the watermark has passed its end."""
    empty: dict[str, list[dict[str, Any]]] = {"current": [], "latest_complete": []}
    with read_only(db_path) as conn:
        if conn is None or not has_table(conn, table):
            return empty
        t = quote_ident(table)
        newest = _windows_since(conn, t, None)  # the newest window_start's second
        if not newest:
            return empty
        latest = max(newest)
        length = latest[1] - latest[0]
        anchor = latest[0] if now is None else _utc(now)
        # The open windows start after anchor - length, and with windows that slide by at most
        # their length the latest closed one after anchor - 2 x length: an index range, not a
        # scan of the whole table (the dashboard asks every 1.5 s for as long as the run lasts).
        # A window is final once the watermark has passed its end: with a watermark behind the
        # anchor, the range starts two lengths before the watermark instead.
        final = anchor if watermark is None else _utc(watermark)
        since = min(anchor, final) if final > _EPOCH else anchor
        windows = _windows_since(conn, t, since - 2 * length)
        windows = [w for w in windows if w[1] - w[0] == length]  # one window length only
        open_ = [w for w in windows if w[1] > anchor and w[0] <= anchor]
        closed = [w for w in windows if w[1] <= final]
        if not closed and final > _EPOCH:  # a gap in the data: the complete one is older
            windows = [w for w in _windows_since(conn, t, datetime.min) if w[1] - w[0] == length]
            closed = [w for w in windows if w[1] <= final]
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


def dashboard_view(sink: Sink, ctx: SinkContext) -> dict[str, Any] | None:
    """The dashboard's table for trending: the top 10 articles of the current window (the window
    in progress that closes first), updating as it counts; None when the output is not in SQLite
    (the dashboard then shows the sink's newest rows)."""
    db = getattr(sink, "path", None)
    if sink.spec.kind != "sqlite" or db is None:
        return None
    current = top_articles(db, 10, table=ctx.table)["current"]
    title = "Top 10 articles, current window"
    if current:
        start, end = current[0]["window_start"], current[0]["window_end"]
        title += f" {start[11:16]}-{end[11:16]} UTC (in progress)"
    return {
        "title": title,
        "columns": ["rank", "article", "title", "section", "views"],
        "rows": [
            [
                r["rank"],
                r["article_id"],
                r["title"] if r["in_catalog"] else "(not in catalog)",
                r["section"],
                r["views"],
            ]
            for r in current
        ],
        "updated": last_commit(db, ctx.table),
    }
