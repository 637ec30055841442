"""One query's status as `slipstream status`, the dashboard and the metrics show it, and the
health words it can carry.

``starting`` and ``pending`` are not verdicts: a query is starting until its first batch of this
run completes (Spark starting, the query not started yet, or batch 0 running), and pending while
it has too few batches with a known arrival rate to say whether it keeps up."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from slipstream.monitor.events import format_ts
from slipstream.monitor.state import OperatorState

Health = Literal["starting", "pending", "healthy", "falling_behind", "stalled", "failed", "stopped"]


@dataclass(frozen=True)
class QueryStatus:
    pipeline: str
    query: str
    query_id: str
    run_id: str
    pid: int | None
    running: bool
    health: Health
    reason: str
    started_at: datetime | None
    last_event_at: datetime | None
    last_batch_id: int | None
    last_batch_at: datetime | None
    input_rps: float | None  # average over the recent batches
    processed_rps: float | None
    batch_duration_ms: int | None  # of the last batch
    watermark: datetime | None
    watermark_lag: timedelta | None  # data clock - watermark (health.data_clock); None: stopped
    state_rows: int | None  # None: not counted (a finite run)
    state_memory_bytes: int
    total_batches: int
    total_input_rows: int
    total_quarantined: int
    total_dropped_by_watermark: int
    expectation_violations: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    error_class: str | None = None
    state_operators: tuple[OperatorState, ...] = ()  # of the last batch, in plan order
    written_rps: float | None = None  # rows the sink wrote per second of batch, by its count
    kafka_lag: int | None = None  # records behind latest after the last batch; None: no Kafka

    def to_dict(self) -> dict[str, Any]:
        def ts(value: datetime | None) -> str | None:
            return None if value is None else format_ts(value)

        return {
            "pipeline": self.pipeline,
            "query": self.query,
            "query_id": self.query_id,
            "run_id": self.run_id,
            "pid": self.pid,
            "running": self.running,
            "health": self.health,
            "reason": self.reason,
            "started_at": ts(self.started_at),
            "last_event_at": ts(self.last_event_at),
            "last_batch_id": self.last_batch_id,
            "last_batch_at": ts(self.last_batch_at),
            "input_rows_per_second": self.input_rps,
            "processed_rows_per_second": self.processed_rps,
            "written_rows_per_second": self.written_rps,
            "batch_duration_ms": self.batch_duration_ms,
            "watermark": ts(self.watermark),
            "watermark_lag_seconds": (
                None if self.watermark_lag is None else self.watermark_lag.total_seconds()
            ),
            "state_rows": self.state_rows,
            "state_memory_bytes": self.state_memory_bytes,
            "total_batches": self.total_batches,
            "total_input_rows": self.total_input_rows,
            "total_quarantined": self.total_quarantined,
            "total_dropped_by_watermark": self.total_dropped_by_watermark,
            "expectation_violations": dict(self.expectation_violations),
            "error": self.error,
            "error_class": self.error_class,
            "state_operators": [op.live_dict() for op in self.state_operators],
            "kafka_lag_records": self.kafka_lag,
        }
