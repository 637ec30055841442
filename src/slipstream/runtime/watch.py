"""What listens to a run's queries: one `RunListener` and its handlers, in order.

Each batch's progress goes to the handlers in this order: the state's share of the driver's
heap (runtime/state_heap.py), the rows each output wrote (runtime/written.py), the files the
batch read (runtime/landed.py), the late-row dead-letter (runtime/deadletter.py), the event log
(monitor/recorder.py), the caller's handlers (console, metrics, dashboard, a demo's view) and
last the run's totals. The listener hands them one record at a time; a finite run's end hands
them the batches Spark has not delivered yet (`Run.sync_progress`)."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from slipstream.monitor.listener import Handler, RunListener
from slipstream.monitor.recorder import RunRecorder
from slipstream.monitor.totals import RunTotals
from slipstream.runtime.bound import Prepared
from slipstream.runtime.control import StopControl
from slipstream.runtime.deadletter import DeadLetter, dead_letter
from slipstream.runtime.landed import LandedFilesCheck
from slipstream.runtime.partitions import counts_state_rows
from slipstream.runtime.state_heap import StateHeapWatch
from slipstream.runtime.written import WrittenRows


@dataclass
class Watch:
    listener: RunListener
    recorder: RunRecorder
    totals: RunTotals
    control: StopControl

    @classmethod
    def open(cls, spark: SparkSession, prepared: Prepared, handlers: list[Handler]) -> Watch:
        """The listener, added to the session: the event log first, the totals last."""
        settings = prepared.settings
        state_counted = counts_state_rows(spark, prepared)
        control = StopControl(settings.checkpoint_root)
        # an output's query named otherwise in Spark (--query-name) keeps slipstream's name
        named = {spark: ours for ours, spark in prepared.spark_names.items()}
        recorder = RunRecorder(settings.event_log, prepared.pipeline.name)
        totals = RunTotals()
        listener = RunListener(
            prepared.pipeline.name, [recorder, *handlers, totals], named, state_counted
        )
        spark.streams.addListener(listener)
        return cls(listener, recorder, totals, control)

    def guard(self, spark: SparkSession, prepared: Prepared) -> tuple[DeadLetter, LandedFilesCheck]:
        """The handlers that judge each batch, before the queries start: the dead-letter
        tells this run's batches from earlier ones; a file that grew since its batch read it
        (a resumed checkpoint) is refused now."""
        late = dead_letter(spark, prepared)
        self.listener.handlers.insert(0, late.handle)  # a wake for its thread
        landed = LandedFilesCheck(prepared)
        landed.check_read_files()
        self.listener.handlers.insert(0, landed.handle)  # before totals: a batch's files judged
        self.listener.handlers.insert(0, WrittenRows(prepared))  # first: the log records it
        heap = StateHeapWatch.for_run(spark, prepared)
        if heap is not None:
            self.listener.handlers.insert(0, heap)  # a warning once the state fills the heap
        return late, landed

    def abandon(self, spark: SparkSession, failure: BaseException) -> None:
        """A start that failed: the listener goes, the event log says why."""
        spark.streams.removeListener(self.listener)
        first_line = (str(failure).strip().splitlines() or [type(failure).__name__])[0]
        self.recorder.run_stopped([], f"failed to start: {first_line}")
        self.recorder.close()
