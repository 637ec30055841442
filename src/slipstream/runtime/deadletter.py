"""The late-row dead-letter: the records Spark dropped as late, each with its reason and the
watermark it was judged by, in `STATE_DIR/late/PIPELINE/OUTPUT/batch-N.jsonl`.

Spark shows neither its watermark to a query's DataFrames nor the rows an operator drops, so the
dead-letter re-decides what Spark decided, after the fact and from the checkpoint: once output
query Q has committed batch N, its offset log says which files batch N read from each file
source (a Kafka input: which offset ranges of each topic it read, read again with a batch Kafka
read, late_rows.py) (`offsets/N` and `offsets/N-1`: the source's log offsets; `sources/I/K` or a
compacted `K.compact`: the paths), the batch's time (`offsets/N` `batchTimestampMs`) and the
watermark the batch judged late rows by (`offsets/N-1` `batchWatermarkMs`, 0 for batch 0). It
re-reads those files with Spark, with Q's own parse, event-time guard (at the batch's time) and
`drop` expectations, so a quarantined record is never also late, and keeps the rows the first
stateful operator's rule drops (late_plan.py). One line per late record: the raw record, the
input, the file, the reason (`late: ts 10:01:00Z <= watermark 10:05:00Z`), the event time, the
watermark (ISO UTC) and the batch. With `--dead-letter delta:DIR` each output's late records
are rows of a Delta table instead (same columns), a batch appended once with Delta's
`txnAppId` (the output's query id) and `txnVersion` (the batch).

It runs on the driver, in a thread of its own woken by each progress event of Q, and catches up
on every committed batch it has not handled (after a restart or a crash too): a batch file is
written whole (temporary file, then rename) and never rewritten; `.done` keeps the last batch
handled and the query id it belongs to. It never blocks or fails the query: a failure is a
warning in the log, and the batch is tried again at the next wake. A batch is bounded by the
trigger; its late rows reach the driver one partition at a time (`sinks.base.local_rows`: not
`DataFrame.toLocalIterator`, whose jobs Spark 4.3 keeps alive with their plans, issue 16).

A live run reads the batches waiting together, in one Spark job, at most every `LIVE_EVERY_S`
seconds: not a job a batch beside the query's own on the same cores. A file input's records
of those batches are parsed and judged in one plan, each tagged with its batch, time and
watermark (late_rows.tagged_records). A stop, or `process_all_available`, reads every
committed batch at once.

A batch is read again only when it may hold late rows: its progress reports how many rows its
stateful operators dropped by watermark (each late row of a deduplication or a join, each late
partial aggregate of a window aggregation), and a batch with 0 is skipped, so in-order input
costs no second read. A batch whose progress this run never saw (one before a restart, or the
last before a crash) is read again, as is one whose progress does not say."""

from __future__ import annotations

import functools
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.analysis.late import LatePlan
from slipstream.checkpoint.logs import batch_files, batch_offsets, committed, query_id
from slipstream.errors import disk_full
from slipstream.runtime.ingest_stage import bronze_dir
from slipstream.runtime.late_folder import MARK, PrivateFiles, private_dir, write_private
from slipstream.runtime.late_rows import (
    iso,
    kafka_late_rows,
    kafka_ranges,
    late_of_tagged,
    late_rows,
    reason,
    tagged_records,
)
from slipstream.sinks.base import local_rows
from slipstream.sinks.delta import append_once, committed_batch

if TYPE_CHECKING:
    from slipstream.runtime.bound import BoundOutput, Prepared

log = logging.getLogger(__name__)

#: a late record, as a line of `batch-N.jsonl` and a row of a `--dead-letter delta:DIR` table
LATE_SCHEMA = (
    "raw STRING, input STRING, source STRING, reason STRING, event_time STRING, "
    "watermark STRING, batch BIGINT, output STRING"
)
DONE = ".done"
LIVE_EVERY_S = 2.0  # a live run's rest after a catch-up: the batches meanwhile, in one job
BATCHES_A_JOB = 20  # at most (a catch-up after a restart reads them in groups)


