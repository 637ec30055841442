"""mobile on Pathway, from Kafka into PostgreSQL: python pathway_mobile.py
kafka://HOST:PORT/TOPIC postgresql [--commit-ms=20] (libpq's variables, or a postgresql:// URL).

- `pw.io.kafka.read` (format json, schema id/action/ts as strings, from the earliest offset):
  a record that is not JSON or lacks a field is dropped by the reader; `autocommit_duration_ms`
  = `--commit-ms` (default 20, slipstream's real-time flush interval; Pathway's default, 1500,
  would hold each record up to 1.5 s before the engine sees it);
- `ts` parsed by one Python UDF (peer_common.mobile_action's rules: ISO-8601, no zone = UTC);
- `windowby(ts, tumbling(10 min, origin=epoch), instance=action)` with
  `common_behavior(cutoff=10 min)` (the watermark's role), count per window, incremental: each
  commit updates the counts it touched;
- Pathway's own sink, `pw.io.postgres.write(output_table_type="snapshot")` into
  `mobile_action_counts`: the current count per (window, action), each commit applied
  atomically."""

from __future__ import annotations

import json
import sys
from datetime import datetime

import pathway as pw
import peer_common as common


class Action(pw.Schema):
    id: str
    action: str
    ts: str


def valid_ts(action: str, ts: str) -> datetime | None:
    """`ts` of a valid action; the reader has already dropped a record whose `id` is no string
    (a schema column named `id` is not the table's `.id`, Pathway's row pointer)."""
    parsed = common.mobile_action(json.dumps({"id": "", "action": action, "ts": ts}))
    return parsed[1] if parsed else None


def build(events: str, out: str, commit_ms: int) -> None:
    topic = common.kafka_topic(events)
    if topic is None:
        raise SystemExit(f"pathway_mobile reads a kafka://HOST:PORT/TOPIC, got {events!r}")
    settings = {
        "bootstrap.servers": topic[0],
        "group.id": "pathway",
        "auto.offset.reset": "earliest",
        "session.timeout.ms": "6000",
    }
    raw = pw.io.kafka.read(
        settings, topic[1], schema=Action, format="json", autocommit_duration_ms=commit_ms
    )
    checked = raw.select(
        pw.this.action,
        ts=pw.apply_with_type(valid_ts, pw.DateTimeUtc | None, raw.action, raw.ts),
    )
    valid = checked.filter(pw.this.ts.is_not_none()).select(
        pw.this.action, ts=pw.unwrap(pw.this.ts)
    )
    counts = valid.windowby(
        pw.this.ts,
        window=pw.temporal.tumbling(duration=common.MOBILE_WINDOW, origin=common.EPOCH),
        instance=pw.this.action,
        behavior=pw.temporal.common_behavior(cutoff=common.MOBILE_WATERMARK),
    ).reduce(
        window_start=pw.this._pw_window_start.dt.strftime("%Y-%m-%dT%H:%M:%SZ"),
        action=pw.this._pw_instance,
        count=pw.reducers.count(),
    )
    pw.io.postgres.write(
        counts,
        common.pg_settings(out),
        common.MOBILE_TABLE,
        output_table_type="snapshot",
        primary_key=[counts.window_start, counts.action],
    )


def main(events: str, out: str, commit_ms: int = 20) -> None:
    common.mark("started")
    build(events, out, commit_ms)
    common.mark("reading")
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)


if __name__ == "__main__":
    positional, _, options = common.arguments(sys.argv[1:])
    main(*positional[:2], commit_ms=int(options.get("commit-ms", "20")))
