"""What the peer programs share (each runs in its own virtual environment, without slipstream):
the trending job's rules for one input line, the catalog, and the output file.

The rules are trending's (src/slipstream/pipelines/trending.py): a line is a JSON object whose
`event_id`, `article_id` and `ts` are strings, `user_id` a string or absent, `ts` an ISO-8601
time (no zone means UTC) at most a day ahead, `article_id` shaped like `a123`. Output rows are
(window_start, window_end, article_id, title, section, views, in_catalog), times as
`YYYY-MM-DDTHH:MM:SSZ`, written as CSV with a header, one row per (window, article).

Live mode (`--live`, the latency part of scenario peers): the program reads the landing folder
as it grows and never ends; every row it emits (a count of a (window, article) as it changes)
is appended to OUT as `article_id,window_start,views` and the file is flushed after each
update, so the benchmark sees a row as soon as the engine has emitted it (`LiveOut`).

Kafka mode (scenario kafka_latency): EVENTS is `kafka://HOST:PORT/TOPIC` (`kafka_topic`); the
program reads the topic from its first offset, never ends, and emits counts as in live mode;
OUT is `postgresql` (libpq's environment variables PGHOST, PGPORT, PGUSER, PGPASSWORD,
PGDATABASE; the rows upserted into the table `PEER_TABLE`, which the benchmark creates) where
the peer has a PostgreSQL sink, else the live output file.

Mobile's job (the `*_mobile.py` peers, scenario realtime_peers): a record of the topic is a
JSON object whose `id` and `action` are strings and whose `ts` is an ISO-8601 time (mobile's
valid action, tests/stream_reference.mobile_action); the count of valid actions per
(10-minute tumbling window of `ts`, action), a record later than the watermark (newest ts - 10
min) dropped, upserted by key into `MOBILE_TABLE` as slipstream's real-time writer stores it
(window_start as `YYYY-MM-DDTHH:MM:SSZ` text). The benchmark creates the table."""

from __future__ import annotations

import csv
import json
import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ARTICLE = re.compile(r"^a[0-9]+$")
WINDOW = timedelta(minutes=10)
SLIDE = timedelta(minutes=1)
WATERMARK = timedelta(minutes=10)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
HEADER = ("window_start", "window_end", "article_id", "title", "section", "views", "in_catalog")


def json_object(line: str | bytes) -> dict[str, Any] | None:
    """A line's JSON object, or None (not JSON, or JSON that is not an object)."""
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def parse_line(line: str, horizon: datetime) -> tuple[str, str, datetime] | None:
    """(event_id, article_id, ts in UTC) of a valid line, or None (malformed or dropped)."""
    doc = json_object(line)
    if doc is None:
        return None
    event_id, article_id, text = doc.get("event_id"), doc.get("article_id"), doc.get("ts")
    if not (isinstance(event_id, str) and isinstance(article_id, str) and isinstance(text, str)):
        return None
    user_id = doc.get("user_id")
    if user_id is not None and not isinstance(user_id, str):
        return None
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        return None
    ts = ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)
    if ts > horizon or not ARTICLE.match(article_id):
        return None
    return event_id, article_id, ts


def horizon() -> datetime:
    """The newest event time accepted: a day ahead of now (trending's --max-future)."""
    return datetime.now(UTC) + timedelta(days=1)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_files(directory: Path) -> list[Path]:
    """The event files in landing (= event time) order."""
    return sorted(p for p in directory.iterdir() if p.name.endswith(".jsonl"))


def load_catalog(path: Path) -> dict[str, tuple[str, str]]:
    with path.open(encoding="utf-8", newline="") as handle:
        return {r["article_id"]: (r["title"], r["section"]) for r in csv.DictReader(handle)}


def output_row(
    start: datetime, article_id: str, views: int, catalog: dict[str, tuple[str, str]]
) -> tuple[Any, ...]:
    title, section = catalog.get(article_id, ("", ""))
    return (
        iso(start),
        iso(start + WINDOW),
        article_id,
        title,
        section,
        views,
        article_id in catalog,
    )


