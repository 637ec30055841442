"""mobile on Bytewax, from Kafka into PostgreSQL: python bytewax_mobile.py kafka://HOST:PORT/TOPIC
postgresql (libpq's variables PGHOST, PGPORT, PGUSER, PGPASSWORD, PGDATABASE; or a
postgresql:// URL).

One worker (`run_main`). Bytewax's own `KafkaSource` (confluent-kafka; one partition, from the
first offset, batches of up to 1,000 messages) -> mobile's valid actions
(peer_common.mobile_action) -> `MobileCounts`, one `stateful_batch` step keyed on one key: per
batch, each action is added to its 10-minute tumbling window (an action whose window ended at
or before the watermark, newest ts - 10 min as of the batch's start, is late and dropped), the
windows the watermark has passed are forgotten, and the changed (window, action) counts of the
batch are emitted -> `PgSink` (bytewax_trending: each output batch upserted into
`mobile_action_counts` with psycopg's executemany, one transaction; Bytewax has no PostgreSQL
sink of its own)."""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

import bytewax.operators as op
from bytewax.dataflow import Dataflow
from bytewax.testing import run_main
from bytewax_trending import PgSink
from peer_common import (
    EPOCH,
    MOBILE_UPSERT,
    MOBILE_WATERMARK,
    MOBILE_WINDOW,
    arguments,
    iso,
    kafka_topic,
    mark,
    mobile_action,
    tumbling_start,
)


class MobileCounts(op.StatefulBatchLogic[tuple[str, datetime], list[Any], None]):
    """Counts per (window start, action); emits each batch's changed counts as one list of
    (action, window_start, count)."""

    def __init__(self) -> None:
        self.counts: dict[tuple[datetime, str], int] = {}
        self.newest = EPOCH

    def on_batch(self, values: list[tuple[str, datetime]]) -> tuple[list[Any], bool]:
        closed = self.newest - MOBILE_WATERMARK  # a window ending at or before this is late
        changed: set[tuple[datetime, str]] = set()
        for action, ts in values:
            self.newest = max(self.newest, ts)
            start = tumbling_start(ts)
            if start + MOBILE_WINDOW <= closed:
                continue
            key = (start, action)
            self.counts[key] = self.counts.get(key, 0) + 1
            changed.add(key)
        rows = [(a, iso(w), self.counts[(w, a)]) for w, a in changed]
        passed = self.newest - MOBILE_WATERMARK
        self.counts = {k: n for k, n in self.counts.items() if k[0] + MOBILE_WINDOW > passed}
        return ([rows] if rows else []), op.StatefulBatchLogic.RETAIN

    def snapshot(self) -> None:
        return None


def flow(bootstrap: str, topic: str, dsn: str) -> Dataflow:
    from bytewax.connectors.kafka import KafkaSource

    df = Dataflow("mobile-kafka")
    source = KafkaSource([bootstrap], [topic], tail=True, add_config={"group.id": "bytewax"})
    records = op.input("actions", df, source)
    actions = op.filter_map("valid", records, lambda m: mobile_action(m.value or b""))
    counts = op.stateful_batch(
        "counts", op.key_on("one", actions, lambda _: "all"), lambda _: MobileCounts()
    )
    op.output("rows", op.map("value", counts, lambda kv: kv[1]), PgSink(dsn, MOBILE_UPSERT))
    return df


def main(events: str, out: str) -> None:
    mark("started")
    topic = kafka_topic(events)
    if topic is None:
        raise SystemExit(f"bytewax_mobile reads a kafka://HOST:PORT/TOPIC, got {events!r}")
    mark("reading")
    run_main(flow(*topic, out))


if __name__ == "__main__":
    positional, _, _ = arguments(sys.argv[1:])
    main(*positional[:2])
