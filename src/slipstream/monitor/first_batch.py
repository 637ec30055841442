"""What the terminal says while a run waits for its first batches (issue 44's "honest
waiting"): a line when Spark is up and the queries have started, then, while a query's batch 0
runs long (Spark plans, compiles and reads the most in it: minutes on a busy machine), a line
every `every_s` that says for how long. Quiet once every watched query finished a batch.

`FirstBatchWatch` decides what to say from the listener's records and a clock's readings (pure:
the tests feed both); `FirstBatchNotice` is the handler that feeds it and prints what it says,
from a daemon thread that wakes once a second, on a terminal only (a pipe or a test's output
keeps the lines it has always had).

Later batches too (issue 45's busy machine: batches of 39-173 s where 5-26 s was usual): once a
query has finished a batch, `LongBatchWatch` says when its next batch has processed data for
`after_s`, and every `every_s` after that, from the queries' own status (`follow`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import TextIO

from slipstream.monitor.console import is_terminal
from slipstream.monitor.listener import Record

#: seconds of batch 0 before the first "running for" line, and between two of them
FIRST_AFTER_S = 15.0
EVERY_S = 15.0
#: the same for a later batch: longer, since a batch of a backfill may be large by design
LONG_AFTER_S = 30.0
LONG_EVERY_S = 30.0
#: a query's batch as its status says it: (processing data now, the last batch it finished)
Status = tuple[bool, int | None]


class FirstBatchWatch:
    """The lines to print, given the records seen and the time now (seconds, any origin).

    `began`: when Spark began to start (the clock's reading). `queries`: the queries to watch
    (default: every query that starts; a run names those that run micro-batches: a real-time
    output's batch is an epoch, minutes long while its rows flow)."""

    def __init__(
        self,
        began: float,
        queries: Collection[str] | None = None,
        first_after_s: float = FIRST_AFTER_S,
        every_s: float = EVERY_S,
    ) -> None:
        self.began = began
        self.queries = None if queries is None else frozenset(queries)
        self.first_after_s = first_after_s
        self.every_s = every_s
        self.started: dict[str, float] = {}  # query -> when it started, while on batch 0
        self.finished: set[str] = set()
        self.said_at: float | None = None  # the last "running for" line
        self.up_said = False

    def watched(self, query: str) -> bool:
        return self.queries is None or query in self.queries

    def seen(self, record: Record, now: float) -> list[str]:
        """Take one listener record; the line to print at once (Spark is up), if any."""
        query = str(record.get("query"))
        if not self.watched(query):
            return []
        if record["event"] == "started" and query not in self.finished:
            self.started.setdefault(query, now)
            if not self.up_said:
                self.up_said = True
                return [f"Spark started in {now - self.began:.0f} s; batch 0 is running"]
        elif record["event"] in ("progress", "terminated"):
            self.started.pop(query, None)
            self.finished.add(query)
        return []

    def due(self, now: float) -> list[str]:
        """The line to print at `now`, if any: the queries still on batch 0 and for how long,
        once the oldest has run `first_after_s`, then every `every_s`."""
        if not self.started:
            return []
        if self.said_at is not None and now - self.said_at < self.every_s:
            return []
        oldest = min(self.started.values())
        if now - oldest < self.first_after_s:
            return []
        self.said_at = now
        each = ", ".join(f"{q} {now - t:.0f} s" for q, t in sorted(self.started.items()))
        return [f"batch 0 still running: {each} (the first batch is the slowest)"]

    @property
    def done(self) -> bool:
        """Every watched query that started has finished a batch, and at least one started."""
        return self.up_said and not self.started


class LongBatchWatch:
    """The lines to print about batches after the first that run long, given each query's
    `Status` and the time now (seconds, any origin). A query that has finished no batch yet is
    FirstBatchWatch's."""

    def __init__(self, after_s: float = LONG_AFTER_S, every_s: float = LONG_EVERY_S) -> None:
        self.after_s = after_s
        self.every_s = every_s
        self.running: dict[str, tuple[int, float]] = {}  # query -> (its batch, since when)
        self.said_at: float | None = None

    def due(self, now: float, statuses: Mapping[str, Status]) -> list[str]:
        for query, (processing, last) in statuses.items():
            batch = None if last is None or not processing else last + 1
            if batch is None:
                self.running.pop(query, None)
            elif self.running.get(query, (None, 0.0))[0] != batch:
                self.running[query] = (batch, now)
        for query in set(self.running) - set(statuses):
            del self.running[query]
        long = {q: (b, now - t) for q, (b, t) in self.running.items() if now - t >= self.after_s}
        if not long or (self.said_at is not None and now - self.said_at < self.every_s):
            return []
        self.said_at = now
        each = ", ".join(f"{q} batch {b} {s:.0f} s" for q, (b, s) in sorted(long.items()))
        return [f"still running: {each} (a busy machine, or a large batch)"]


class FirstBatchNotice:
    """A listener handler that prints what a FirstBatchWatch says, on a terminal only (or
    `enabled=True`), and a LongBatchWatch of the same queries. Create it just before Spark
    starts; `close()` stops its thread."""

    def __init__(
        self,
        out: TextIO,
        queries: Collection[str] | None = None,
        *,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.out = out
        self.clock = clock
        self.enabled = is_terminal(out) if enabled is None else enabled
        self.watch = FirstBatchWatch(clock(), queries)
        self.long = LongBatchWatch()
        self._statuses: Callable[[], Mapping[str, Status]] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __call__(self, record: Record) -> None:
        if not self.enabled:
            return
        with self._lock:
            lines = self.watch.seen(record, self.clock())
        self._print(lines)
        if record["event"] == "started" and self._thread is None:
            self._thread = threading.Thread(
                target=self._tick, name="slipstream-first-batch", daemon=True
            )
            self._thread.start()

    def follow(self, statuses: Callable[[], Mapping[str, Status]]) -> None:
        """Also say when a later batch runs long, reading the queries' status from
        `statuses` (runtime/run.py's `Run.batch_status`) once a second."""
        self._statuses = statuses

    def _tick(self) -> None:
        while not self._stop.wait(1.0):  # a wake-up for the next line, not a synchronisation
            lines = self.due()
            if lines is None:
                return
            self._print(lines)

    def due(self) -> list[str] | None:
        """The lines to print now (the first batch's, then long batches' of the watched
        queries); None once there is nothing more to say."""
        with self._lock:
            if self.watch.done and self._statuses is None:
                return None
            lines = self.watch.due(self.clock())
        if self._statuses is not None:
            try:
                statuses = self._statuses()
            except Exception:  # noqa: BLE001 - a stopping session: nothing more to say
                return None
            watched = {q: st for q, st in statuses.items() if self.watch.watched(q)}
            lines += self.long.due(self.clock(), watched)
        return lines

    def _print(self, lines: list[str]) -> None:
        for line in lines:
            print(line, file=self.out, flush=True)

    def close(self) -> None:
        self._stop.set()

    def __enter__(self) -> FirstBatchNotice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
