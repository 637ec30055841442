"""Typed events of the slipstream event log.

The event log is one JSON object per line (see ``eventlog.py``). The listener writes the
records; everything else (status, metrics, dashboard) reads them through ``parse_event``,
which turns a record into one of the frozen dataclasses below. Spark's own progress JSON is
kept as it came (``QueryProgress.progress``) and read through typed accessors that tolerate
missing keys and non-finite rates, because Spark omits or nulls fields depending on the
query shape (no watermark, no state, first batch).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Literal

from slipstream.errors import SlipstreamError
from slipstream.monitor.state import OperatorState, live_operators
from slipstream.monitor.timestamps import EPOCH, format_ts, parse_ts

EventKind = Literal["run_started", "run_stopped", "started", "progress", "idle", "terminated"]

QUALITY_METRIC = "quality"  # observe(): input and quarantined rows (quality.INPUT per input)
EXPECTATIONS_METRIC = "expectations"  # observe(): violations per expectation rule


class EventFormatError(SlipstreamError, ValueError):
    """A record that is not a slipstream event; ``code`` is stable, the message is for people."""


def _finite(value: Any) -> float | None:
    """A finite float, or None for missing, null, NaN, infinities and non-numbers."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def _int(value: Any, default: int = 0) -> int:
    number = _finite(value)
    return default if number is None else int(number)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _operators(progress: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    ops = progress.get("stateOperators")
    return [op for op in ops if isinstance(op, Mapping)] if isinstance(ops, list) else []


def batch_executed(progress: Mapping[str, Any]) -> bool:
    """See ``QueryProgress.executed``: false only for Spark's idle progress reports (no rows,
    and phases without ``addBatch``/``walCommit``)."""
    phases = _mapping(progress.get("durationMs"))
    if not phases or "addBatch" in phases or "walCommit" in phases:
        return True
    return (_finite(progress.get("numInputRows")) or 0) > 0


# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class _RunEvent:
    kind: ClassVar[EventKind]
    ts: datetime
    pipeline: str
    pid: int | None = None
    queries: tuple[str, ...] = ()
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "event": self.kind,
            "ts": format_ts(self.ts),
            "pipeline": self.pipeline,
            "pid": self.pid,
            "queries": list(self.queries),
            "reason": self.reason,
        }


@dataclass(frozen=True)
class RunStarted(_RunEvent):
    """A ``slipstream run`` process started its queries."""

    kind: ClassVar[EventKind] = "run_started"


@dataclass(frozen=True)
class RunStopped(_RunEvent):
    """A ``slipstream run`` process stopped (cleanly, or after a query failed)."""

    kind: ClassVar[EventKind] = "run_stopped"


@dataclass(frozen=True)
class _QueryEvent:
    ts: datetime
    pipeline: str
    query: str
    query_id: str
    run_id: str
    pid: int | None

    def _envelope(self, kind: EventKind) -> dict[str, Any]:
        return {
            "event": kind,
            "ts": format_ts(self.ts),
            "pipeline": self.pipeline,
            "query": self.query,
            "query_id": self.query_id,
            "run_id": self.run_id,
            "pid": self.pid,
        }


@dataclass(frozen=True)
class QueryStarted(_QueryEvent):
    kind: ClassVar[EventKind] = "started"

    def to_dict(self) -> dict[str, Any]:
        return self._envelope(self.kind)


@dataclass(frozen=True)
class QueryIdle(_QueryEvent):
    """No new data arrived for ``spark.sql.streaming.noDataProgressEventInterval``."""

    kind: ClassVar[EventKind] = "idle"

    def to_dict(self) -> dict[str, Any]:
        return self._envelope(self.kind)


@dataclass(frozen=True)
class QueryTerminated(_QueryEvent):
    kind: ClassVar[EventKind] = "terminated"
    exception: str | None = None
    error_class: str | None = None

    @property
    def failed(self) -> bool:
        return self.exception is not None

    def to_dict(self) -> dict[str, Any]:
        record = self._envelope(self.kind)
        record["exception"] = self.exception
        record["error_class"] = self.error_class
        return record


