"""A started run: its queries, the lock on their checkpoints, waiting and stopping.

Run.wait() until the queries finish (finite triggers), --duration passes, Ctrl-C or a stop
           request; then stop at a batch boundary and release the checkpoint."""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery

from slipstream.checkpoint.integrity import as_state_damage
from slipstream.checkpoint.lifecycle import (
    CheckpointLock,
    last_committed_batch,
    last_planned_batch,
    query_checkpoint,
)
from slipstream.core.backoff import SlowWorker
from slipstream.core.specs import format_duration
from slipstream.ingest.expectations import as_expectation_failure
from slipstream.monitor.events import batch_executed
from slipstream.monitor.listener import RunListener
from slipstream.monitor.recorder import RunRecorder
from slipstream.monitor.totals import RunTotals
from slipstream.runtime.control import StopControl
from slipstream.runtime.idle import IdleWatch
from slipstream.sources.kafka_faults import as_kafka_failure

log = logging.getLogger(__name__)

#: how many progress reports a query keeps (`recentProgress`); Spark's default 100
RECENT_PROGRESS = "spark.sql.streaming.numRecentProgressUpdates"

if TYPE_CHECKING:
    from slipstream.core.kafka_url import KafkaTopic
    from slipstream.runtime.bound import Prepared
    from slipstream.runtime.deadletter import DeadLetter
    from slipstream.runtime.landed import LandedFilesCheck


