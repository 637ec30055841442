"""The parts a status verdict is made of: the falling-behind rule, one batch's progress point,
whether a run's process lives, and how durations and errors are shown."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from statistics import fmean

from slipstream.monitor.events import QueryProgress


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (signal 0 probes, sends nothing)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


@dataclass(frozen=True)
class FallingBehindRule:
    """Falling behind: of the last ``window`` batches that read rows, at least ``min_slow``
    started back to back with the batch before and processed rows more slowly than they
    arrived, and processed/input averages below ``max_ratio``.

    "Back to back": the batch started within ``max_gap`` (or a tenth of the previous batch's
    duration, if longer) after the previous batch ended, and that batch read rows. A batch that
    started later, or after a batch without input (which Spark runs only when no input is
    waiting, to move the watermark), found the query caught up, so it keeps up whatever the
    rates say: Spark computes
    ``inputRowsPerSecond`` over the time since the previous trigger, which with sparse input
    (a few rows per file) is far above what a batch's fixed cost lets it process."""

    window: int = 5
    min_slow: int = 3
    max_ratio: float = 0.95
    max_gap: timedelta = timedelta(seconds=1)

    def __post_init__(self) -> None:
        if not 1 <= self.min_slow <= self.window:
            raise ValueError(
                f"min_slow must be between 1 and window; got min_slow={self.min_slow}, "
                f"window={self.window}"
            )
        if not 0 < self.max_ratio <= 1:
            raise ValueError(f"max_ratio must be in (0, 1]; got max_ratio={self.max_ratio}")


@dataclass(frozen=True)
class ProgressPoint:
    """One batch as a point of the dashboard's charts."""

    ts: datetime
    batch_id: int | None
    input_rows: int
    input_rps: float | None
    processed_rps: float | None
    batch_duration_ms: int | None
    watermark_lag_s: float | None  # the data clock when the batch completed, minus its watermark
    state_rows: int | None  # None: not counted (a finite run)

    @classmethod
    def of(cls, event: QueryProgress, clock: datetime | None = None) -> ProgressPoint:
        """The event's figures of the same names, and how far its watermark lags ``clock``
        (``data_clock`` at the batch's end; default its completion time)."""
        mark = event.watermark
        lag = None if mark is None else ((clock or event.ts) - mark).total_seconds()
        same = {f.name: getattr(event, f.name) for f in fields(cls) if f.name != "watermark_lag_s"}
        return cls(**same, watermark_lag_s=lag)


def data_clock(newest: datetime | None, read_at: datetime | None, now: datetime) -> datetime:
    """The data's own clock: the newest event time read, advanced by the wall time since the
    batch that read it. For live data that is about ``now``; for a replay of old data it is
    where the replay has got to, so a watermark lag against it means the same for both (the
    wall clock would say 270 days behind for data from last year). ``now`` when unknown."""
    return now if newest is None or read_at is None else newest + (now - read_at)


def mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return fmean(present) if present else None


def per_second(rows: int | None, duration_ms: int | None) -> float | None:
    """Rows over a batch's time; None when either is unknown (or the time is 0)."""
    return None if rows is None or not duration_ms else rows * 1000 / duration_ms


_ERROR_LINE = re.compile(r"^[A-Za-z_][\w.$]*(?:Error|Exception|Exit|Interrupt)\b.*?: \S")


def summarize_error(text: str, limit: int = 200) -> str:
    """The line of an exception dump a person needs first.

    Spark wraps Python errors raised in ``foreachBatch`` in a Py4J exception whose text embeds
    the Python traceback; the useful line is the traceback's last ``SomeError: message``.
    Otherwise the first ``...Exception: message`` line (Spark's own errors) or the first line.
    """
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return ""
    marks = [i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln]
    python_errors = [ln for ln in lines[marks[-1] + 1 :] if _ERROR_LINE.match(ln)] if marks else []
    spark_errors = [ln for ln in lines if _ERROR_LINE.match(ln)]
    if python_errors:
        line = python_errors[-1]
    elif spark_errors:
        line = spark_errors[0]
    else:
        line = lines[0]
    line = line.strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"


def human_duration(delta: timedelta) -> str:
    """``850ms``, ``42s``, ``3m12s``, ``2h05m``, ``3d04h``; negative durations get a sign."""
    seconds = delta.total_seconds()
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{sign}{seconds * 1000:.0f}ms"
    whole = int(seconds)
    if whole < 60:
        return f"{sign}{seconds:.0f}s" if seconds >= 10 else f"{sign}{seconds:.1f}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{sign}{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{sign}{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{sign}{days}d{hours:02d}h"


def progress_series(batches: Iterable[QueryProgress]) -> list[ProgressPoint]:
    """A query's batches as chart points, each lag against the data clock as it stood then."""
    newest: datetime | None = None
    read_at: datetime | None = None
    series = []
    for p in batches:
        if p.executed and p.newest_event and (newest is None or p.newest_event >= newest):
            newest, read_at = p.newest_event, p.ts
        series.append(ProgressPoint.of(p, data_clock(newest, read_at, p.ts)))
    return series
