"""How query statuses are shown: `slipstream status` (a table, or JSON) and its reasons."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from rich.table import Table

from slipstream.monitor.console import render, table
from slipstream.monitor.events import format_ts
from slipstream.monitor.state import operator_label
from slipstream.monitor.status import Health, QueryStatus, human_duration


def to_json(statuses: Sequence[QueryStatus], now: datetime) -> str:
    """The ``--json`` form: ``{"generated": ts, "queries": [status, ...]}``."""
    payload = {"generated": format_ts(now), "queries": [s.to_dict() for s in statuses]}
    return json.dumps(payload, indent=2)


_HEALTH_LABEL: dict[Health, str] = {
    "starting": "starting",
    "pending": "no verdict yet",
    "healthy": "healthy",
    "falling_behind": "FALLING BEHIND",
    "stalled": "STALLED",
    "failed": "FAILED",
    "stopped": "stopped",
}


STATUS_COLUMNS = (
    "PIPELINE",
    "QUERY",
    "HEALTH",
    "BATCH",
    "LAST BATCH",
    "IN ROWS/S",
    "PROCESSED ROWS/S",
    "WRITTEN ROWS/S",
    "WM LAG",
    "STATE ROWS",
    "ROWS",
    "QUARANTINED",
    "LATE",
)


def status_table(statuses: Sequence[QueryStatus], now: datetime) -> Table:
    """One row per query (rich); numbers align right."""
    rows = []
    for s in statuses:
        ago = "-" if s.last_batch_at is None else human_duration(now - s.last_batch_at) + " ago"
        rows.append(
            (
                s.pipeline,
                s.query,
                _HEALTH_LABEL[s.health],
                "-" if s.last_batch_id is None else str(s.last_batch_id),
                ago,
                _rate(s.input_rps),
                _rate(s.processed_rps),
                _rate(s.written_rps),
                "-" if s.watermark_lag is None else human_duration(s.watermark_lag),
                "-" if s.state_rows is None else f"{s.state_rows:,}",
                f"{s.total_input_rows:,}",
                f"{s.total_quarantined:,}",
                f"{s.total_dropped_by_watermark:,}",
            )
        )
    return table(STATUS_COLUMNS, rows, numeric=(3, 5, 6, 7, 8, 9, 10, 11, 12))


def format_status_table(statuses: Sequence[QueryStatus], now: datetime) -> str:
    """The table as plain text, then one reason line per query."""
    if not statuses:
        return "no pipelines have an event log yet"
    reasons = [f"{s.pipeline}/{s.query}: {s.reason}" for s in statuses]
    state = [line for s in statuses if (line := state_line(s))]
    lag = [
        f"{s.pipeline}/{s.query} kafka lag: {s.kafka_lag:,} records behind latest"
        for s in statuses
        if s.kafka_lag is not None
    ]
    return "\n".join([render(status_table(statuses, now)), "", *reasons, *state, *lag])


def _rows(rows: int | None) -> str:
    return "rows not counted" if rows is None else f"{rows:,} rows"


def state_line(status: QueryStatus) -> str | None:
    """`mobile/counts state: 0:stateStoreSave 2 rows, 8.3 KiB in memory` (None: stateless)."""
    if not status.state_operators:
        return None
    parts = [
        f"{operator_label(op)} {_rows(op.rows)}, {human_bytes(op.memory_bytes or 0)} in memory"
        for op in status.state_operators
    ]
    return f"{status.pipeline}/{status.query} state: " + "; ".join(parts)


def human_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.0f} {unit}" if unit == "B" else f"{value:,.1f} {unit}"
        value /= 1024
    return f"{count} B"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"