@dataclass
class Run:
    """The queries of one pipeline run, with the lock on their checkpoint."""

    spark: SparkSession
    prepared: Prepared
    queries: dict[str, StreamingQuery]
    lock: CheckpointLock
    listener: RunListener
    totals: RunTotals
    stop_requested: Callable[[], bool] = field(default=lambda: False)
    recorder: RunRecorder | None = None  # the event log (run_started/run_stopped and events)
    dead_letter: DeadLetter | None = None  # late rows, written after each batch (deadletter.py)
    stop_reason: str | None = None  # why the run stopped, for `run_stopped`
    landed: LandedFilesCheck | None = None  # the files each batch read (runtime/landed.py)
    _stopped: bool = False
    # Spark's log off while the queries stop (a session this run started, without --verbose):
    # a stop interrupts the batch that is running, which Spark logs as ERROR lines
    # (`TorrentBroadcast`, `FileFormatWriter: Aborting job`) though nothing failed: the batch
    # is replayed at the next start. A failure is read from the query, not from the log.
    quiet_stop: bool = False
    # queries this run stopped while they were running (see raise_failure)
    interrupted: set[str] = field(default_factory=set)
    # a stop asked from this process (Ctrl-C: runtime.interrupt), whatever `stop_requested` is
    _asked: threading.Event = field(default_factory=threading.Event)
    _asked_reason: str | None = None
    # how to start each query again (runtime.start), for `_start_again`
    restarts: dict[str, Callable[[], StreamingQuery]] = field(default_factory=dict)
    _slow_workers: dict[str, SlowWorker] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic

    def request_stop(self, reason: str) -> None:
        """Ask `wait` to stop at the next batch boundary (safe from a signal handler)."""
        self._asked_reason = self._asked_reason or reason
        self._asked.set()

    def batch_status(self) -> dict[str, tuple[bool, int | None]]:
        """Each running query's batch as its status says: whether it is processing data now,
        and the last batch it finished (the listener's), for the terminal's waiting lines."""
        pipeline = self.prepared.pipeline.name
        found = {}
        for name, query in list(self.queries.items()):
            if query.isActive:
                status = query.status
                processing = bool(status.get("isTriggerActive") and status.get("isDataAvailable"))
                found[f"{pipeline}.{name}"] = (
                    processing,
                    self.totals.last_batch.get(f"{pipeline}.{name}"),
                )
        return found

    def process_all_available(self) -> None:
        """Block until every query has processed all input available now (tests, backfills)."""
        for name in list(self.queries):
            while True:
                try:
                    self.queries[name].processAllAvailable()
                    break
                except Exception as exc:
                    if self._start_again(name):
                        continue
                    failure = as_expectation_failure(exc)
                    if failure is None:
                        raise
                    raise failure from exc
        self.sync_progress()
        if self.landed is not None and self.landed.failure is not None:
            raise self.landed.failure
        if self.dead_letter is not None:
            self.dead_letter.catch_up()  # every committed batch's late rows are written

    def sync_progress(self, timeout: float = 600.0) -> None:
        """Hand every handler (the totals, the event log, ...) each query's last batches now:
        Spark updates `recentProgress` before processAllAvailable returns or the query ends,
        but delivers listener events asynchronously, one listener of the session after the
        other: behind a listener on PySpark's own bridge (a user's, or a benchmark's) 0.1-0.7 s
        later (docs/benchmarks.md section 53), which a finite run would otherwise wait for.
        `timeout`: how long to wait for the listener to deliver the batches Spark no longer
        keeps (a long run, over 100 batches)."""
        kept = int(self.spark.conf.get(RECENT_PROGRESS, "100") or 100)
        for name, query in self.queries.items():
            recent = [json.loads(p.json) for p in query.recentProgress]
            if not self.listener.catch_up(recent, len(recent) < kept, timeout):
                # never silent: the summary would undercount what the query processed
                log.warning("progress of %s.%s not all seen: totals may be short",
                            self.prepared.pipeline.name, name)  # fmt: skip

    def wait(
        self, duration: timedelta | None = None, poll: float = 0.5, idle: timedelta | None = None
    ) -> None:
        """Until the queries finish (finite triggers: all of them; otherwise: any of them),
        `duration` passes, they have been `idle` that long (runtime/idle.py), Ctrl-C or a stop
        request; then stop and raise a query's failure."""
        deadline = time.monotonic() + duration.total_seconds() if duration else None
        watch = IdleWatch(idle) if idle else None
        finite = self.prepared.settings.trigger.finite
        # Wait on this run's own queries: the session's awaitAnyTermination would also raise
        # the failure of any earlier query of the session (another run, a previous test).
        # A failure is raised after the stop, by raise_failure (which maps expectation errors).
        try:
            while True:
                ended = [n for n, q in self.queries.items() if not q.isActive]
                if [n for n in ended if self._start_again(n)]:
                    continue
                # a failed query stops its siblings under every trigger: the outputs and the
                # quarantine would otherwise end at different batches
                failed = any(self.queries[n].exception() is not None for n in ended)
                if ended and (not finite or failed or len(ended) == len(self.queries)):
                    self.stop_reason = self._ended_reason(ended, finite)
                    if finite:
                        self.sync_progress()  # the summary counts the last batch
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    assert duration is not None
                    self.stop_reason = f"--duration {format_duration(duration)} elapsed"
                    break
                if self.landed is not None and self.landed.failure is not None:
                    self.stop_reason = f"stopped: {self.landed.failure.code}"
                    break
                if watch is not None and watch.idle(self.queries):
                    self.sync_progress()  # the summary counts the last batch
                    self.stop_reason = (
                        f"--stop-when-idle: no input for {format_duration(watch.after)}"
                    )
                    break
                if self._asked.is_set():
                    self.stop_reason = self._asked_reason
                    break
                if self.stop_requested():
                    reason = getattr(self.stop_requested, "reason", None)
                    self.stop_reason = reason or "stop requested"
                    break
                running = next((q for q in self.queries.values() if q.isActive), None)
                if running is not None:
                    # seconds, a float: PySpark's annotation says int, it sends timeout * 1000
                    with contextlib.suppress(StreamingQueryException):
                        running.awaitTermination(poll)  # type: ignore[arg-type]
        except KeyboardInterrupt:
            self.stop_reason = "interrupted (Ctrl-C)"
            raise
        finally:
            self.stop()
        self.raise_failure()

    def _start_again(self, name: str) -> bool:
        """Start query `name` again when it failed because a Python worker that Spark starts
        on the driver (transformWithState's pre-init worker) did not connect back within
        Spark's fixed 10 s: on a busy machine the worker takes longer to start. It fails as its
        batch is planned, before anything is written, and a start resumes from the checkpoint,
        so nothing is lost or doubled. After a pause that doubles each time, for as long as
        `core/backoff.py`'s budget allows; a stop asked meanwhile ends the waiting, and the
        failure then stands."""
        query = self.queries[name]
        if query.isActive or name not in self.restarts:
            return False
        if not SlowWorker.is_slow_start(query.exception()):
            return False
        slow = self._slow_workers.setdefault(name, SlowWorker())
        pause = slow.pause_after_failure(self.clock())
        if pause is None:
            return False
        query_name = f"{self.prepared.pipeline.name}.{name}"
        print(slow.says(query_name, pause, self.clock()), file=sys.stderr, flush=True)
        if self._asked.wait(pause):
            return False
        again = self.restarts[name]()
        self.listener.register(str(again.id), query_name)
        self.queries[name] = again
        return True

    def _ended_reason(self, ended: list[str], finite: bool) -> str:
        pipeline = self.prepared.pipeline.name
        failed = [n for n in ended if self.queries[n].exception() is not None]
        if failed:
            return "query " + ", ".join(f"{pipeline}.{n}" for n in failed) + " failed"
        if finite:
            return f"finished: all input processed (trigger {self.prepared.settings.trigger.kind})"
        return "query " + ", ".join(f"{pipeline}.{n}" for n in ended) + " stopped"

    def raise_failure(self) -> None:
        """Raise the first query failure. A query `stop()` interrupted mid-batch may end with
        an error caused by the interruption itself (inside a foreachBatch it surfaces as
        FOREACH_BATCH_USER_FUNCTION_ERROR, which Spark does not recognise as a stop); that
        batch was not committed and is replayed at the next start, so it is not a failure."""
        if self.landed is not None and self.landed.failure is not None:
            raise self.landed.failure
        failed = [
            (name, query.exception())
            for name, query in self.queries.items()
            if name not in self.interrupted and query.exception() is not None
        ]
        # a failure with a code first: a query that failed on a sibling's cause may say less
        # (a Kafka input's lost records, seen by the quarantine's file sink and by a database
        # sink's foreachBatch, reach the second wrapped in a Python traceback)
        for name, error in failed:
            mapped = self._mapped(name, error)  # type: ignore[arg-type]
            if mapped is not None:
                raise mapped
        if failed:
            raise failed[0][1]  # type: ignore[misc]

    def _mapped(self, name: str, error: BaseException) -> BaseException | None:
        checkpoint = query_checkpoint(self.prepared.settings.checkpoint_root, name)
        pipeline_query = f"{self.prepared.pipeline.name}.{name}"
        return (
            as_expectation_failure(error)
            or as_state_damage(error, pipeline_query, checkpoint)
            or as_kafka_failure(error, pipeline_query, kafka_topics(self.prepared))
        )

    def stop(self, reason: str | None = None) -> None:
        """Stop every query at a batch boundary, record `run_stopped`, release the checkpoint.
        Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        reason = reason or self.stop_reason or "stopped by the caller"
        if self.quiet_stop:
            with contextlib.suppress(Exception):  # Spark Connect: the server's log is not ours
                self.spark.sparkContext.setLogLevel("OFF")
        try:
            self.interrupted |= _stop_at_batch_boundaries(self.queries)
        finally:
            with contextlib.suppress(Exception):  # the session gone
                self.sync_progress(timeout=5.0)  # the last batches recorded before the ends
                for query in self.queries.values():
                    if not query.isActive and query.exception() is None:
                        self.listener.ended(query.id, query.runId)
            if self.recorder is not None:
                # a failed query's event: the listener bus delivers it after stop() returns
                self.recorder.wait_terminated(str(q.id) for q in self.queries.values())
            with contextlib.suppress(Exception):  # already removed / session gone
                self.spark.streams.removeListener(self.listener)
            if self.dead_letter is not None:
                self.dead_letter.close()  # the last batches' late rows, under the lock
            if self.recorder is not None:
                where = batch_boundaries(self.prepared.settings.checkpoint_root, self.queries)
                names = [f"{self.prepared.pipeline.name}.{n}" for n in self.queries]
                self.recorder.run_stopped(names, f"{reason}; {where}" if where else reason)
                self.recorder.close()
            if isinstance(self.stop_requested, StopControl):
                self.stop_requested.clear()
            self.lock.release()

    def accounts(self) -> dict[str, dict]:
        """Each query's totals, an output's as read from the source: the records an ingest or
        shared query did not pass on to it are among those it read (runtime/feeds.py)."""
        from slipstream.runtime.feeds import accounts

        return accounts(self.prepared, self.totals.by_query)

    def results(self) -> DataFrame | None:
        return self.prepared.sink.read(self.spark, self.prepared.ctx)


def kafka_topics(prepared: Prepared) -> list[KafkaTopic]:
    """The topics of the run's Kafka inputs."""
    return [
        topic
        for b in prepared.inputs.values()
        if b.source is not None
        and (topic := b.source.topic(b.binding, b.source_options)) is not None
    ]


