"""User activity (seed 000's user-status example): each user's status kept in per-user state with
a timeout, alerts from the same actions, and sessions.

Input `actions`: JSON lines {"user_id", "action", "ts"}, action one of open, click, scroll,
purchase, crash, close (`slipstream generate activity` writes them; any other action goes to the
quarantine). Every output reads the same valid actions:

    actions.withWatermark(ts, W)                              W = --watermark (10m)
           .dropDuplicatesWithinWatermark(user_id, action, ts)    an action re-sent counts once

user_status    groupBy(user_id).transformWithState(StatusProcessor): one row per user, upserted
               (update mode) each batch the user acts: status (active after open, click, scroll
               or purchase; closed after close; crashed after crash, all by the newest `ts`),
               last_action, last_seen, actions. A timer at last_seen + --inactive-after
               (--timeout event: fires when the watermark reaches it) or at the batch's clock
               + --inactive-after (--timeout processing) writes the row `inactive` and removes
               the user's state; a later action starts over.
user_alerts    groupBy(user_id).transformWithState(AlertProcessor), append: zero or more alerts
               per user per batch (seed 000's flatMapGroupsWithState case): `crash` for each
               crash, `burst` once for a minute of `ts` in which the user acts more than
               --burst times. The per-minute counts are state, dropped by a timer when the
               watermark passes the minute.
user_sessions  groupBy(session_window(ts, --session-gap), user_id).count(), append: a session
               ends when the user is quiet for longer than the gap (an action exactly one gap
               after the previous still joins it: Spark merges session windows that touch),
               written once the watermark passes its end (last action + gap).

State API: the row-based `transformWithState` by default; `--state-api pandas` runs the same
logic on `transformWithStateInPandas` (docs/benchmarks.md measures both on 100,000 users).
The processors are plain classes, tested without Spark by `slipstream.testing.ProcessorClock`
(TwsTester)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import TimestampType

from slipstream.api.frames import not_null, spark_interval, watermarked
from slipstream.api.pipeline import (
    Expectation,
    Output,
    Params,
    Pipeline,
    choice_param,
    count_param,
    duration_param,
    event_stream,
)
from slipstream.api.schema import parse_ddl

ACTIONS = ("open", "click", "scroll", "purchase", "crash", "close")
SCHEMA = parse_ddl("user_id STRING, action STRING, ts TIMESTAMP")
STATUS_SCHEMA = parse_ddl(
    "user_id STRING, status STRING, last_action STRING, last_seen TIMESTAMP, actions BIGINT"
)
ALERT_SCHEMA = parse_ddl("user_id STRING, alert STRING, alert_time TIMESTAMP, detail STRING")
# per user: the newest action, its time, the count, and the timer that is set (ms)
_STATE = parse_ddl("last_action STRING, last_seen_ms BIGINT, actions BIGINT, timer_ms BIGINT")
_MINUTE_KEY = parse_ddl("minute_ms BIGINT")
_MINUTE_COUNT = parse_ddl("count BIGINT")
_MINUTE = 60_000
_TS = TimestampType()


def status_of(action: str) -> str:
    return {"close": "closed", "crash": "crashed"}.get(action, "active")


def to_ms(ts: datetime) -> int:
    """A Row's timestamp -> epoch ms (the way Spark turned it into that datetime, undone)."""
    return int(_TS.toInternal(ts)) // 1000


def from_ms(ms: int) -> datetime:
    return _TS.fromInternal(ms * 1000)


class StatusProcessor(StatefulProcessor):
    """One user's status from their actions; `inactive` and state removed after a quiet spell.

    `timeout` is "event" (timer at last_seen + inactive_after, fired by the watermark) or
    "processing" (timer at the batch's processing time + inactive_after)."""

    def __init__(self, inactive_after_ms: int, timeout: str = "event") -> None:
        self.inactive_after_ms = inactive_after_ms
        self.timeout = timeout

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("status", _STATE)

    def advance(self, key: str, events: list[tuple[int, str]], now_ms: int) -> Row | None:
        """Fold `events` ((ts ms, action), any order) into the user's state; set the timer."""
        if not events:
            return None
        old = self.state.get() if self.state.exists() else None
        action, seen, count, timer = old if old is not None else (None, None, 0, None)
        for ts, act in events:
            if seen is None or ts >= seen:  # the newest action decides (ties: the later row)
                action, seen = act, ts
        assert action is not None and seen is not None
        due = (seen if self.timeout == "event" else now_ms) + self.inactive_after_ms
        if timer != due:
            if timer is not None:
                self.handle.deleteTimer(timer)
            self.handle.registerTimer(due)
        count += len(events)
        self.state.update((action, seen, count, due))
        return Row(
            user_id=key,
            status=status_of(action),
            last_action=action,
            last_seen=from_ms(seen),
            actions=count,
        )

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        events = [(to_ms(r.ts), r.action) for r in rows]
        row = self.advance(key[0], events, timerValues.getCurrentProcessingTimeInMs())
        if row is not None:
            yield row

    def expire(self, key: str) -> Row | None:
        if not self.state.exists():
            return None
        action, seen, count, _ = cast("tuple[Any, ...]", self.state.get())  # it exists()
        self.state.clear()
        return Row(
            user_id=key, status="inactive", last_action=action, last_seen=from_ms(seen),
            actions=count,
        )  # fmt: skip

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        row = self.expire(key[0])
        if row is not None:
            yield row

    def close(self) -> None:
        pass


