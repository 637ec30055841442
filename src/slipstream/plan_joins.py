"""How long each side of a stream-stream join holds its rows, read from the join's condition
in the analyzed plan (`check` prints it). `plan.py` finds the join and its sides."""

from __future__ import annotations

import re
from datetime import timedelta

# `(load_taken_time#37-T7200000ms <= cast(temp_taken_time#13-T3600000ms + INTERVAL '3600'
# SECOND as timestamp))`: one side's event time compared with the other's, plus an interval
_TIME_COMPARISON = re.compile(
    r"\((?P<a>\w+)#\d+-T(?P<da>\d+)ms (?P<op><=|>=|<|>) (?:cast\()?(?P<b>\w+)#\d+-T(?P<db>\d+)ms"
    r"(?: (?P<sign>[+-]) INTERVAL '(?P<amount>[^']+)' (?P<unit>[A-Z]+(?: TO [A-Z]+)?))?"
)
_UNIT_SECONDS = {"DAY": 86400, "HOUR": 3600, "MINUTE": 60, "SECOND": 1}


def _interval(amount: str, unit: str) -> timedelta:
    """`'3600' SECOND`, `'1' HOUR`, `'0 01:00:00' DAY TO SECOND` -> timedelta."""
    first = unit.split()[0]
    if " TO " not in unit:
        return timedelta(seconds=float(amount) * _UNIT_SECONDS[first])
    sign = -1 if amount.startswith("-") else 1
    parts = re.split(r"[ :]", amount.lstrip("-"))
    order = ["DAY", "HOUR", "MINUTE", "SECOND"]
    units = order[order.index(first) : order.index(first) + len(parts)]
    total = sum(float(p) * _UNIT_SECONDS[u] for p, u in zip(parts, units, strict=True))
    return timedelta(seconds=sign * total)


def join_buffers(
    join_text: str, left_columns: set[str]
) -> tuple[tuple[str, timedelta | None, timedelta | None], ...]:
    """How long each side of a stream-stream join holds a row, behind the newest input.

    The time condition bounds `right - left` to [lo, hi]. Spark keeps one watermark for the
    query, the slower input's (the default `min` policy): `newest - max(delays)` when both
    inputs advance together. A left row can still match a future right row until that
    watermark passes `left + hi`; a right row until it passes `right - lo`."""
    lo: timedelta | None = None
    hi: timedelta | None = None
    columns: dict[str, str] = {}
    delays: list[timedelta] = []
    for m in _TIME_COMPARISON.finditer(join_text):
        a, b, op = m.group("a"), m.group("b"), m.group("op")
        delays += [
            timedelta(milliseconds=int(m.group("da"))),
            timedelta(milliseconds=int(m.group("db"))),
        ]
        if (a in left_columns) == (b in left_columns):
            continue
        offset = timedelta(0)
        if m.group("amount"):
            offset = _interval(m.group("amount"), m.group("unit"))
            offset = -offset if m.group("sign") == "-" else offset
        # a op b + offset  ->  (right - left) op' bound
        if a in left_columns:  # left - right op offset  ->  right - left (flipped op) -offset
            columns["left"], columns["right"] = a, b
            op, bound = {"<=": ">=", "<": ">", ">=": "<=", ">": "<"}[op], -offset
        else:
            columns["left"], columns["right"] = b, a
            bound = offset
        if op in ("<=", "<"):
            hi = bound if hi is None else min(hi, bound)
        else:
            lo = bound if lo is None else max(lo, bound)
    if not columns:
        return ()
    slowest = max(delays)
    return (
        (columns["left"], hi, None if hi is None else slowest + hi),
        (columns["right"], None if lo is None else -lo, None if lo is None else slowest - lo),
    )
