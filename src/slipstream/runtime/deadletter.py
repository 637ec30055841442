"""The late-row dead-letter: the records Spark dropped as late, each with its reason and the
watermark it was judged by, in `STATE_DIR/late/PIPELINE/OUTPUT/batch-N.jsonl`.

Spark shows neither its watermark to a query's DataFrames nor the rows an operator drops, so
the query that reads the records decides, beside Spark, which rows its first stateful operator
will drop (runtime/late_plan.py reads the rule from the plan; runtime/late_rows.py puts the
JVM function that applies it below that operator): its tasks write each such row, with the
watermark the batch judges by (`offsets/N-1` `batchWatermarkMs`, 0 for batch 0), into task
files `OUTPUT/_tasks/INPUT/batch-N.APP.part-P.json`. The records are read and parsed once; a
quarantined record never reaches the function, so it is never also late. One line per late
record: the raw record, the input, the file or topic, the reason (`late: ts 10:01:00Z <=
watermark 10:05:00Z`), the event time, the watermark (ISO UTC) and the batch.

This module gathers them: once output query Q has committed batch N, the task files of the
application that ran N last (a batch run again after a crash writes the same records under its
new application) become `batch-N.jsonl`, written whole (temporary file, then rename) and never
rewritten; `.done` keeps the last batch handled and the query id it belongs to, and the task
files of handled batches are removed. With `--dead-letter delta:DIR` each output's late
records are rows of a Delta table instead (same columns), a batch appended once with Delta's
`txnAppId` (the output's query id) and `txnVersion` (the batch).

It runs on the driver, in a thread of its own woken by each progress event of Q, and catches up
on every committed batch it has not handled (after a restart or a crash too). It never blocks or
fails the query: a failure is a warning in the log, and the batch is tried again at the next
wake. A stop, or `process_all_available`, gathers every committed batch at once."""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import SparkSession

from slipstream.checkpoint.logs import committed, query_id
from slipstream.errors import disk_full
from slipstream.runtime.late_folder import MARK, private_dir, write_private
from slipstream.runtime.late_rows import TASKS, late_folder
from slipstream.sinks.delta import append_once, committed_batch
from slipstream.sinks.quarantine import last_runs, task_files

if TYPE_CHECKING:
    from slipstream.runtime.bound import BoundOutput, Prepared

log = logging.getLogger(__name__)

#: a late record, as a line of `batch-N.jsonl` and a row of a `--dead-letter delta:DIR` table
LATE_SCHEMA = (
    "raw STRING, input STRING, source STRING, reason STRING, event_time STRING, "
    "watermark STRING, batch BIGINT, output STRING"
)
DONE = ".done"
_HIDDEN = re.compile(r"\.batch-(\d+)\..+\.tmp")  # a task's file until it succeeds


@dataclass
class Covered:
    """One output's dead-letter: its folder (its rules are in its query's settings)."""

    output: BoundOutput
    folder: Path
    delta: bool = False  # `--dead-letter delta:DIR`: `folder` is a Delta table

    def done(self) -> tuple[str | None, int]:
        try:
            data = json.loads((self.folder / DONE).read_text())
            return data.get("query_id"), int(data["batch"])
        except (OSError, ValueError, KeyError, TypeError):
            return None, -1

    def mark_done(self, qid: str, batch: int) -> None:
        write_private(self.folder / DONE, iter([json.dumps({"query_id": qid, "batch": batch})]))


