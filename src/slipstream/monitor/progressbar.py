"""A progress bar for long, finite work (generators, available-now backfills), drawn by rich.

On a terminal it draws `label ━━━━━━━╸━━━━  50% 5,000/10,000 12.3k/s 0:00:01` in place; when
the output is not a terminal it stays silent (logs and CI stay clean) unless forced on, and
closing it always leaves one plain summary line: `label: 5,000/10,000 in 1.2s (4.1k/s)`.

>>> import io
>>> out = io.StringIO()
>>> with ProgressBar(3, "demo", stream=out) as bar:  # not a TTY: silent
...     bar.update(3)
>>> out.getvalue()
''
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TextIO

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)

from slipstream.monitor.console import console_for, is_terminal

__all__ = ["ProgressBar"]


class ProgressBar(AbstractContextManager["ProgressBar"]):
    """Progress of ``total`` units (``None``: unknown; a count and a rate are shown).

    ``stream`` defaults to ``sys.stderr`` as it is when the bar is created. With
    ``enabled=None`` the bar draws only when ``stream`` is a terminal; ``True`` forces it on,
    ``False`` off. When enabled, leaving the ``with`` block replaces the bar with one summary
    line (marked ``interrupted`` if the block raised). ``clock`` times the rate (tests inject
    one)."""

    def __init__(
        self,
        total: int | None,
        label: str,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if total is not None and total < 0:
            raise ValueError(f"total must be >= 0 or None; got total={total}")
        self.total = total
        self.label = label
        self.stream: TextIO = sys.stderr if stream is None else stream
        self.enabled = is_terminal(self.stream) if enabled is None else enabled
        self.done = 0
        self._clock = clock
        self._started = clock()
        self._closed = False
        self._console = console_for(self.stream)
        self._live = self.enabled and self._console.is_terminal
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeRemainingColumn(),
            console=self._console,
            transient=True,
            get_time=clock,
        )
        self._task = self._progress.add_task(label, total=total, rate="-/s")

    def __enter__(self) -> ProgressBar:
        self._started = self._clock()
        if self._live:
            self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.close(interrupted=exc_type is not None)

    def update(self, n: int = 1) -> None:
        """Record ``n`` more units of finished work."""
        if n < 0:
            raise ValueError(f"n must be >= 0; got n={n}")
        self.done += n
        if self._live:
            elapsed = self._clock() - self._started
            self._progress.update(self._task, advance=n, rate=_rate_text(self.done, elapsed))

    def close(self, *, interrupted: bool = False) -> None:
        """Replace the bar with a summary line (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        if self._live:
            self._progress.stop()
        if not self.enabled:
            return
        elapsed = max(self._clock() - self._started, 0.0)
        done = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
        line = f"{self.label}: {done} in {_clock_text(elapsed)} ({_rate_text(self.done, elapsed)})"
        self.stream.write(line + (" - interrupted" if interrupted else "") + "\n")
        self.stream.flush()


def _rate_text(done: int, elapsed_s: float) -> str:
    if elapsed_s <= 0:
        return "-/s"
    rate = done / elapsed_s
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if rate >= threshold:
            return f"{rate / threshold:.1f}{suffix}/s"
    return f"{rate:.1f}/s"


def _clock_text(seconds: float) -> str:
    whole = int(round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    if seconds < 10:
        return f"{seconds:.1f}s"
    return f"{minutes}:{secs:02d}"
