"""trending on Pathway: python pathway_trending.py EVENTS_DIR CATALOG OUT_CSV.

- `pw.io.jsonlines.read(mode="static")` with a schema of strings: a line that is not JSON, lacks
  event_id/article_id/ts or has a value of another type is dropped by the reader (logged);
- `ts` parsed and checked, with `article_id`'s shape, by one Python UDF (peer_common.parse_line's
  rules; Pathway's `dt.strptime` takes one format, the files mix three);
- dedup: `groupby(event_id)`, one row per id. Pathway has no deduplication bounded by event time,
  so its state keeps every id (on these files the same rows: a duplicate is at most one file
  from its original);
- `windowby(ts, sliding(hop=1 min, duration=10 min, origin=epoch), instance=article_id)` with
  `common_behavior(cutoff=10 min)`: a window stops taking rows once the operator's time (the
  newest ts it has processed) passes its end + 10 min, the watermark's role; count per window;
- left join to the catalog (`pw.io.csv.read`, static);
- `pw.io.csv.write` writes the stream of changes (+1/-1 per row); the final rows (net +1) are
  written to OUT_CSV after the run.

Live mode (`--live`, OUT = the live output): the events are read with `mode="streaming"` (the
reader polls the folder and reads each new file; its default `autocommit_duration_ms` = 1500,
a commit of what was read at most every 1.5 s, left as is, like slipstream's default trigger)
and never end; the windowby's counts are incremental (a window's count is updated by each
commit, not held until the cutoff), so `pw.io.subscribe` gets the new rows of each commit and
appends them to OUT, flushed at the end of each commit's time (`on_time_end`).

Kafka mode (EVENTS = `kafka://HOST:PORT/TOPIC`, OUT = `postgresql`: libpq's variables):
`pw.io.kafka.read` (format json, the same schema, from the earliest offset,
`autocommit_duration_ms` left at its default 1500 as in live mode) replaces the folder, and the
joined counts go to PostgreSQL through Pathway's own sink,
`pw.io.postgres.write(output_table_type="snapshot")`: the table `peer_views` holds the current
count per (window, article), each commit applied atomically."""

from __future__ import annotations

import csv
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import pathway as pw
import peer_common as common

UNTIL = common.horizon()


class Event(pw.Schema):
    event_id: str
    article_id: str
    ts: str
    user_id: str | None = pw.column_definition(default_value=None)


class Article(pw.Schema):
    article_id: str
    title: str
    section: str
    published_at: str


def valid_ts(event_id: str, article_id: str, ts: str) -> datetime | None:
    """The UTC time of a valid event (trending's rules), None when the row is dropped."""
    import json

    parsed = common.parse_line(
        json.dumps({"event_id": event_id, "article_id": article_id, "ts": ts}), UNTIL
    )
    return parsed[2] if parsed else None


def read_events(events: str, live: bool) -> pw.Table:
    """The events: a folder of JSON lines, or (Kafka mode) a topic's JSON records."""
    topic = common.kafka_topic(events)
    if topic is None:
        mode = "streaming" if live else "static"
        return pw.io.jsonlines.read(events, schema=Event, mode=mode)
    settings = {
        "bootstrap.servers": topic[0],
        "group.id": "pathway",
        "auto.offset.reset": "earliest",
        "session.timeout.ms": "6000",
    }
    return pw.io.kafka.read(settings, topic[1], schema=Event, format="json")


def to_postgres(joined: pw.Table, out: str) -> None:
    """Kafka mode's sink: the current counts in PostgreSQL's peer_views (snapshot mode); OUT as
    peer_common.pg_settings reads it."""
    settings = common.pg_settings(out)
    rows = joined.select(
        window_start=pw.this.window_start.dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
        article_id=pw.this.article_id,
        views=pw.this.views,
    )
    pw.io.postgres.write(
        rows,
        settings,
        common.PEER_TABLE,
        output_table_type="snapshot",
        primary_key=[rows.window_start, rows.article_id],
    )


def build(events: str, catalog: Path, changes: str, live: bool = False) -> None:
    raw = read_events(events, live)
    checked = raw.select(
        pw.this.event_id,
        pw.this.article_id,
        ts=pw.apply_with_type(
            valid_ts, pw.DateTimeUtc | None, raw.event_id, raw.article_id, raw.ts
        ),
    )
    valid = checked.filter(pw.this.ts.is_not_none()).select(
        pw.this.event_id, pw.this.article_id, ts=pw.unwrap(pw.this.ts)
    )
    unique = valid.groupby(pw.this.event_id).reduce(
        pw.this.event_id,
        article_id=pw.reducers.any(pw.this.article_id),
        ts=pw.reducers.min(pw.this.ts),
    )
    counts = unique.windowby(
        pw.this.ts,
        window=pw.temporal.sliding(hop=common.SLIDE, duration=common.WINDOW, origin=common.EPOCH),
        instance=pw.this.article_id,
        behavior=pw.temporal.common_behavior(cutoff=common.WATERMARK),
    ).reduce(
        article_id=pw.this._pw_instance,
        window_start=pw.this._pw_window_start,
        views=pw.reducers.count(),
    )
    titles = pw.io.csv.read(str(catalog), schema=Article, mode="static")
    joined = counts.join_left(titles, counts.article_id == titles.article_id).select(
        counts.window_start,
        counts.article_id,
        title=titles.title,
        section=titles.section,
        views=counts.views,
    )
    if common.kafka_topic(events) is not None:
        to_postgres(joined, changes)
    elif live:
        subscribe(joined, Path(changes))
    else:
        pw.io.csv.write(joined, changes)


def subscribe(joined: pw.Table, out: Path) -> None:
    """Append the rows each commit adds to `out`, flushed at the end of the commit's time."""
    sink = common.LiveOut(out)
    pending: list[tuple[str, str, int]] = []

    def on_change(key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
        if is_addition:
            start = row["window_start"].strftime("%Y-%m-%dT%H:%M:%SZ")
            pending.append((row["article_id"], start, int(row["views"])))

    def on_time_end(time: int) -> None:
        sink.write(pending)
        pending.clear()

    pw.io.subscribe(joined, on_change=on_change, on_time_end=on_time_end)


def final_rows(changes: Path, catalog: Path) -> list[tuple[Any, ...]]:
    """The rows standing after the last change (net diff +1), in peer_common's shape."""
    net: dict[tuple[str, ...], int] = {}
    with changes.open(encoding="utf-8", newline="") as handle:
        for r in csv.DictReader(handle):
            key = (r["window_start"], r["article_id"], r["title"], r["section"], r["views"])
            net[key] = net.get(key, 0) + int(r["diff"])
    titles = common.load_catalog(catalog)
    rows = []
    for (start, article, _title, _section, views), n in net.items():
        if n > 0:
            moment = datetime.fromisoformat(start.replace("Z", "+00:00"))
            rows.append(common.output_row(moment, article, int(views), titles))
    return sorted(rows)


def main(events: str, catalog: str, out: str, live: bool = False) -> None:
    live = live or common.kafka_topic(events) is not None
    changes = out if live else str(Path(out).with_suffix(".changes.csv"))
    common.mark("started")
    build(events, Path(catalog), changes, live)
    common.mark("reading")
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    if live:
        return
    common.write_rows(Path(out), final_rows(Path(changes), Path(catalog)))
    common.mark("done")


if __name__ == "__main__":
    positional, live_mode, _ = common.arguments(sys.argv[1:])
    main(*positional[:3], live=live_mode)
