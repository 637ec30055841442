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
- at end of input every window closes; rows are collected and written as CSV."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.inputs import FixedPartitionedSource, StatefulSourcePartition
from bytewax.operators.windowing import EventClock, SlidingWindower, count_window
from bytewax.outputs import DynamicSink, StatelessSinkPartition
from bytewax.testing import run_main
from peer_common import (
    EPOCH,
    SLIDE,
    WATERMARK,
    WINDOW,
    event_files,
    horizon,
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


def flow(events: Path, catalog: dict[str, tuple[str, str]], sink: CollectSink) -> Dataflow:
    until = horizon()
    df = Dataflow("trending")
    lines = op.input("files", df, OrderedDirSource(events))
    parsed = op.filter_map("parse", lines, lambda line: parse_line(line, until))
    unique = op.stateful_flat_map("dedup", op.key_on("one", parsed, lambda _: "all"), dedup)
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


def main(events: str, catalog: str, out: str) -> None:
    sink = CollectSink()
    mark("started")
    run_main(flow(Path(events), load_catalog(Path(catalog)), sink))
    write_rows(Path(out), sorted(sink.rows))
    mark("done")


if __name__ == "__main__":
    main(*sys.argv[1:4])
