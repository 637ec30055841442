"""An independent model of the trending pipeline, for the tests: plain Python + pandas.

It shares no code with slipstream. It parses each line with `json` and `datetime` (the rules
are bench/peers/peer_common.py's, which the benchmark's peers run too), applies the
pipeline's documented rules (required fields, `article_id` shape, `ts` at most a day ahead),
then models Spark's micro-batch semantics as documented in pipelines/trending.py: in batch k a
row is late when its ts is at or before (max valid ts of batches <= k-2) - watermark, late rows
are dropped before deduplication, an event_id counts once, and each event counts in every
sliding window that holds it (windows aligned to the epoch). The result is joined to the catalog
read with `csv`."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from bench.peers import peer_common

from tests.stream_reference import counted

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_line(line: str, now: datetime) -> dict[str, Any] | None:
    """The valid record of a line, or None (malformed or dropped by an expectation). The rules
    are written once, in plain Python, for the peers of the benchmark and for these tests
    (bench/peers/peer_common.py imports nothing of slipstream's)."""
    parsed = peer_common.parse_line(line, now + timedelta(days=1))
    if parsed is None:
        return None
    event_id, article_id, ts = parsed
    return {"event_id": event_id, "article_id": article_id, "ts": ts}


def counted_events(
    batches: Sequence[Sequence[str]], watermark: timedelta, now: datetime
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The events that count, and how many lines were invalid, late and duplicates."""
    kept, stats = counted(
        batches, lambda line: parse_line(line, now), "ts", lambda r: r["event_id"], watermark
    )
    return kept, {k: stats[k] for k in ("invalid", "late", "duplicates")}


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def article_views(
    events: list[dict[str, Any]], catalog: Path, window: timedelta, slide: timedelta
) -> set[tuple[Any, ...]]:
    """(window_start, window_end, article_id, title, section, views, in_catalog) rows."""
    rows = []
    for event in events:
        offset = (event["ts"] - EPOCH) // slide * slide
        start = EPOCH + offset
        while start + window > event["ts"]:
            rows.append({"start": start, "article_id": event["article_id"]})
            start -= slide
    frame = pd.DataFrame(rows, columns=["start", "article_id"])
    counts = frame.groupby(["start", "article_id"]).size().reset_index(name="views")
    with catalog.open(encoding="utf-8", newline="") as handle:
        titles = {r["article_id"]: (r["title"], r["section"]) for r in csv.DictReader(handle)}
    return {
        (
            iso(row.start),
            iso(row.start + window),
            row.article_id,
            titles.get(row.article_id, (None, None))[0],
            titles.get(row.article_id, (None, None))[1],
            int(row.views),
            row.article_id in titles,
        )
        for row in counts.itertuples()
    }


def table_rows(rows: list[dict[str, Any]]) -> set[tuple[Any, ...]]:
    """The sink's article_views rows in the reference's shape."""
    return {
        (
            r["window_start"],
            r["window_end"],
            r["article_id"],
            r["title"],
            r["section"],
            int(r["views"]),
            bool(r["in_catalog"]),
        )
        for r in rows
    }
