"""A tiny dependency-free progress bar for long, finite work (generators, available-now backfills).

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
from types import TracebackType
from typing import Self, TextIO

__all__ = ["ProgressBar"]


class ProgressBar:
    """Draw ``label [#####-----]  50.0% 5,000/10,000 12.3k/s ETA 0:01`` on one terminal line.

    ``total`` is the amount of work in whatever unit ``update`` counts; ``None`` means unknown
    (a counter and a rate are shown, no percentage). ``stream`` defaults to ``sys.stderr`` as it
    is when the bar is created. With ``enabled=None`` the bar draws only when ``stream`` is a TTY,
    so logs and CI output stay clean; ``True`` forces it on, ``False`` off. When enabled, leaving
    the ``with`` block replaces the bar with one summary line (marked ``interrupted`` if the block
    raised). Redraws are throttled to one per ``refresh_s`` of ``clock`` time.
    """

    def __init__(
        self,
        total: int | None,
        label: str,
        stream: TextIO | None = None,
        enabled: bool | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        width: int = 28,
        refresh_s: float = 0.1,
    ) -> None:
        if total is not None and total < 0:
            raise ValueError(f"total must be >= 0 or None; got total={total}")
        if width < 1:
            raise ValueError(f"width must be >= 1; got width={width}")
        self.total = total
        self.label = label
        self.stream: TextIO = sys.stderr if stream is None else stream
        self.enabled = _is_tty(self.stream) if enabled is None else enabled
        self.done = 0
        self._clock = clock
        self._width = width
        self._refresh_s = refresh_s
        self._started = clock()
        self._last_draw: float | None = None
        self._last_len = 0
        self._closed = False

    def __enter__(self) -> Self:
        self._started = self._clock()
        self._draw(force=True)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(interrupted=exc_type is not None)

    def update(self, n: int = 1) -> None:
        """Record ``n`` more units of finished work."""
        if n < 0:
            raise ValueError(f"n must be >= 0; got n={n}")
        self.done += n
        self._draw(force=False)

    def close(self, *, interrupted: bool = False) -> None:
        """Replace the bar with a summary line (once; later calls do nothing)."""
        if self._closed:
            return
        self._closed = True
        if not self.enabled:
            return
        elapsed = max(self._clock() - self._started, 0.0)
        done = f"{self.done:,}" if self.total is None else f"{self.done:,}/{self.total:,}"
        line = f"{self.label}: {done} in {_clock_text(elapsed)} ({_rate_text(self.done, elapsed)})"
        if interrupted:
            line += " - interrupted"
        self._write_line(line, final=True)

    def _draw(self, *, force: bool) -> None:
        if not self.enabled or self._closed:
            return
        now = self._clock()
        if not force and self._last_draw is not None and now - self._last_draw < self._refresh_s:
            return
        self._last_draw = now
        elapsed = max(now - self._started, 0.0)
        rate = _rate_text(self.done, elapsed)
        if self.total is None:
            line = f"{self.label} {self.done:,} {rate}"
        else:
            fraction = 1.0 if self.total == 0 else min(self.done / self.total, 1.0)
            filled = int(fraction * self._width)
            bar = "#" * filled + "-" * (self._width - filled)
            eta = "?"
            if self.done and elapsed > 0:
                eta = _clock_text(max(self.total - self.done, 0) * elapsed / self.done)
            line = (
                f"{self.label} [{bar}] {fraction * 100:5.1f}% "
                f"{self.done:,}/{self.total:,} {rate} ETA {eta}"
            )
        self._write_line(line, final=False)

    def _write_line(self, line: str, *, final: bool) -> None:
        if final:  # blank out the bar, then leave a clean summary line without padding
            text = f"\r{' ' * self._last_len}\r{line}\n"
        else:
            text = f"\r{line}{' ' * max(self._last_len - len(line), 0)}"
        self._last_len = len(line)
        self.stream.write(text)
        self.stream.flush()


def _is_tty(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if callable(isatty) else False
    except ValueError:  # closed stream
        return False


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
