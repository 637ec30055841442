"""`--stop-when-idle`: end a run whose input has ended.

A socket whose server has sent its lines and closed, or a folder nobody writes to any more,
leaves the queries waiting for data that never comes: Spark tells no one that a socket closed.
`IdleWatch` says when every query of the run has run no batch, and found no data waiting, for
the given time; `Run.wait` then stops the run as it stops at `--duration`, at a batch boundary.
The time counts from the last sign of work (a batch run, data found, sources initialising), so a
slow first batch does not end the run."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Protocol


class Watched(Protocol):
    """What the watch reads of a StreamingQuery."""

    @property
    def status(self) -> dict[str, Any]: ...

    @property
    def recentProgress(self) -> Sequence[Mapping[str, Any]]: ...  # noqa: N802 (Spark's name)


#: Spark's status message before a query's sources exist (a socket not yet connected)
INITIALISING = "Initializing sources"


@dataclass
class IdleWatch:
    """True from `idle` once no query has shown work for `after` (injected clock)."""

    after: timedelta
    clock: Callable[[], float] = time.monotonic
    _marks: dict[str, int | None] = field(default_factory=dict)
    _since: float | None = None

    def idle(self, queries: Mapping[str, Watched]) -> bool:
        now = self.clock()
        marks = {name: last_executed(q) for name, q in queries.items()}
        if self._since is None or marks != self._marks or any(busy(q) for q in queries.values()):
            self._marks, self._since = marks, now
            return False
        return now - self._since >= self.after.total_seconds()


def last_executed(query: Watched) -> int | None:
    """The id of the query's last executed batch (an idle query's progress entries carry no
    `addBatch` time), None before one."""
    executed = [p["batchId"] for p in query.recentProgress if "addBatch" in p["durationMs"]]
    return max(executed) if executed else None


def busy(query: Watched) -> bool:
    """Data waiting for a batch, or the sources not yet initialised."""
    status = query.status
    return bool(status.get("isDataAvailable")) or status.get("message") == INITIALISING