def write_rows(path: Path, rows: list[tuple[Any, ...]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(rows)


class LiveOut:
    """The live output: rows appended as `article_id,window_start,views`, flushed per update
    (one `write` call = one update of the engine: a batch, an epoch, a changelog row)."""

    def __init__(self, path: Path) -> None:
        self.handle = path.open("a", encoding="utf-8")

    def write(self, rows: list[tuple[str, str, int]]) -> None:
        if rows:
            self.handle.write("".join(f"{a},{w},{n}\n" for a, w, n in rows))
            self.handle.flush()


#: the table a peer's Kafka mode writes (created by the benchmark): one row per (window, article)
PEER_TABLE = "peer_views"
PEER_TABLE_DDL = (
    f"CREATE TABLE {PEER_TABLE} (window_start TEXT NOT NULL, article_id TEXT NOT NULL, "
    "views BIGINT NOT NULL, PRIMARY KEY (window_start, article_id))"
)


#: mobile's output table, as slipstream's PostgreSQL sink names it; one row per (window, action)
MOBILE_TABLE = "mobile_action_counts"
MOBILE_TABLE_DDL = (
    f"CREATE TABLE {MOBILE_TABLE} (window_start TEXT NOT NULL, action TEXT NOT NULL, "
    "count BIGINT NOT NULL, PRIMARY KEY (window_start, action))"
)
MOBILE_UPSERT = (
    f"INSERT INTO {MOBILE_TABLE} (window_start, action, count) VALUES (%s, %s, %s) "
    "ON CONFLICT (window_start, action) DO UPDATE SET count = EXCLUDED.count"
)
MOBILE_WINDOW = timedelta(minutes=10)
MOBILE_WATERMARK = timedelta(minutes=10)


def mobile_action(line: str | bytes) -> tuple[str, datetime] | None:
    """(action, ts in UTC) of a valid mobile action, or None."""
    doc = json_object(line)
    if doc is None:
        return None
    action, text = doc.get("action"), doc.get("ts")
    if not (isinstance(doc.get("id"), str) and isinstance(action, str) and isinstance(text, str)):
        return None
    try:
        ts = datetime.fromisoformat(text)
    except ValueError:
        return None
    return action, ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


def tumbling_start(ts: datetime, length: timedelta = MOBILE_WINDOW) -> datetime:
    return EPOCH + (ts - EPOCH) // length * length


def pg_settings(out: str) -> dict[str, str]:
    """OUT `postgresql` = libpq's environment variables (PGHOST, PGPORT, PGUSER, PGPASSWORD,
    PGDATABASE), so no password is on a command line; else a postgresql:// URL."""
    import os
    from urllib.parse import unquote, urlsplit

    url = urlsplit(out if out != "postgresql" else "postgresql://")
    env = os.environ
    return {
        "host": url.hostname or env.get("PGHOST", "127.0.0.1"),
        "port": str(url.port or env.get("PGPORT", "5432")),
        "dbname": url.path.lstrip("/") or env.get("PGDATABASE", ""),
        "user": unquote(url.username or env.get("PGUSER", "")),
        "password": unquote(url.password or env.get("PGPASSWORD", "")),
    }


def kafka_topic(events: str) -> tuple[str, str] | None:
    """(bootstrap servers, topic) of a `kafka://HOST:PORT/TOPIC` argument, else None."""
    if not events.startswith("kafka://"):
        return None
    bootstrap, _, topic = events[len("kafka://") :].partition("/")
    return bootstrap, topic.partition("?")[0]


def arguments(argv: list[str]) -> tuple[list[str], bool, dict[str, str]]:
    """The positional arguments, whether `--live` was given, and the `--NAME=VALUE` options."""
    options = dict(a[2:].partition("=")[::2] for a in argv if a.startswith("--") and "=" in a)
    return [a for a in argv if not a.startswith("--")], "--live" in argv, options


def mark(label: str) -> None:
    """One line the benchmark reads: `PEER-MARK label <epoch seconds>` (e.g. when the engine
    has started and is about to read, so start-up can be told apart from processing)."""
    print(f"PEER-MARK {label} {time.time():.3f}", flush=True)