def _local(path: str) -> Path:
    parsed = urlparse(path)
    return Path(unquote(parsed.path) if parsed.scheme in ("file", "") else path).resolve()


def _gone(path: str) -> bool:
    """A local file that is no longer there (remote paths: Spark's ignoreMissingFiles)."""
    return urlparse(path).scheme in ("file", "") and not _local(path).exists()


@dataclass
class Covered:
    """One output's dead-letter: its folder and its rules."""

    output: BoundOutput
    plan: LatePlan
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
    thread); `catch_up` writes every committed batch not yet handled; `close` ends the thread
    after one last catch-up."""

    def __init__(self, spark: SparkSession, prepared: Prepared, covered: list[Covered]) -> None:
        self.spark = spark
        self.prepared = prepared
        self.covered = covered
        self.written = 0  # late records written by this run
        self._names = {c.output.ctx.query_name for c in covered}
        self._lock = threading.Lock()
        self._seen = threading.Lock()  # `_dropped`, written by the listener's thread
        self._wake = threading.Event()
        self._rest = threading.Event()  # set by close: no more resting
        self._closed = False
        self._thread: threading.Thread | None = None
        self._warned: set[str] = set()
        # (query, batch) -> rows Spark's stateful operators dropped, from the batch's progress
        self._dropped: dict[tuple[str, int], int] = {}
        self.reread = 0  # batches whose files were read again
        self.skipped = 0  # batches Spark reported nothing late in: nothing to read again
        # the last batch each output committed before this run: a later one is this run's, and
        # its progress (with its drop count) is on its way to `handle`
        self._before = {
            c.output.ctx.query_name: max(committed(c.output.ctx.checkpoint), default=-1)
            for c in covered
        }

    def start(self) -> DeadLetter:
        if self.covered:
            self._wake.set()  # catch up at once on what an earlier run left
            self._thread = threading.Thread(target=self._loop, name="late-dead-letter", daemon=True)
            self._thread.start()
        return self

    def handle(self, record: dict[str, Any]) -> None:
        if record.get("event") == "progress" and record.get("query") in self._names:
            dropped = _dropped(record.get("progress"))
            if dropped is not None:
                with self._seen:
                    self._dropped[str(record["query"]), dropped[0]] = dropped[1]
            self._wake.set()

    def _loop(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            if not self._closed:
                self.catch_up(live=True)
                self._rest.wait(LIVE_EVERY_S)  # not a synchronisation: a cadence

    def close(self) -> None:
        self._closed = True
        self._rest.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=600)
        self.catch_up()

    def catch_up(self, *, live: bool = False) -> int:
        """Write the batches committed and not yet handled; the late records written. `live`
        (the thread, woken by a progress): a batch of this run whose progress has not come yet
        waits for it; otherwise (at a stop, after `process_all_available`) it is read again."""
        with self._lock:
            before = self.written
            for cover in self.covered:
                try:
                    self._catch_up(cover, live)
                except Exception as exc:  # never the query's failure: tried again next time
                    full = disk_full(str(exc), cover.folder)
                    why = f"[{full.code}] {full.message}" if full else _why(exc)
                    log.warning("late-row dead-letter of %s: %s (tried again at the next "
                                "batch)", cover.output.ctx.query_name, why)  # fmt: skip
            return self.written - before

    def _catch_up(self, cover: Covered, live: bool) -> None:
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
        name = cover.output.ctx.query_name
        waiting: list[int] = []  # to read again, together
        for batch in committed(checkpoint):
            if batch <= last:
                continue
            with self._seen:  # dropped once handled (below), so a failed read is tried again
                dropped = self._dropped.get((name, batch))
            if dropped is None and live and batch > self._before.get(name, -1):
                break  # committed, its progress not delivered yet: the next wake
            if dropped == 0:
                self.skipped += 1  # no operator dropped a row: nothing can be late
            elif cover.delta:
                self.written += self._append_batch(cover, batch, qid)
            elif not _target(cover, batch).exists():
                waiting.append(batch)
            if len(waiting) == BATCHES_A_JOB:
                self.written += self._write_batches(cover, waiting, _target)
                waiting = []
            if not waiting:
                cover.mark_done(qid, batch)
            last = batch
        if waiting:
            self.written += self._write_batches(cover, waiting, _target)
            cover.mark_done(qid, last)
        with self._seen:  # a progress that came after its batch was handled
            for key in [k for k in self._dropped if k[0] == name and k[1] <= last]:
                del self._dropped[key]

    def _append_batch(self, cover: Covered, batch: int, qid: str) -> int:
        """`--dead-letter delta:DIR`: the batch's late records appended to the output's Delta
        table once (`txnAppId` the output's query id, `txnVersion` the batch), through a
        JSON-lines file beside it, written and read as the files' dead-letter is (not a hidden
        name: Spark reads nothing of a file whose name starts with '.' or '_')."""
        held = committed_batch(cover.folder, qid)
        if held is not None and batch <= held:
            return 0  # appended before a crash that came before `.done`
        staging = cover.folder.parent / f"staging-{cover.folder.name}-batch-{batch}.jsonl"
        try:
            count = self._write_batches(cover, [batch], lambda _cover, _batch: staging)
            if count:
                reader = self.spark.read.schema(LATE_SCHEMA).option("maxStringLen", str(2**31 - 1))
                rows = reader.json(str(staging.resolve()))
                append_once(rows, cover.folder, qid, batch)
            return count
        finally:
            staging.unlink(missing_ok=True)

    def _write_batches(
        self, cover: Covered, batches: list[int], target: Callable[[Covered, int], Path]
    ) -> int:
        """`batches` read again in one Spark job (a union: each file input's records of all
        of them in one plan, the other inputs' a frame a batch); each batch's late records into
        its `target` file (none when it has none); the records written."""
        frames: list[DataFrame] = []
        marks: dict[int, int] = {}
        tagged: dict[int, list[DataFrame]] = {}  # a rule's text records, by batch: judged once
        for batch in batches:
            found = self._batch_frames(cover, batch, tagged)
            if found is not None:
                marks[batch] = found[0]
                frames += found[1]
        for index, raw in tagged.items():
            rule = cover.plan.rules[index]
            late = late_of_tagged(_union(raw), self.prepared.inputs[rule.input], rule)
            frames.append(late.withColumn("rule", F.lit(index)))
        self.reread += len(batches)
        if not frames:
            return 0
        rows = local_rows(_union(frames))
        with PrivateFiles() as files:  # a batch's rows may come from several rules' reads
            for row in rows:
                batch = int(row["batch"])
                files.write(target(cover, batch), self._line(cover, batch, row, marks[batch]))
        return files.lines

    def _batch_frames(
        self, cover: Covered, batch: int, tagged: dict[int, list[DataFrame]]
    ) -> tuple[int, list[DataFrame]] | None:
        """The watermark batch `batch` judged by and, for each late rule, its rows that the
        rule drops (with `batch` and the rule's index); a file input's text records go to
        `tagged` instead, by rule, to be judged with the other batches'. None when Spark
        purged its logs."""
        checkpoint = cover.output.ctx.checkpoint
        try:
            files = batch_files(checkpoint, batch)
            at = batch_offsets(checkpoint, batch)
            watermark_ms = batch_offsets(checkpoint, batch - 1).watermark_ms if batch > 0 else 0
        except FileNotFoundError as exc:  # Spark purged them (it keeps the last 100 batches)
            log.warning("late-row dead-letter of %s: batch %d not written, its logs are gone "
                        "(%s)", cover.output.ctx.query_name, batch, exc)  # fmt: skip
            return None
        frames: list[tuple[int, DataFrame]] = []  # (the rule's index, its late rows)
        for index, rule in enumerate(cover.plan.rules):
            bound = self.prepared.inputs[rule.input]
            settings = self.prepared.settings
            staged = bound.staged  # the output read bronze files, even of a topic
            if not staged and bound.source is not None and bound.source.rereads_offsets:
                topic = bound.source.topic(bound.binding, bound.source_options)
                assert topic is not None  # a source that re-reads offsets reads a topic
                ranges = kafka_ranges(checkpoint, batch, topic)  # the batch's, every topic
                if ranges:
                    late = kafka_late_rows(self.spark, bound, rule, topic, ranges, at,
                                           watermark_ms)  # fmt: skip
                    frames.append((index, late))
                continue
            where = bronze_dir(settings, bound) if staged else bound.binding.path
            folder = _local(str(where))
            # a file deleted since (the query skipped it if it was gone before its read)
            start = self.prepared.start_from  # --from-checkpoint: never read by this query
            skip = start.skips(rule.input) if start is not None else frozenset()
            mine = [
                f for f in files if folder in _local(f).parents and not _gone(f) and f not in skip
            ]
            schema = self.prepared.bronze.get(rule.input) if staged else None
            if mine:
                late = late_rows(self.spark, bound, rule, mine, at, watermark_ms, schema)
                if late is None:
                    raw = tagged_records(self.spark, mine, batch, at, watermark_ms)
                    tagged.setdefault(index, []).append(raw)
                else:
                    frames.append((index, late))
        tags = {"batch": F.lit(batch).cast("long")}
        return watermark_ms, [late.withColumns({**tags, "rule": F.lit(i)}) for i, late in frames]

    def _line(self, cover: Covered, batch: int, row: Any, watermark_ms: int) -> str:
        rule = cover.plan.rules[row["rule"]]
        return json.dumps(
            {
                "raw": row["raw"],
                "input": rule.input,
                "source": row["source"],
                "reason": reason(rule, row["at"], row["judged"], watermark_ms),
                "event_time": iso(row["at"]),
                "watermark": iso(watermark_ms * 1000),
                "batch": batch,
                "output": cover.output.name,
            },
            ensure_ascii=False,
        )


def _union(frames: list[DataFrame]) -> DataFrame:
    return functools.reduce(DataFrame.unionByName, frames)


def _target(cover: Covered, batch: int) -> Path:
    return cover.folder / f"batch-{batch}.jsonl"


def _dropped(progress: Any) -> tuple[int, int] | None:
    """(batch, rows dropped by watermark over every stateful operator) from a progress, or
    None when it does not say (no stateful operator, or one without the count): then the batch
    is read again. Spark counts each late input row of a deduplication or a join, and a late
    partial aggregate of a window aggregation, so 0 means that no row of the batch was late."""
    if not isinstance(progress, dict) or not isinstance(progress.get("batchId"), int):
        return None
    operators = progress.get("stateOperators")
    if not isinstance(operators, list) or not operators:
        return None
    counts = [op.get("numRowsDroppedByWatermark") for op in operators if isinstance(op, dict)]
    if len(counts) != len(operators) or not all(isinstance(c, int) for c in counts):
        return None
    return int(progress["batchId"]), sum(counts)


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
        folder = root / name
        for made in (root.parent, root, folder):
            private_dir(made)
        if not (root / MARK).is_file():
            write_private(root / MARK, iter(["slipstream late-row dead-letter"]))
        covered.append(Covered(prepared.outputs[name], found, folder, settings.late_delta))
    return DeadLetter(spark, prepared, covered)


def _why(exc: BaseException) -> str:
    """A failure in one line: its first, and for a Java error (`An error occurred while
    calling oN.javaToPython.`, which says nothing) the Java exception under it."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    cause = next((line for line in lines[1:] if "Exception" in line or "Error" in line), None)
    return f"{lines[0]} {cause}" if cause else lines[0]
