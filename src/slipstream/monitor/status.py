"""Status verdicts from the event log: is each query running, keeping up, stalled or failed?

``StatusTracker`` consumes events one at a time and keeps bounded state per query, so a
dashboard can follow a live log; ``query_status(events, now)`` is the one-shot form used by
``slipstream status``. Both take ``now`` and a pid check as arguments, so verdicts are
reproducible from a recorded log.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from statistics import fmean
from typing import Any

from slipstream.errors import out_of_memory
from slipstream.monitor.eventlog import event_log_path, pipelines_in, read_events
from slipstream.monitor.events import (
    Event,
    QueryIdle,
    QueryProgress,
    QueryStarted,
    QueryTerminated,
    RunStarted,
    RunStopped,
    format_ts,
)
from slipstream.monitor.health import (
    FallingBehindRule,
    ProgressPoint,
    data_clock,
    human_duration,
    mean,
    per_second,
    pid_alive,
    progress_series,
    summarize_error,
)
from slipstream.monitor.kafka_lag import growing_lag, total_lag
from slipstream.monitor.query_status import Health, QueryStatus

PidCheck = Callable[[int], bool]

DEFAULT_STALL_AFTER = timedelta(minutes=2)


@dataclass
class _QueryState:
    pipeline: str
    query: str
    query_id: str = ""
    run_id: str = ""
    pid: int | None = None
    started_at: datetime | None = None
    awaiting_since: datetime | None = None  # a run listed the query; Spark has not started it
    last_event_at: datetime | None = None
    terminated: QueryTerminated | None = None
    idle_since: datetime | None = None
    last: QueryProgress | None = None
    watermark: datetime | None = None
    newest_event: datetime | None = None  # the newest event time read, by a batch at:
    newest_read_at: datetime | None = None
    recent: deque[QueryProgress] = field(default_factory=deque)
    total_batches: int = 0
    total_input_rows: int = 0
    total_quarantined: int = 0
    total_dropped: int = 0
    violations: dict[str, int] = field(default_factory=dict)


class StatusTracker:
    """Feed events in log order; ask for verdicts at any time.

    Memory is bounded: per query only the last ``history`` progress events are kept (for the
    charts and the recent averages) plus running totals.
    """

    def __init__(
        self,
        stall_after: timedelta = DEFAULT_STALL_AFTER,
        rule: FallingBehindRule | None = None,
        history: int = 120,
        pid_check: PidCheck = pid_alive,
    ) -> None:
        if stall_after <= timedelta(0):
            raise ValueError(f"stall_after must be positive; got stall_after={stall_after}")
        self.stall_after = stall_after
        self.rule = rule or FallingBehindRule()
        if history < self.rule.window:
            raise ValueError(
                f"history must hold at least the rule's window; got history={history}, "
                f"window={self.rule.window}"
            )
        self.history = history
        self.pid_check = pid_check
        self._queries: dict[tuple[str, str], _QueryState] = {}
        self._runs: dict[str, RunStarted | RunStopped] = {}

    def feed(self, events: Iterable[Event]) -> None:
        for event in events:
            self.add(event)

    def add(self, event: Event) -> None:
        if isinstance(event, RunStarted | RunStopped):
            self._runs[event.pipeline] = event
            if isinstance(event, RunStarted):
                self._run_started(event)
            return
        state = self._state(event.pipeline, event.query)
        state.query_id, state.run_id = event.query_id, event.run_id or state.run_id
        state.pid = event.pid if event.pid is not None else state.pid
        state.last_event_at = event.ts
        if isinstance(event, QueryStarted):
            state.started_at = event.ts
            state.awaiting_since = None
            state.terminated = None
            state.idle_since = None
        elif isinstance(event, QueryIdle):
            state.idle_since = state.idle_since or event.ts
        elif isinstance(event, QueryTerminated):
            state.terminated = event
        elif isinstance(event, QueryProgress):
            self._add_progress(state, event)

    def _state(self, pipeline: str, query: str) -> _QueryState:
        state = self._queries.get((pipeline, query))
        if state is None:
            state = _QueryState(pipeline, query, recent=deque(maxlen=self.history))
            self._queries[(pipeline, query)] = state
        return state

    def _run_started(self, run: RunStarted) -> None:
        """Each query the run names is starting from now on, until Spark reports it started
        (a previous run's end no longer describes it)."""
        for name in run.queries:
            state = self._state(run.pipeline, name)
            state.awaiting_since = run.ts
            state.terminated = None
            state.idle_since = None
            state.pid = run.pid if run.pid is not None else state.pid

    @staticmethod
    def _add_progress(state: _QueryState, event: QueryProgress) -> None:
        if state.started_at is None:  # log rotated past the started event
            state.started_at = event.ts
        state.recent.append(event)
        if event.input_rows > 0:
            state.idle_since = None
        if not event.executed:  # an idle report (see QueryProgress.executed): no batch ran
            return
        state.last = event
        state.watermark = event.watermark or state.watermark
        newest = event.newest_event
        if newest is not None and (state.newest_event is None or newest >= state.newest_event):
            state.newest_event, state.newest_read_at = newest, event.ts
        state.total_batches += 1
        state.total_input_rows += event.input_rows
        state.total_quarantined += event.quarantined
        state.total_dropped += event.dropped_by_watermark
        for rule, count in event.expectation_violations.items():
            state.violations[rule] = state.violations.get(rule, 0) + count

    def runs(self) -> list[dict[str, Any]]:
        """The latest run record of each pipeline: ``{"pipeline", "running", "since",
        "queries"}``; a started run whose process is gone is not running."""
        return [
            {
                "pipeline": pipeline,
                "running": isinstance(run, RunStarted)
                and (run.pid is None or self.pid_check(run.pid)),
                "since": format_ts(run.ts),
                "queries": list(run.queries),
            }
            for pipeline, run in sorted(self._runs.items())
        ]

    def keys(self) -> list[tuple[str, str]]:
        return sorted(self._queries)

    def statuses(self, now: datetime) -> list[QueryStatus]:
        return [self._status(self._queries[key], now) for key in self.keys()]

    def series(self, pipeline: str, query: str, points: int | None = None) -> list[ProgressPoint]:
        state = self._queries.get((pipeline, query))
        if state is None:
            return []
        series = progress_series(state.recent)
        return series[-points:] if points else series

    # ----------------------------------------------------------------- verdicts

    def _status(self, st: _QueryState, now: datetime) -> QueryStatus:
        health, reason, running = self._verdict(st, now)
        recent = list(st.recent)[-self.rule.window :]
        last = st.last
        term = st.terminated
        return QueryStatus(
            pipeline=st.pipeline,
            query=st.query,
            query_id=st.query_id,
            run_id=st.run_id,
            pid=st.pid,
            running=running,
            health=health,
            reason=reason,
            started_at=st.started_at,
            last_event_at=st.last_event_at,
            last_batch_id=last.batch_id if last else None,
            last_batch_at=last.ts if last else None,
            input_rps=mean(p.input_rps for p in recent),
            processed_rps=mean(p.processed_rps for p in recent),
            written_rps=mean(
                per_second(p.written_rows, p.batch_duration_ms) for p in recent if p.executed
            ),
            batch_duration_ms=last.batch_duration_ms if last else None,
            watermark=st.watermark,
            # against the data's clock, so a replay of old data lags by what it has yet to
            # close, not by its age; a stopped query is behind nothing: any gap would only say
            # how old the run or its data is
            watermark_lag=(
                None
                if st.watermark is None or not running
                else data_clock(st.newest_event, st.newest_read_at, now) - st.watermark
            ),
            state_rows=last.state_rows if last else 0,
            state_memory_bytes=last.state_memory_bytes if last else 0,
            total_batches=st.total_batches,
            total_input_rows=st.total_input_rows,
            total_quarantined=st.total_quarantined,
            total_dropped_by_watermark=st.total_dropped,
            expectation_violations=dict(st.violations),
            error=term.exception if term else None,
            error_class=term.error_class if term else None,
            state_operators=tuple(last.state_operators) if last else (),
            kafka_lag=total_lag(dict(last.progress)) if last else None,
        )

    def _verdict(self, st: _QueryState, now: datetime) -> tuple[Health, str, bool]:
        term = st.terminated
        if term is not None:
            if term.exception is not None:
                oom = out_of_memory(term.exception)
                if oom is not None:
                    what = oom.message.split(": ", 1)[1]
                    return "failed", f"failed: out of memory at {format_ts(term.ts)}: {what}", False
                cause = summarize_error(term.exception)
                if term.error_class and term.error_class not in cause:
                    cause = f"{term.error_class}: {cause}"
                return "failed", f"failed at {format_ts(term.ts)}: {cause}", False
            return "stopped", f"stopped cleanly at {format_ts(term.ts)}", False

        run = self._runs.get(st.pipeline)
        since = st.awaiting_since or st.started_at
        if isinstance(run, RunStopped) and since is not None and run.ts >= since:
            why = f" ({run.reason})" if run.reason else ""
            return "stopped", f"run stopped at {format_ts(run.ts)}{why}", False
        if st.pid is not None and not self.pid_check(st.pid):
            return (
                "failed",
                f"process {st.pid} is gone without a terminated event (killed or crashed)",
                False,
            )

        if st.awaiting_since is not None:
            return (
                "starting",
                f"starting: the run started {human_duration(now - st.awaiting_since)} ago; "
                "Spark has not started this query yet",
                True,
            )
        quiet_since = st.last_event_at or st.started_at or now
        quiet = now - quiet_since
        if quiet > self.stall_after:
            last = st.last
            where = (
                f"; last batch {last.batch_id} at {format_ts(last.ts)}"
                if last is not None
                else "; no batch completed yet"
            )
            limit = human_duration(self.stall_after)
            return (
                "stalled",
                f"no progress for {human_duration(quiet)} (limit {limit}){where}",
                True,
            )

        behind = self._falling_behind(st) or growing_lag(
            [total_lag(dict(p.progress)) for p in st.recent if p.executed]
        )
        if behind is not None:
            return "falling_behind", behind, True
        if st.idle_since is not None:
            return "healthy", f"idle: no new data since {format_ts(st.idle_since)}", True
        last = st.last
        if last is None or st.started_at is None or last.ts < st.started_at:
            running_for = human_duration(now - (st.started_at or now))
            batch = 0 if last is None or last.batch_id is None else last.batch_id + 1
            return "starting", f"starting: batch {batch} running for {running_for}", True
        busy = self._busy_batches(st)
        judged = sum(1 for p, _ in busy if p.input_rps is not None)
        if judged < self.rule.min_slow:
            took = human_duration(timedelta(milliseconds=last.batch_duration_ms or 0))
            return (
                "pending",
                f"not enough batches to judge yet: {judged} of {self.rule.min_slow} batches "
                f"with a known arrival rate (last: batch {last.batch_id}, "
                f"{last.input_rows:,} rows in {took})",
                True,
            )
        recent = list(st.recent)[-self.rule.window :]
        in_rps = mean(p.input_rps for p in recent)
        out_rps = mean(p.processed_rps for p in recent)
        if in_rps is None or out_rps is None:
            return "pending", "not enough batches to judge yet: no arrival rate known", True
        known = [b for _, b in busy if b is not None]
        if known and not any(known):
            last = busy[-1][0]  # the last batch that read rows
            took = human_duration(timedelta(milliseconds=last.batch_duration_ms or 0))
            return (
                "healthy",
                f"keeping up: waits for data between batches (last: {last.input_rows:,} rows "
                f"in {took})",
                True,
            )
        return (
            "healthy",
            f"keeping up: {out_rps:,.0f} rows/s processed vs {in_rps:,.0f} rows/s arriving",
            True,
        )

    def _busy_batches(self, st: _QueryState) -> list[tuple[QueryProgress, bool | None]]:
        """The last ``window`` batches that ran and read rows, each with whether it started
        back to back with the batch before it (None: unknown)."""
        ran = [p for p in st.recent if p.executed]
        pairs = [
            (p, self._back_to_back(prev, p)) for prev, p in zip([None, *ran], ran, strict=False)
        ]
        return [(p, busy) for p, busy in pairs if p.input_rows > 0][-self.rule.window :]

    def _back_to_back(self, prev: QueryProgress | None, batch: QueryProgress) -> bool | None:
        if prev is None or prev.batch_timestamp is None or batch.batch_timestamp is None:
            return None
        if prev.input_rows == 0:  # a batch run to move the watermark: no input was waiting
            return False
        duration = timedelta(milliseconds=prev.batch_duration_ms or 0)
        gap = batch.batch_timestamp - (prev.batch_timestamp + duration)
        return gap <= max(self.rule.max_gap, duration / 10)

    def _falling_behind(self, st: _QueryState) -> str | None:
        rule = self.rule
        ratios = [
            p.processed_rps / p.input_rps
            for p, busy in self._busy_batches(st)
            if busy is not False and p.input_rps and p.processed_rps is not None  # unknown: rates
        ]
        slow = sum(1 for r in ratios if r < 1.0)
        if len(ratios) < rule.min_slow or slow < rule.min_slow:
            return None
        average = fmean(ratios)
        if average >= rule.max_ratio:
            return None
        return (
            f"processing {average:.0%} of the arrival rate: {slow} of the last {len(ratios)} "
            "batches were slower than their input"
        )


# --------------------------------------------------------------------------- one-shot API


def query_status(
    events: Iterable[Event],
    now: datetime,
    stall_after: timedelta = DEFAULT_STALL_AFTER,
    pid_check: PidCheck = pid_alive,
    rule: FallingBehindRule | None = None,
) -> list[QueryStatus]:
    """Verdicts per (pipeline, query) after reading ``events`` in order."""
    tracker = StatusTracker(stall_after=stall_after, rule=rule, pid_check=pid_check)
    tracker.feed(events)
    return tracker.statuses(now)


def load_status(
    state_dir: Path | str,
    now: datetime,
    stall_after: timedelta = DEFAULT_STALL_AFTER,
    pid_check: PidCheck = pid_alive,
) -> list[QueryStatus]:
    """Verdicts for every pipeline that has an event log under ``state_dir``."""
    statuses: list[QueryStatus] = []
    for pipeline in pipelines_in(state_dir):
        events = read_events(event_log_path(state_dir, pipeline))
        statuses.extend(query_status(events, now, stall_after=stall_after, pid_check=pid_check))
    return statuses