class PandasStatusProcessor(StatusProcessor):
    """The same status logic on transformWithStateInPandas (frames in, frames out)."""

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: TimerValues) -> Any:
        import pandas as pd

        frame = pd.concat(list(rows), ignore_index=True)
        # naive timestamps in the session time zone (UTC): nanoseconds since the epoch
        stamps = frame["ts"].astype("datetime64[ns]").astype("int64") // 1_000_000
        events = list(zip(stamps.tolist(), frame["action"].tolist(), strict=True))
        row = self.advance(key[0], events, timerValues.getCurrentProcessingTimeInMs())
        if row is not None:
            yield _frame([row])

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Any:
        row = self.expire(key[0])
        if row is not None:
            yield _frame([row])


def _frame(rows: list[Row]) -> Any:
    import pandas as pd

    frame = pd.DataFrame([r.asDict() for r in rows], columns=STATUS_SCHEMA.fieldNames())
    frame["last_seen"] = pd.to_datetime(frame["last_seen"])
    return frame


class AlertProcessor(StatefulProcessor):
    """Alerts per user per batch: one `crash` per crash action; one `burst` per minute of event
    time in which the user acts more than `burst` times (sent when the count passes it)."""

    def __init__(self, burst: int) -> None:
        self.burst = burst

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.minutes = handle.getMapState("minutes", _MINUTE_KEY, _MINUTE_COUNT)

    def handleInputRows(
        self, key: Any, rows: Iterator[Row], timerValues: TimerValues
    ) -> Iterator[Row]:
        user = key[0]
        added: dict[int, int] = {}
        for row in rows:
            ts = to_ms(row.ts)
            if row.action == "crash":
                yield Row(user_id=user, alert="crash", alert_time=row.ts, detail="the app crashed")
            minute = ts - ts % _MINUTE
            added[minute] = added.get(minute, 0) + 1
        for minute, n in added.items():
            seen = self.minutes.getValue((minute,))
            before = 0 if seen is None else seen[0]
            if seen is None:
                self.handle.registerTimer(minute + _MINUTE)  # the minute is over: forget it
            self.minutes.updateValue((minute,), (before + n,))
            if before <= self.burst < before + n:
                yield Row(
                    user_id=user,
                    alert="burst",
                    alert_time=from_ms(minute),
                    detail=f"more than {self.burst} actions in a minute",
                )

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[Row]:
        self.minutes.removeKey((expiredTimerInfo.getExpiryTimeInMs() - _MINUTE,))
        return iter(())

    def close(self) -> None:
        pass


class ActivityPipeline(Pipeline):
    name = "activity"
    description = "user status with an inactivity timeout, crash and burst alerts, sessions"
    inputs = (
        event_stream(
            "actions",
            SCHEMA,
            "ts",
            ("user_id", "action", "ts"),
            help="JSON lines {user_id, action, ts}; action: " + ", ".join(ACTIONS),
        ),
    )
    params = (
        duration_param("watermark", timedelta(minutes=10), "how late an action may arrive"),
        duration_param(
            "inactive_after", timedelta(hours=1), "quiet time after which a user is inactive"
        ),
        choice_param(
            "timeout",
            ("event", "processing"),
            "event: inactivity measured in event time (the watermark); processing: in wall "
            "clock time since the user's last batch",
        ),
        duration_param("session_gap", timedelta(minutes=30), "quiet time that ends a session"),
        count_param("burst", 30, "actions a user may make in a minute before a burst alert"),
        choice_param(
            "state_api",
            ("rows", "pandas"),
            "user_status on transformWithState (rows) or transformWithStateInPandas (pandas)",
            "API",
        ),
    )
    outputs = (
        Output(
            "user_status",
            key=("user_id",),
            modes=("update",),
            help="one row per user: status, last action, last seen, actions",
        ),
        Output(
            "user_alerts",
            key=("user_id", "alert", "alert_time"),
            modes=("append",),
            help="crash and burst alerts, zero or more per user per batch",
        ),
        Output(
            "user_sessions",
            key=("user_id", "session_start"),
            modes=("append",),
            help="sessions split by --session-gap, once final",
        ),
    )
    results_order = ("last_seen DESC", "most recently seen first")

    def expectations(self, input_name: str, params: Params) -> Sequence[Expectation]:
        known = ", ".join(f"'{a}'" for a in ACTIONS)
        return (Expectation("known_action", f"action IN ({known})", "drop", "a known action"),)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        actions = watermarked(
            inputs["actions"], "ts", params.watermark, unique=("user_id", "action", "ts")
        )
        by_user = actions.groupBy("user_id")
        inactive_ms = params.inactive_after // timedelta(milliseconds=1)
        time_mode = "EventTime" if params.timeout == "event" else "ProcessingTime"
        if params.state_api == "pandas":
            status = by_user.transformWithStateInPandas(
                PandasStatusProcessor(inactive_ms, params.timeout), STATUS_SCHEMA, "Update",
                time_mode,
            )  # fmt: skip
        else:
            status = by_user.transformWithState(
                StatusProcessor(inactive_ms, params.timeout), STATUS_SCHEMA, "Update", time_mode
            )
        alerts = by_user.transformWithState(
            AlertProcessor(params.burst), ALERT_SCHEMA, "Append", "EventTime"
        )
        sessions = (
            actions.groupBy(
                F.session_window("ts", spark_interval(params.session_gap)).alias("session"),
                "user_id",
            )
            .count()
            .select(
                "user_id",
                F.col("session.start").alias("session_start"),
                F.col("session.end").alias("session_end"),
                F.col("count").alias("actions"),
            )
        )
        status = not_null(status, "user_id")
        return {"user_status": status, "user_alerts": alerts, "user_sessions": sessions}
