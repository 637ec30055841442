"""A run's own record in its pipeline's event log.

`RunRecorder` is the listener handler that appends every record of a run to
`STATE_DIR/events/PIPELINE.jsonl` (bounded: rotated at `MAX_BYTES`, `BACKUPS` old files kept);
the runner adds `run_started` and `run_stopped` around the queries. It also notes which queries
have terminated, so a stopping run can wait (bounded) for their last events before it closes
the log."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

from slipstream.monitor.eventlog import EventLog
from slipstream.monitor.events import RunStarted, RunStopped
from slipstream.monitor.listener import Record
from slipstream.monitor.timestamps import Clock, utc_now

MAX_BYTES = 5_000_000  # about 1,500 progress records of a two-query run
BACKUPS = 2  # so a log never holds much more than 15 MB


class RunRecorder:
    def __init__(
        self,
        path: Path,
        pipeline: str,
        *,
        max_bytes: int = MAX_BYTES,
        backups: int = BACKUPS,
        clock: Clock = utc_now,
    ) -> None:
        self.log = EventLog(path, max_bytes=max_bytes, backups=backups)
        self.pipeline = pipeline
        self.clock = clock
        self._terminated: set[str] = set()
        self._changed = threading.Condition()
        self._closed = False

    @property
    def path(self) -> Path:
        return self.log.path

    def __call__(self, record: Record) -> None:
        with self._changed:
            if self._closed:  # a late event after the run stopped: nothing to add to
                return
            self.log.append(record)
            if record.get("event") == "terminated":
                self._terminated.add(str(record.get("query_id")))
                self._changed.notify_all()

    def run_started(self, queries: Iterable[str], reason: str | None) -> None:
        self._run_event(RunStarted, queries, reason)

    def run_stopped(self, queries: Iterable[str], reason: str | None) -> None:
        self._run_event(RunStopped, queries, reason)

    def _run_event(
        self, kind: type[RunStarted] | type[RunStopped], queries: Iterable[str], reason: str | None
    ) -> None:
        event = kind(
            ts=self.clock(),
            pipeline=self.pipeline,
            pid=os.getpid(),
            queries=tuple(queries),
            reason=reason,
        )
        with self._changed:
            if not self._closed:
                self.log.append(event)

    def wait_terminated(self, query_ids: Iterable[str], timeout: float = 5.0) -> bool:
        """Block until the terminated events of `query_ids` were recorded (events are async)."""
        wanted = {str(q) for q in query_ids}
        with self._changed:
            return self._changed.wait_for(lambda: wanted <= self._terminated, timeout)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self.log.close()
