"""The event-time guard: a record whose event time cannot be right goes to the quarantine
before any watermark sees it.

Spark's watermark is the largest event time seen minus the delay, and it never goes back: one
record dated 9999-12-31 would move it to year 9999, and every later record would be dropped as
late, for good. The runner applies this guard to every stream input that declares an
event-time column (`Input(..., event_time=COLUMN)`), between parsing and the pipeline's
`build`, so the rows it rejects never reach `withWatermark`:

- later than the batch's time + `--max-future` (default 1 day): `event_time_too_far_in_future`;
- earlier than the batch's time - `--max-past` (default off): `event_time_too_old`.

"The batch's time" is `current_timestamp()`, which in a streaming query is the micro-batch's
timestamp recorded in the offset log: a batch replayed after a crash classifies every row the
same way, so the quarantine stays exactly-once. A NULL event time passes (a required field
that is missing was rejected by parsing already)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from slipstream.core.specs import DEFAULT_MAX_FUTURE, format_duration
from slipstream.ingest.parse import REASON

TOO_FAR_IN_FUTURE = "event_time_too_far_in_future"
TOO_OLD = "event_time_too_old"


def _micros(delta: timedelta) -> int:
    return delta // timedelta(microseconds=1)


@dataclass(frozen=True)
class EventTimeGuard:
    """The bounds on one input's event-time column; `max_past=None`: no lower bound."""

    column: str
    max_future: timedelta = DEFAULT_MAX_FUTURE
    max_past: timedelta | None = None

    def reason_future(self) -> str:
        return (
            f"{TOO_FAR_IN_FUTURE}: {self.column} more than {format_duration(self.max_future)} "
            "after the batch's time"
        )

    def reason_old(self) -> str:
        assert self.max_past is not None
        return (
            f"{TOO_OLD}: {self.column} more than {format_duration(self.max_past)} "
            "before the batch's time"
        )

    def describe(self) -> str:
        past = (
            f"at most {format_duration(self.max_past)} before"
            if self.max_past is not None
            else "no lower bound"
        )
        return (
            f"{self.column}: at most {format_duration(self.max_future)} after the batch's time, "
            f"{past} (--max-future, --max-past)"
        )

    def reason(self) -> Column:
        """The guard's reason for a row, or NULL when its event time is within bounds (against
        the batch's time)."""
        at = F.unix_micros(F.col(self.column))
        now = F.unix_micros(F.current_timestamp())
        reason = F.when(at > now + F.lit(_micros(self.max_future)), F.lit(self.reason_future()))
        if self.max_past is not None:
            reason = reason.when(at < now - F.lit(_micros(self.max_past)), F.lit(self.reason_old()))
        return reason

    def apply(self, records: DataFrame) -> DataFrame:
        """Give rows that parsed and break a bound their reason; parse failures keep theirs."""
        return records.withColumn(REASON, F.coalesce(F.col(REASON), self.reason()))
