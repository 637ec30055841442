"""A StreamingQueryListener that turns Spark's query events into plain JSON records and hands
them to handlers: the console batch line, the run summary, the event log, metrics.

Records use the event-log format (see monitor/events.py): `{"event", "ts", "pipeline", "query",
"query_id", "run_id", "pid", ...}` with Spark's progress JSON under "progress"."""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TextIO

from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import JStreamingQueryListener

from slipstream.errors import disk_full, find_error
from slipstream.jvm import DEDUP_TIMERS_METRIC
from slipstream.monitor.events import batch_executed, observed_sums
from slipstream.monitor.kafka_lag import total_lag

Record = dict[str, Any]
Handler = Callable[[Record], None]


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def handler_failure(exc: Exception) -> str:
    """A handler's failure in a line: a full disk by its code (the event log's write names no
    file), anything else as the exception."""
    full = disk_full(str(exc))
    return f"[{full.code}] {full.message}" if full else repr(exc)


def failure_said(exception: str) -> str:
    """A failed query's error in the batch lines' one line: a full disk or our own error by
    its code, else the first line of Spark's text (the launch's last line gives the fix)."""
    ours = disk_full(exception) or find_error(exception)
    return f"[{ours.code}] {ours.message}" if ours else exception.splitlines()[0]


class _ProgressAsText(JStreamingQueryListener):
    """PySpark's bridge from the JVM's listener bus, but a progress event crosses as its JSON
    text, in one call into the JVM: PySpark's own bridge reads each field, source, sink and
    state metric with a call of its own (hundreds a batch), which took about a tenth of the
    driver's Python time in a live `trending` run, beside the batches' own Python work."""

    def onQueryProgress(self, jevent: Any) -> None:
        self.pylistener.on_progress(json.loads(jevent.progress().json()))  # type: ignore[attr-defined]


class JsonProgressListener(StreamingQueryListener):
    """A listener whose progress events reach `on_progress` as Spark's JSON of them: in a
    classic session through `_ProgressAsText` (one call into the JVM per event), under Spark
    Connect from the event the client receives. Spark delivers a session's events to its
    listeners one after the other, so a listener on PySpark's own bridge holds back the others
    (docs/benchmarks.md section 53)."""

    @property
    def _jlistener(self) -> Any:
        """What `spark.streams.addListener` registers in the JVM (not used under Connect)."""
        if not hasattr(self, "_jlistenerobj"):
            from pyspark import SparkContext

            jvm = SparkContext._jvm
            assert jvm is not None
            self._jlistenerobj = jvm.PythonStreamingQueryListenerWrapper(_ProgressAsText(self))
        return self._jlistenerobj

    def onQueryProgress(self, event: Any) -> None:
        self.on_progress(json.loads(event.progress.json))

    def on_progress(self, progress: Record) -> None:
        raise NotImplementedError