@dataclass(frozen=True)
class QueryProgress(_QueryEvent):
    """One completed micro-batch; ``progress`` is Spark's StreamingQueryProgress JSON as a dict."""

    kind: ClassVar[EventKind] = "progress"
    progress: Mapping[str, Any] = field(default_factory=dict, hash=False)
    written_rows: int | None = None  # the rows the output's sink wrote, by its own count
    state_rows_counted: bool = True  # False: the state stores did not count (a finite run)

    def to_dict(self) -> dict[str, Any]:
        record = {**self._envelope(self.kind), "progress": dict(self.progress)}
        if self.written_rows is not None:
            record["written_rows"] = self.written_rows
        if not self.state_rows_counted:
            record["state_rows_counted"] = False
        return record

    @property
    def batch_id(self) -> int | None:
        number = _finite(self.progress.get("batchId"))
        return None if number is None else int(number)

    @property
    def executed(self) -> bool:
        """Whether a micro-batch ran. While a query waits for data Spark also reports progress
        (every ``noDataProgressEventInterval``) that carries the *next* batch id, zero rows and
        only the ``latestOffset`` and ``triggerExecution`` phases; no batch ran. A record with
        rows, or without phases, counts as executed (hand-made ones often give only
        ``triggerExecution``)."""
        return batch_executed(self.progress)

    @property
    def batch_timestamp(self) -> datetime | None:
        """When Spark triggered the batch (``timestamp`` in the progress)."""
        return parse_ts(self.progress.get("timestamp"))

    @property
    def input_rows(self) -> int:
        rows = _finite(self.progress.get("numInputRows"))
        if rows is not None:
            return int(rows)
        sources = self.progress.get("sources")
        if isinstance(sources, list):
            return sum(_int(_mapping(s).get("numInputRows")) for s in sources)
        return 0

    @property
    def input_rps(self) -> float | None:
        """Rows per second arriving; None when Spark could not compute it (NaN, first batch).

        Spark measures arrival over the time since the previous trigger; the first batch after
        a start has none and reports 0.0 however many rows it read. Rows read at 0 rows/s is
        no rate: None, so no average or verdict counts it as "nothing arriving"."""
        rate = _finite(self.progress.get("inputRowsPerSecond"))
        return None if rate == 0 and self.input_rows > 0 else rate

    @property
    def processed_rps(self) -> float | None:
        return _finite(self.progress.get("processedRowsPerSecond"))

    @property
    def duration_ms(self) -> dict[str, int]:
        """Spark's ``durationMs`` phases (triggerExecution, addBatch, ...), in milliseconds."""
        phases = _mapping(self.progress.get("durationMs"))
        return {str(k): int(v) for k, v in phases.items() if _finite(v) is not None}

    @property
    def batch_duration_ms(self) -> int | None:
        """Wall time of the batch: ``batchDuration``, else ``durationMs.triggerExecution``."""
        value = _finite(self.progress.get("batchDuration"))
        if value is None:
            value = _finite(self.duration_ms.get("triggerExecution"))
        return None if value is None else int(value)

    @property
    def watermark(self) -> datetime | None:
        """The event-time watermark used by this batch; None if the query has none yet.

        Spark reports ``1970-01-01T00:00:00.000Z`` until the first watermark is set; that is
        treated as "no watermark".
        """
        mark = parse_ts(_mapping(self.progress.get("eventTime")).get("watermark"))
        return None if mark is None or mark == EPOCH else mark

    @property
    def newest_event(self) -> datetime | None:
        """The newest event time the batch read (``eventTime.max``); None without rows."""
        return parse_ts(_mapping(self.progress.get("eventTime")).get("max"))

    @property
    def state_rows(self) -> int | None:
        """The rows all stateful operators hold; None where the stores did not count them."""
        if not self.state_rows_counted:
            return None
        return sum(_int(op.get("numRowsTotal")) for op in _operators(self.progress))

    @property
    def state_operators(self) -> list[OperatorState]:
        """Each stateful operator: rows held and memory used (``slipstream state``'s type)."""
        return live_operators(self.progress, self.state_rows_counted)

    @property
    def state_memory_bytes(self) -> int:
        return sum(_int(op.get("memoryUsedBytes")) for op in _operators(self.progress))

    @property
    def dropped_by_watermark(self) -> int:
        """Late rows dropped in this batch, summed over all stateful operators."""
        return sum(_int(op.get("numRowsDroppedByWatermark")) for op in _operators(self.progress))

    def observed(self, name: str) -> dict[str, float]:
        """The finite numeric fields of ``observe(name)`` and its per-input ``name.INPUT``."""
        return observed_sums(self.progress.get("observedMetrics"), name)

    @property
    def quarantined(self) -> int:
        return int(self.observed(QUALITY_METRIC).get("quarantined", 0))

    @property
    def expectation_violations(self) -> dict[str, int]:
        return {rule: int(n) for rule, n in self.observed(EXPECTATIONS_METRIC).items()}