def _stop_at_batch_boundaries(
    queries: Mapping[str, StreamingQuery], timeout: float = 60.0, poll: float = 0.005
) -> set[str]:
    """Stop each query at its next batch boundary, all of them at once under one deadline
    (`timeout`); the names of those still running, which this stop ended.

    Spark has no graceful stop: `stop()` interrupts a running batch. Between triggers
    (`isTriggerActive` false) the last batch has written its commit, and `stop()` marks the query
    terminated before the next trigger can plan a batch. Under available-now the batches run
    back to back and that window is too short to be seen (SIGTERM drained 10 and 14 more
    batches, up to 60 s): so a query is also stopped as soon as its last progress moves on
    (the batch running at the request has committed); what `stop()` then interrupts is the start
    of the next batch, which is replayed at the next start. `isDataAvailable` is no guide: Spark
    reports it false while it writes the next batch's offsets. The queries are watched together:
    one after another, a run of several real-time queries (an epoch each) took minutes to stop.
    `batch_boundaries` says afterwards where each checkpoint stands."""
    deadline = time.monotonic() + timeout
    running_at_request = {name: _last_batch(q) for name, q in queries.items()}
    waiting = {name: q for name, q in queries.items() if q.isActive}
    ended: set[str] = set()
    while waiting:
        for name, query in list(waiting.items()):
            if not query.isActive:
                del waiting[name]
            elif (
                not query.status.get("isTriggerActive")
                or _last_batch(query) != running_at_request[name]
                or time.monotonic() >= deadline
            ):
                query.stop()
                ended.add(name)
                del waiting[name]
        # a query that fails meanwhile (a sibling's cause, a broker gone for both) raises its
        # failure here: it is not this stop's, and raise_failure reads it from the query
        for query in list(waiting.values())[:1]:
            # seconds, a float: PySpark's annotation says int, it sends timeout * 1000
            with contextlib.suppress(StreamingQueryException):
                query.awaitTermination(poll)  # type: ignore[arg-type]
    return ended


def _last_batch(query: StreamingQuery) -> int | None:
    """The id of the query's last completed batch (its last progress), None before one. An idle
    report (the query waited for input) carries the id of the batch it has not run yet: the
    one before it is the last that ran."""
    progress = query.lastProgress
    if not progress or progress.get("batchId") is None:
        return None
    batch = int(progress["batchId"])
    if batch_executed(progress):
        return batch
    return batch - 1 if batch > 0 else None


def batch_boundaries(root: Path, queries: dict[str, StreamingQuery]) -> str:
    """Where each query's checkpoint stands: its last committed batch, or the batch whose
    offsets were written without a commit (cut; Spark replays it on the next start)."""
    committed, cut = [], []
    for name in queries:
        checkpoint = query_checkpoint(root, name)
        planned = last_planned_batch(checkpoint)
        done = last_committed_batch(checkpoint)
        if planned is None:
            continue
        if done is not None and done >= planned:
            committed.append(f"{name} {done}")
        else:
            cut.append(f"{name} {planned}")
    parts = []
    if committed:
        parts.append("at a batch boundary, last committed batch: " + ", ".join(committed))
    if cut:
        parts.append("cut before its commit (replayed on restart): " + ", ".join(cut))
    return "; ".join(parts)