class RunListener(JsonProgressListener):
    """Forwards events of the queries whose names start with `PIPELINE.`, and of those named
    in `named` (Spark's name -> slipstream's PIPELINE.OUTPUT: `--query-name`), under
    slipstream's name. `state_counted` False: the state stores do not count their rows (a
    finite run: runtime/partitions.py), so each progress record says so
    (`state_rows_counted: false`) and readers show no count rather than Spark's 0; a query
    registered with `rows_counted=False` (a deduplication by timers) is said so alone.

    The handlers see one record at a time, and each executed batch once: Spark delivers its
    events late (0.1-0.7 s after the batch behind another listener on PySpark's own bridge,
    docs/benchmarks.md section 53), so a finite run's end hands the handlers
    the batches not yet delivered itself (`catch_up`), and the listener's copies, when they
    come, are dropped."""

    def __init__(
        self,
        pipeline: str,
        handlers: list[Handler],
        named: dict[str, str] | None = None,
        state_counted: bool = True,
    ) -> None:
        self.pipeline = pipeline
        self.state_counted = state_counted
        self.handlers = handlers
        self.named = dict(named or {})
        # idle/terminated events carry no name; the runner registers ids as queries start
        self._names: dict[str, str] = {}
        self._uncounted: frozenset[str] = frozenset()  # queries whose stores count no rows
        self._failures: set[str] = set()  # each handler failure is said once
        # held while handlers run; notified after each record
        self._emitting = threading.Condition(threading.RLock())
        self._delivered: dict[str, int] = {}  # run id -> the last executed batch handed over
        self._ended: set[str] = set()  # run ids whose terminated event was handed over

    def _mine(self, name: str | None) -> bool:
        return bool(name) and (name in self.named or str(name).startswith(self.pipeline + "."))

    def _emit(self, record: Record) -> None:
        with self._emitting:
            for handler in self.handlers:
                try:
                    handler(record)
                except Exception as exc:  # a monitoring failure must never stop the query
                    said = handler_failure(exc)
                    if said not in self._failures:  # a full disk fails every record after it
                        self._failures.add(said)
                        print(f"slipstream: monitor handler failed: {said}", file=sys.stderr)
            self._emitting.notify_all()

    def _base(self, event: str, name: str | None, qid: Any, run_id: Any) -> Record:
        return {
            "event": event,
            "ts": _now(),
            "pipeline": self.pipeline,
            "query": self.named.get(str(name), name),
            "query_id": str(qid),
            "run_id": str(run_id),
            "pid": os.getpid(),
        }

    def onQueryStarted(self, event: Any) -> None:
        if self._mine(event.name):
            self._emit(self._base("started", event.name, event.id, event.runId))

    def on_progress(self, progress: Record) -> None:
        """A progress event as Spark's JSON of it; an executed batch already handed to the
        handlers (by `catch_up`) is not handed again."""
        if not self._mine(progress.get("name")):
            return
        record = self._base(
            "progress", progress.get("name"), progress.get("id"), progress.get("runId")
        )
        record["progress"] = progress
        if not self.state_counted or record["query"] in self._uncounted:
            record[STATE_COUNTED] = False
        with self._emitting:
            batch = progress.get("batchId")
            if isinstance(batch, int) and batch_executed(progress):
                run = record["run_id"]
                if batch <= self._delivered.get(run, -1):
                    return
                self._delivered[run] = batch
            self._emit(record)

    def catch_up(self, recent: list[Record], complete: bool, timeout: float = 600.0) -> bool:
        """Hand the handlers each executed batch of one query's run (`recent`: Spark's
        `recentProgress` as JSON, oldest first) that the listener has not delivered yet,
        without waiting for Spark to deliver it. `complete` False: Spark has dropped older
        entries, so first wait (up to `timeout` s, no sleep) until the listener has
        delivered the batch before the oldest kept; False if it has not."""
        executed = [p for p in recent if isinstance(p.get("batchId"), int) and batch_executed(p)]
        if not executed:
            return True
        run, oldest = str(executed[0].get("runId")), executed[0]["batchId"]
        with self._emitting:
            if not complete and not self._emitting.wait_for(
                lambda: self._delivered.get(run, -1) >= oldest - 1, timeout
            ):
                return False
            for progress in executed:
                self.on_progress(progress)
        return True

    def onQueryIdle(self, event: Any) -> None:
        name = self._names.get(str(event.id))
        if name:
            self._emit(self._base("idle", name, event.id, event.runId))

    def onQueryTerminated(self, event: Any) -> None:
        record = self._terminated(event.id, event.runId)
        if record is not None:
            record["exception"] = event.exception
            record["error_class"] = getattr(event, "errorClassOnException", None)
            self._emit(record)

    def ended(self, query_id: Any, run_id: Any) -> None:
        """Hand the handlers the terminated event of a query's run that ended without a
        failure now, rather than when Spark delivers it (up to 0.4 s after the stop, section 53);
        the listener's copy is then dropped. A failed query's event carries Spark's text of
        the failure: that one is left to the listener."""
        record = self._terminated(query_id, run_id)
        if record is not None:
            self._emit({**record, "exception": None, "error_class": None})

    def _terminated(self, query_id: Any, run_id: Any) -> Record | None:
        """A terminated record of a registered query's run not yet handed over, claimed."""
        name = self._names.get(str(query_id))
        with self._emitting:
            if not name or str(run_id) in self._ended:
                return None
            self._ended.add(str(run_id))
        return self._base("terminated", name, query_id, run_id)

    def register(self, query_id: str, name: str, *, rows_counted: bool = True) -> None:
        self._names = {**self._names, query_id: name}
        if not rows_counted:
            self._uncounted = self._uncounted | {name}