def observed_sums(observed: Any, name: str) -> dict[str, float]:
    """Field by field, the sum of the observed metrics `name` and `name.*` of one progress."""
    out: dict[str, float] = {}
    for metric, fields in _mapping(observed).items():
        if metric != name and not str(metric).startswith(name + "."):
            continue
        for key, value in _mapping(fields).items():
            number = _finite(value)
            if number is not None:
                out[str(key)] = out.get(str(key), 0.0) + number
    return out


Event = RunStarted | RunStopped | QueryStarted | QueryProgress | QueryIdle | QueryTerminated


# --------------------------------------------------------------------------- parsing


def _require_ts(record: Mapping[str, Any]) -> datetime:
    if "ts" not in record:
        raise EventFormatError("EVENT_MISSING_FIELD", "event record has no 'ts'")
    ts = parse_ts(record["ts"])
    if ts is None:
        raise EventFormatError(
            "EVENT_BAD_TIMESTAMP",
            f"'ts' must be ISO-8601 like 2024-05-01T12:00:00Z; got {record['ts']!r}",
        )
    return ts


def _pid(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_event(record: Mapping[str, Any]) -> Event:
    """Turn one event-log record into a typed event.

    Raises ``EventFormatError`` (codes ``EVENT_NOT_AN_OBJECT``, ``EVENT_UNKNOWN_KIND``,
    ``EVENT_MISSING_FIELD``, ``EVENT_BAD_TIMESTAMP``) for records that cannot be events;
    fields inside Spark's progress payload are never required.
    """
    if not isinstance(record, Mapping):
        kind_name = type(record).__name__
        raise EventFormatError("EVENT_NOT_AN_OBJECT", f"expected a JSON object; got {kind_name}")
    kind = record.get("event")
    ts = _require_ts(record)
    pipeline = _text(record.get("pipeline"))
    if pipeline is None:
        raise EventFormatError("EVENT_MISSING_FIELD", f"{kind!r} event has no 'pipeline'")
    pid = _pid(record.get("pid"))

    if kind in ("run_started", "run_stopped"):
        queries = record.get("queries")
        names = tuple(str(q) for q in queries) if isinstance(queries, list) else ()
        cls = RunStarted if kind == "run_started" else RunStopped
        reason = _text(record.get("reason"))
        return cls(ts=ts, pipeline=pipeline, pid=pid, queries=names, reason=reason)

    if kind not in ("started", "progress", "idle", "terminated"):
        raise EventFormatError(
            "EVENT_UNKNOWN_KIND",
            "'event' must be one of run_started, run_stopped, started, progress, idle, "
            f"terminated; got {kind!r}",
        )

    progress = _mapping(record.get("progress")) if kind == "progress" else {}
    query_id = _text(record.get("query_id")) or _text(progress.get("id"))
    if query_id is None:
        raise EventFormatError("EVENT_MISSING_FIELD", f"{kind!r} event has no 'query_id'")
    run_id = _text(record.get("run_id")) or _text(progress.get("runId")) or ""
    query = _text(record.get("query")) or _text(progress.get("name")) or query_id
    common: dict[str, Any] = {
        "ts": ts,
        "pipeline": pipeline,
        "query": query,
        "query_id": query_id,
        "run_id": run_id,
        "pid": pid,
    }
    if kind == "started":
        return QueryStarted(**common)
    if kind == "idle":
        return QueryIdle(**common)
    if kind == "terminated":
        return QueryTerminated(
            **common,
            exception=_text(record.get("exception")),
            error_class=_text(record.get("error_class")),
        )
    written = None if (n := _finite(record.get("written_rows"))) is None else int(n)
    counted = record.get("state_rows_counted") is not False
    return QueryProgress(
        **common, progress=dict(progress), written_rows=written, state_rows_counted=counted
    )