class DeadLetter:
    """The dead-letter of a run's outputs: `handle` is a listener handler (it only wakes the
    thread); `catch_up` gathers every committed batch not yet handled; `close` ends the thread
    after one last catch-up."""

    def __init__(self, spark: SparkSession, prepared: Prepared, covered: list[Covered]) -> None:
        self.spark = spark
        self.prepared = prepared
        self.covered = covered
        self.written = 0  # late records written by this run
        self._names = {c.output.ctx.query_name for c in covered}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._warned: set[str] = set()

    def start(self) -> DeadLetter:
        if self.covered:
            self._wake.set()  # catch up at once on what an earlier run left
            self._thread = threading.Thread(target=self._loop, name="late-dead-letter", daemon=True)
            self._thread.start()
        return self

    def handle(self, record: dict[str, Any]) -> None:
        if record.get("event") == "progress" and record.get("query") in self._names:
            self._wake.set()

    def _loop(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            if not self._closed:
                self.catch_up()

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=600)
        self.catch_up()

    def catch_up(self) -> int:
        """Gather the batches committed and not yet handled; the late records written."""
        with self._lock:
            before = self.written
            for cover in self.covered:
                try:
                    self._catch_up(cover)
                except Exception as exc:  # never the query's failure: tried again next time
                    full = disk_full(str(exc), cover.folder)
                    why = f"[{full.code}] {full.message}" if full else _why(exc)
                    log.warning("late-row dead-letter of %s: %s (tried again at the next "
                                "batch)", cover.output.ctx.query_name, why)  # fmt: skip
            return self.written - before

    def _catch_up(self, cover: Covered) -> None:
        checkpoint = cover.output.ctx.checkpoint
        qid = query_id(checkpoint)
        if qid is None:
            return
        owner, last = cover.done()
        if owner is not None and owner != qid:
            name = cover.output.ctx.query_name
            if name not in self._warned:
                self._warned.add(name)
                log.warning("late-row dead-letter %s belongs to another checkpoint (query %s, "
                            "this one %s): nothing written; give this run its own "
                            "--dead-letter DIR, or `slipstream reset %s --outputs` starts both "
                            "over", cover.folder, owner, qid,
                            self.prepared.pipeline.name)  # fmt: skip
            return
        folders = [f for f in sorted((cover.folder / TASKS).glob("*")) if f.is_dir()]
        tasks: list[tuple[int, Path]] = []  # every application's, of every input
        runs: dict[int, list[Path]] = {}  # a batch's files of the application that ran it last
        for folder in folders:  # a folder per input
            found = task_files(folder)
            tasks += found
            for batch, paths in last_runs(found).items():
                runs.setdefault(batch, []).extend(paths)
        handled = last
        for batch in committed(checkpoint):
            if batch <= handled:
                continue
            files = runs.get(batch, [])
            if cover.delta:
                self.written += self._append_batch(cover, batch, qid, files)
            elif files and not _target(cover, batch).exists():
                self.written += write_private(_target(cover, batch), _lines(files))
            handled = batch
        if handled > last:
            cover.mark_done(qid, handled)
        for batch, path in tasks + [t for f in folders for t in _left_by_tasks(f)]:
            if batch <= handled:  # every application's, once its batch is handled
                path.unlink(missing_ok=True)

    def _append_batch(self, cover: Covered, batch: int, qid: str, files: list[Path]) -> int:
        """`--dead-letter delta:DIR`: the batch's late records appended to the output's Delta
        table once (`txnAppId` the output's query id, `txnVersion` the batch)."""
        held = committed_batch(cover.folder, qid)
        if not files or (held is not None and batch <= held):
            return 0  # none, or appended before a crash that came before `.done`
        reader = self.spark.read.schema(LATE_SCHEMA).option("maxStringLen", str(2**31 - 1))
        append_once(reader.json([str(f.resolve()) for f in files]), cover.folder, qid, batch)
        return sum(1 for _ in _lines(files))


def _lines(files: list[Path]) -> Iterator[str]:
    """The lines of a batch's task files, in order."""
    for path in files:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    yield line.rstrip("\n")


def _left_by_tasks(folder: Path) -> list[tuple[int, Path]]:
    """The hidden files of tasks that never finished (a process killed), by batch."""
    found = [(_HIDDEN.fullmatch(p.name), p) for p in folder.glob(".batch-*.tmp")]
    return [(int(m[1]), p) for m, p in found if m is not None]


def _target(cover: Covered, batch: int) -> Path:
    return cover.folder / f"batch-{batch}.jsonl"


def dead_letter(spark: SparkSession, prepared: Prepared) -> DeadLetter:
    """The run's dead-letter: every output with a late rule (`prepared.late`, read from the
    plans by `runtime.build`; none with `--late-rows false`). Its folders are made 0700 and
    marked as slipstream's."""
    covered = []
    settings = prepared.settings
    root = settings.late_root
    for name, found in prepared.late.items():
        if not found.rules or not prepared.settings.late_rows:
            continue
        folder = late_folder(settings, name)
        for made in (root.parent, root, folder, folder / TASKS):
            private_dir(made)
        if not (root / MARK).is_file():
            write_private(root / MARK, iter(["slipstream late-row dead-letter"]))
        covered.append(Covered(prepared.outputs[name], folder, settings.late_delta))
    return DeadLetter(spark, prepared, covered)


def _why(exc: BaseException) -> str:
    """A failure in one line: its first, and for a Java error (`An error occurred while
    calling oN.javaToPython.`, which says nothing) the Java exception under it."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    cause = next((line for line in lines[1:] if "Exception" in line or "Error" in line), None)
    return f"{lines[0]} {cause}" if cause else lines[0]