def _num(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if number != number else number  # NaN -> 0


#: a progress record's key: False when the run's state stores did not count their rows
STATE_COUNTED = "state_rows_counted"


def progress_summary(progress: dict[str, Any], state_counted: bool = True) -> dict[str, Any]:
    """The figures of one batch that slipstream shows and totals (`state_rows` None: the
    stores did not count them).

    `late` sums `numRowsDroppedByWatermark` over the stateful operators. Each operator removes
    the rows it counts, so nothing is counted twice; but an aggregation counts partial-aggregate
    rows (one per key and partition), not input rows. Put a row-level stateful operator first
    (trending deduplicates before it aggregates, with the same watermark) and every late row is
    dropped, and counted, there. `duplicates` sums the deduplication operators'
    `numDroppedDuplicateRows`, and for a deduplication by timers (`--dedup timers`, which
    reports none) its rows in less its rows out less the late rows its operator dropped
    (`timer_duplicates`)."""
    operators = progress.get("stateOperators") or []
    observed = progress.get("observedMetrics") or {}
    quality = observed_sums(observed, "quality")
    aggregates = [o for o in operators if is_aggregate(o.get("operatorName"))]
    return {
        "batch": progress.get("batchId"),
        "rows": int(_num(progress.get("numInputRows"))),
        "input_rps": _num(progress.get("inputRowsPerSecond")),
        "processed_rps": _num(progress.get("processedRowsPerSecond")),
        "duration_s": _num((progress.get("durationMs") or {}).get("triggerExecution")) / 1000,
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "state_rows": (
            int(sum(_num(o.get("numRowsTotal")) for o in operators)) if state_counted else None
        ),
        "late": int(sum(_num(o.get("numRowsDroppedByWatermark")) for o in operators)),
        # of `late`, the partial aggregates an aggregation dropped (not records)
        "late_aggregates": int(sum(_num(o.get("numRowsDroppedByWatermark")) for o in aggregates)),
        # the rows an aggregation removed from its state: in append mode, the windows it wrote
        "evicted": int(sum(_num(o.get("numRowsRemoved")) for o in aggregates)),
        "duplicates": int(
            sum(
                _num((o.get("customMetrics") or {}).get("numDroppedDuplicateRows"))
                for o in operators
            )
        )
        + timer_duplicates(observed, operators),
        "quarantined": int(_num(quality.get("quarantined"))),
        "checked": int(_num(quality.get("input"))),
        "reason": observed_reason(observed),
        "expectations": {k: int(v) for k, v in observed_sums(observed, "expectations").items()},
        "kafka_lag": total_lag(progress),  # records behind latest; None: no Kafka input
    }


def timer_duplicates(observed: Any, operators: list[dict[str, Any]]) -> int:
    """The duplicates a deduplication by timers dropped in one batch (slipstream/jvm/dedup.py):
    its rows in (`dedup_timers.in`), less its rows out, less the late rows dropped before it by
    the transformWithState operators (the first stateful operator a row meets drops it as late;
    a deduplication is placed first)."""
    rows_in = observed_sums(observed, f"{DEDUP_TIMERS_METRIC}.in").get("rows")
    if rows_in is None:
        return 0
    rows_out = observed_sums(observed, f"{DEDUP_TIMERS_METRIC}.out").get("rows", 0.0)
    late = sum(
        _num(o.get("numRowsDroppedByWatermark"))
        for o in operators
        if str(o.get("operatorName") or "").startswith("transformWithState")
    )
    return max(0, int(rows_in - rows_out - late))


def is_aggregate(operator: Any) -> bool:
    """Whether a stateful operator (Spark's `operatorName`) is an aggregation's: it counts
    partial aggregates dropped as late, where a deduplication or a join counts records."""
    name = str(operator or "")
    return name == "stateStoreSave" or name.startswith("sessionWindowStateStoreSave")


#: a batch (or run) of at least this many records, this share of them quarantined, says so
MOSTLY_QUARANTINED_MIN, MOSTLY_QUARANTINED_SHARE = 10, 0.9


def observed_reason(observed: Any) -> str | None:
    """One quarantine reason of the batch (`quality.reason`, of any input), or None."""
    if not isinstance(observed, dict):
        return None
    reasons = [
        fields.get("reason")
        for name, fields in sorted(observed.items())
        if (name == "quality" or str(name).startswith("quality.")) and isinstance(fields, dict)
    ]
    return next((r for r in reasons if isinstance(r, str) and r), None)


def mostly_quarantined(quarantined: int, checked: int, reason: str | None) -> str | None:
    """The warning for a batch or run that quarantined all or nearly all of its records: most
    often the input is bound to the wrong folder or read in the wrong format."""
    if checked < MOSTLY_QUARANTINED_MIN or quarantined < MOSTLY_QUARANTINED_SHARE * checked:
        return None
    every = "every record" if quarantined == checked else f"{quarantined:,} of {checked:,} records"
    return (
        f"{every} quarantined: is the input bound to the right folder and format "
        f"(--input NAME=PATH, --format)?" + (f" first reason: {reason}" if reason else "")
    )


class ConsoleReporter:
    """One line per micro-batch instead of Spark's logs."""

    def __init__(self, stream: TextIO | None = None, verbose: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.verbose = verbose

    def __call__(self, record: Record) -> None:
        if record["event"] == "terminated" and record.get("exception"):
            print(
                f"{record['query']}: FAILED: {failure_said(record['exception'])}",
                file=self.stream,
                flush=True,
            )
        if record["event"] != "progress":
            return
        s = progress_summary(record["progress"], record.get(STATE_COUNTED, True))
        if s["rows"] == 0 and not self.verbose and not s["state_rows"]:
            return
        wm = s["watermark"] or "-"
        if wm.startswith("1970-01-01"):
            wm = "-"
        parts = [
            f"{record['query']:<22} batch {s['batch']:>4}",
            f"{s['rows']:>8,} rows",
            f"{s['processed_rps']:>10,.0f} rows/s",
            f"{s['duration_s']:6.2f} s",
            f"watermark {wm}",
            "state -" if s["state_rows"] is None else f"state {s['state_rows']:,}",
            f"quarantined {s['quarantined']:,}",
            f"late {s['late']:,}",
        ]
        if s["duplicates"]:
            parts.append(f"duplicates {s['duplicates']:,}")
        if s["kafka_lag"] is not None:
            parts.append(f"kafka lag {s['kafka_lag']:,}")
        parts += [f"{rule} {n:,}" for rule, n in s["expectations"].items() if n]
        warning = mostly_quarantined(s["quarantined"], s["checked"], s["reason"])
        if warning:
            parts.append(f"WARNING {warning}")
        print(" | ".join(parts), file=self.stream, flush=True)
        if self.verbose:
            print(json.dumps(record["progress"], indent=1), file=self.stream, flush=True)
