"""How long each side of a stream-stream join holds its rows, read from the join's condition
in the analyzed plan (`check` prints it). `plan.py` finds the join and its sides."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import timedelta

from slipstream.core.specs import format_duration as dur

# `(load_taken_time#37-T7200000ms <= cast(temp_taken_time#13-T3600000ms + INTERVAL '3600'
# SECOND as timestamp))`: one side's event time compared with the other's, plus an interval;
# `-T7200000ms` is the watermark delay of that column's input
_TIME_COMPARISON = re.compile(
    r"\((?P<a>\w+)#\d+-T(?P<da>\d+)ms (?P<op><=|>=|<|>) (?:cast\()?(?P<b>\w+)#\d+-T(?P<db>\d+)ms"
    r"(?: (?P<sign>[+-]) INTERVAL '(?P<amount>[^']+)' (?P<unit>[A-Z]+(?: TO [A-Z]+)?))?"
)
_UNIT_SECONDS = {"DAY": 86400, "HOUR": 3600, "MINUTE": 60, "SECOND": 1}


@dataclass(frozen=True)
class JoinBuffer:
    """One side of a stream-stream join: its event-time column, the offset past it the query's
    watermark must pass before a row goes (None: no time bound, held for ever), so how far
    behind the newest input Spark holds a row (`held`), and how far seed 000's arithmetic says
    it must be held, each input late by its own watermark (`own`): the other side's watermark
    delay plus how far the condition lets the other side's time pass this side's."""

    side: str
    column: str
    offset: timedelta | None
    held: timedelta | None
    own: timedelta | None = None
    other: str = ""
    other_delay: timedelta | None = None

    def describe(self) -> list[str]:

        head = f"buffer      {self.side} ({self.column}): "
        if self.held is None or self.offset is None or self.own is None:
            return [head + "held for ever, no time bound"]
        off = self.offset
        past = f" {'+' if off >= timedelta(0) else '-'} {dur(abs(off))}" if off else ""
        assert self.other_delay is not None
        reach = self.own - self.other_delay
        why = f"{self.other}'s watermark {dur(self.other_delay)}" + (
            f" {'+' if reach > timedelta(0) else '-'} the condition's {dur(abs(reach))}"
            if reach
            else ""
        )
        lines = [
            head + f"a row is held until the watermark passes {self.column}{past}: "
            f"about {dur(self.held)} of event time behind the newest input",
            head + f"up to {dur(self.own)} of event time by seed 000's arithmetic ({why})",
        ]
        if self.held != self.own:
            lines.append(
                f"            (each input late by its own watermark; Spark keeps one watermark "
                f"per query, the slower input's, so it holds {self.column} "
                f"{dur(abs(self.held - self.own))} {'longer' if self.held > self.own else 'less'})"
            )
        return lines


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


def join_buffers(join_text: str, left_columns: set[str]) -> tuple[JoinBuffer, ...]:
    """How long each side of a stream-stream join holds a row, behind the newest input.

    The time condition bounds `right - left` to [lo, hi]. Seed 000's arithmetic, each input
    late by at most its own watermark delay: a left row can meet a right row up to
    `delay(right) + hi` later in event time, a right row a left row `delay(left) - lo` later.
    Spark keeps one watermark for the query, the slower input's (the default `min` policy):
    `newest - max(delays)` when both inputs advance together. A left row can still match a
    future right row until that watermark passes `left + hi`; a right row until it passes
    `right - lo`."""
    lo: timedelta | None = None
    hi: timedelta | None = None
    columns: dict[str, str] = {}
    delays: dict[str, timedelta] = {}
    for m in _TIME_COMPARISON.finditer(join_text):
        a, b, op = m.group("a"), m.group("b"), m.group("op")
        delays[a] = timedelta(milliseconds=int(m.group("da")))
        delays[b] = timedelta(milliseconds=int(m.group("db")))
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
    left, right = columns["left"], columns["right"]
    slowest = max(delays.values())
    return (
        JoinBuffer(
            "left", left, hi, None if hi is None else slowest + hi,
            None if hi is None else delays[right] + hi, right, delays[right],
        ),
        JoinBuffer(
            "right", right, None if lo is None else -lo, None if lo is None else slowest - lo,
            None if lo is None else delays[left] - lo, left, delays[left],
        ),
    )  # fmt: skip
