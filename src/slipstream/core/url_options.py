"""Checks of the options a URL's query gives Spark (`kafka://...?maxOffsetsPerTrigger=100`,
`format:orc:DIR?latestFirst=true`): each returns the value as Spark reads it, or raises
ValueError with what is allowed (the caller names the option)."""

from __future__ import annotations

from collections.abc import Callable


def whole_above_zero(limit: int) -> Callable[[str], str]:
    """A whole number above 0 and below `limit` (Spark's int or long), kept as text."""

    def check(value: str) -> str:
        if not value.isdigit() or not 0 < int(value) < limit:
            raise ValueError("a whole number above 0")
        return value

    return check


def true_or_false(value: str) -> str:
    """Spark's boolean option, in lower case."""
    if value.lower() not in ("true", "false"):
        raise ValueError("true or false")
    return value.lower()
