"""trending on Bytewax: python bytewax_trending.py EVENTS_DIR CATALOG OUT_CSV.

One worker (`run_main`). A source of one partition reads the event files in name (= event
time) order, in batches of lines. Then:
- parse: the trending rules (peer_common.parse_line), malformed lines dropped;
- dedup by event_id within the watermark: one stateful step holds the ids seen and forgets an
  id once the newest event time passes its ts + 10 min (the role of Spark's
  dropDuplicatesWithinWatermark);
- `count_window` per article with an `EventClock` that waits 10 min (the watermark) and a
  `SlidingWindower` of 10 min every 1 min aligned to the epoch; an item older than the
  watermark is late for all its windows and dropped (the late stream is discarded);
- each closed window's count joined to the catalog (a dict: the catalog is static);
- at end of input every window closes; rows are collected and written as CSV.

Live mode (`--live`, OUT = the live output): Bytewax's file sources read what a folder holds
when they start, so `PolledDirSource` (one partition) lists the folder in name order every
second and reads each new file whole, as one batch, never ending. `count_window` emits a
window's count only when the watermark closes it (20 minutes of event time after an event)
and has no early firing, so the counts are one `stateful_batch` step instead (`LiveCounts`,
keyed on one key like the dedup): for each batch it adds the events to their ten windows
(an event whose window ended at or before the watermark, newest ts - 10 min as of the batch's
start, is late for that window), forgets the windows the watermark has passed, and emits the
changed (window, article) counts of the batch, which the sink appends to OUT, flushed per
batch: slipstream's update mode, one Bytewax batch for one micro-batch.

Kafka mode (EVENTS = `kafka://HOST:PORT/TOPIC`, OUT = `postgresql`: libpq's variables
PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE, or a postgresql:// URL): Bytewax's own
`KafkaSource` (bytewax.connectors.kafka, confluent-kafka; one partition, from the first
offset, batches of up to 1,000 messages) replaces the folder; the counts are `LiveCounts` as in
live mode, and each output batch is upserted into PostgreSQL's `peer_views` in one transaction
(`PgSink`, psycopg: Bytewax has no PostgreSQL sink of its own)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow, Stream
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.operators.windowing import EventClock, SlidingWindower, count_window
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.testing import run_main
from peer_common import (
    EPOCH,
    PEER_TABLE,
    SLIDE,
    WATERMARK,
    WINDOW,
    LiveOut,
    arguments,
    event_files,
    horizon,
    iso,
    kafka_topic,
    load_catalog,
    mark,
    output_row,
    parse_line,
    write_rows,
)

BATCH = 2000


class _OrderedFiles(StatefulSourcePartition[str, None]):
    def __init__(self, files: list[Path]) -> None:
        self.lines = (line for path in files for line in path.open(encoding="utf-8"))
        self.started = False

    def next_batch(self) -> list[str]:
        if not self.started:
            mark("reading")
            self.started = True
        batch = [line for _, line in zip(range(BATCH), self.lines, strict=False)]
        if not batch:
            raise StopIteration
        return batch

    def snapshot(self) -> None:
        return None


class OrderedDirSource(FixedPartitionedSource[str, None]):
    """Every file of a folder, in name order, as one partition (so event time moves forward
    as the generator wrote it; Bytewax's DirSource reads files as parallel partitions)."""

    def __init__(self, directory: Path) -> None:
        self.files = event_files(directory)

    def list_parts(self) -> list[str]:
        return ["all"]

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _OrderedFiles:
        return _OrderedFiles(self.files)


class _Polled(StatefulSourcePartition[str, None]):
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.read: set[str] = set()
        self.awake: datetime | None = None
        mark("reading")

    def next_batch(self) -> list[str]:
        new = [p for p in event_files(self.directory) if p.name not in self.read]
        if not new:
            self.awake = datetime.now(UTC) + timedelta(seconds=1)
            return []
        self.awake = None
        self.read.add(new[0].name)
        with new[0].open(encoding="utf-8") as handle:
            return handle.readlines()

    def next_awake(self) -> datetime | None:
        return self.awake

    def snapshot(self) -> None:
        return None


class PolledDirSource(FixedPartitionedSource[str, None]):
    """The files of a growing folder in name order, one partition: every second, the folder
    is listed and each file not read yet is read whole (one batch a file); never ends."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def list_parts(self) -> list[str]:
        return ["all"]

    def build_part(self, step_id: str, for_part: str, resume_state: None) -> _Polled:
        return _Polled(self.directory)


class LiveCounts(op.StatefulBatchLogic[tuple[str, str, datetime], list[Any], None]):
    """Counts per (window, article) updated per batch; emits the batch's changed counts."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, str], int] = {}
        self.newest = EPOCH

    def on_batch(self, values: list[tuple[str, str, datetime]]) -> tuple[list[Any], bool]:
        watermark = (self.newest - WATERMARK - EPOCH) // SLIDE  # in minutes since the epoch
        span = WINDOW // SLIDE
        changed: set[tuple[int, str]] = set()
        for _, article, ts in values:
            self.newest = max(self.newest, ts)
            last = (ts - EPOCH) // SLIDE  # the newest window start holding ts
            for start in range(max(last - span + 1, watermark - span + 1), last + 1):
                key = (start, article)
                self.counts[key] = self.counts.get(key, 0) + 1
                changed.add(key)
        rows = [(a, iso(EPOCH + SLIDE * w), self.counts[(w, a)]) for w, a in changed]
        passed = (self.newest - WATERMARK - EPOCH) // SLIDE - span  # windows ended by then
        if passed >= 0 and len(self.counts) > 0:
            self.counts = {k: n for k, n in self.counts.items() if k[0] > passed}
        return ([rows] if rows else []), op.StatefulBatchLogic.RETAIN

    def snapshot(self) -> None:
        return None


class _Append(StatelessSinkPartition[list[Any]]):
    def __init__(self, out: LiveOut) -> None:
        self.out = out

    def write_batch(self, items: list[list[Any]]) -> None:
        self.out.write([row for rows in items for row in rows])


class LiveSink(DynamicSink[list[Any]]):
    def __init__(self, path: Path) -> None:
        self.path = path

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Append:
        return _Append(LiveOut(self.path))


class _Upsert(StatelessSinkPartition[list[Any]]):
    def __init__(self, dsn: str, upsert: str) -> None:
        import psycopg

        self.conn = psycopg.connect("" if dsn == "postgresql" else dsn)  # "": libpq's env
        self.upsert = upsert

    def write_batch(self, items: list[list[Any]]) -> None:
        rows = [(w, a, n) for rows in items for a, w, n in rows]
        if rows:
            with self.conn.transaction(), self.conn.cursor() as cur:
                cur.executemany(self.upsert, rows)

    def close(self) -> None:
        self.conn.close()


UPSERT = (
    f"INSERT INTO {PEER_TABLE} (window_start, article_id, views) VALUES (%s, %s, %s) "
    "ON CONFLICT (window_start, article_id) DO UPDATE SET views = EXCLUDED.views"
)


class PgSink(DynamicSink[list[Any]]):
    """Each batch of changed counts, lists of (key, window_start, count), upserted in one
    transaction: `upsert` takes (window_start, key, count) (default: trending's peer_views)."""

    def __init__(self, dsn: str, upsert: str = UPSERT) -> None:
        self.dsn = dsn
        self.upsert = upsert

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Upsert:
        return _Upsert(self.dsn, self.upsert)


class _Collect(StatelessSinkPartition[tuple[Any, ...]]):
    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows

    def write_batch(self, items: list[tuple[Any, ...]]) -> None:
        self.rows.extend(items)


class CollectSink(DynamicSink[tuple[Any, ...]]):
    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def build(self, step_id: str, worker_index: int, worker_count: int) -> _Collect:
        return _Collect(self.rows)


def dedup(
    state: tuple[dict[str, datetime], datetime] | None, event: tuple[str, str, datetime]
) -> tuple[tuple[dict[str, datetime], datetime], Iterable[tuple[str, str, datetime]]]:
    seen, newest = state if state is not None else ({}, EPOCH)
    event_id, _, ts = event
    if event_id in seen:
        return (seen, newest), ()
    if ts > newest:
        newest = ts
        if len(seen) % 50_000 == 0:  # now and then, forget ids older than the watermark
            cutoff = newest - WATERMARK
            seen = {k: v for k, v in seen.items() if v >= cutoff}
    seen[event_id] = ts
    return (seen, newest), (event,)


def unique_events(
    df: Dataflow, source: Any, text: Any = None
) -> Stream[tuple[str, tuple[str, str, datetime]]]:
    """Parsed, valid and deduplicated events, keyed on one key ("all"); `text` turns an item
    of the source into its line (Kafka: the record's value)."""
    until = horizon()
    items = op.input("files", df, source)
    lines = op.map("text", items, text) if text is not None else items
    parsed = op.filter_map("parse", lines, lambda line: parse_line(line, until))
    return op.stateful_flat_map("dedup", op.key_on("one", parsed, lambda _: "all"), dedup)


def flow(events: Path, catalog: dict[str, tuple[str, str]], sink: CollectSink) -> Dataflow:
    df = Dataflow("trending")
    unique = unique_events(df, OrderedDirSource(events))
    clock = EventClock(lambda e: e[2], wait_for_system_duration=WATERMARK)
    windower = SlidingWindower(length=WINDOW, offset=SLIDE, align_to=EPOCH)
    counted = count_window(
        "views", op.map("value", unique, lambda kv: kv[1]), clock, windower, lambda e: e[1]
    )
    rows = op.map(
        "join",
        counted.down,
        lambda kv: output_row(EPOCH + SLIDE * kv[1][0], kv[0], kv[1][1], catalog),
    )
    op.output("rows", rows, sink)
    return df


def live_flow(events: Path, out: Path) -> Dataflow:
    """Live mode: the growing folder, counts updated and emitted per batch (LiveCounts). The
    catalog join only adds title and section to a row: the live output carries neither."""
    df = Dataflow("trending-live")
    unique = unique_events(df, PolledDirSource(events))
    counts = op.stateful_batch("views", unique, lambda _: LiveCounts())
    op.output("rows", op.map("value", counts, lambda kv: kv[1]), LiveSink(out))
    return df


def kafka_flow(bootstrap: str, topic: str, dsn: str) -> Dataflow:
    """Kafka mode: the topic's records (JSON lines) -> LiveCounts -> PostgreSQL (PgSink)."""
    from bytewax.connectors.kafka import KafkaSource

    df = Dataflow("trending-kafka")
    source = KafkaSource([bootstrap], [topic], tail=True, add_config={"group.id": "bytewax"})
    mark("reading")
    unique = unique_events(df, source, lambda m: m.value.decode("utf-8") if m.value else "")
    counts = op.stateful_batch("views", unique, lambda _: LiveCounts())
    op.output("rows", op.map("value", counts, lambda kv: kv[1]), PgSink(dsn))
    return df


def main(events: str, catalog: str, out: str, live: bool = False) -> None:
    mark("started")
    topic = kafka_topic(events)
    if topic is not None:
        run_main(kafka_flow(*topic, out))
        return
    if live:
        run_main(live_flow(Path(events), Path(out)))
        return
    sink = CollectSink()
    run_main(flow(Path(events), load_catalog(Path(catalog)), sink))
    write_rows(Path(out), sorted(sink.rows))
    mark("done")


if __name__ == "__main__":
    positional, live_mode, _ = arguments(sys.argv[1:])
    main(*positional[:3], live=live_mode)
