"""The event log's time: the clock injected where "now" matters, and timestamps as the log
writes them (millisecond ISO-8601 UTC, as Spark does) and reads them back (aware UTC)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

Clock = Callable[[], datetime]  # the current time, aware UTC; injected where "now" matters


def utc_now() -> datetime:
    return datetime.now(UTC)


def parse_ts(value: Any) -> datetime | None:
    """An aware UTC datetime from an ISO-8601 string (``Z`` or offset); None if absent or bad."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def format_ts(value: datetime) -> str:
    """``2024-05-01T12:00:00.123Z``: the millisecond UTC form Spark itself writes."""
    if value.tzinfo is None:
        raise ValueError(f"timestamps must be timezone-aware; got naive {value!r}")
    utc = value.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"
