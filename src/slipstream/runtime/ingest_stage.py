"""The ingest stage (`--ingest-stage true`, issue 26 part 1): each stream input that parses is
read and parsed ONCE, by one ingest query, and every output reads its typed rows.

The ingest query of input I (named `PIPELINE.quarantine.I`, where the quarantine query was)
reads the source, parses it (`runtime.inputs.read_guarded`: parse and event-time guard, judged
once), routes the `drop` expectations, and in one `foreachBatch` writes, for batch N:

1. the valid typed rows (with `_raw` and `_source`, which the dead-letter needs) as Parquet to
   `STATE_DIR/bronze/PIPELINE/I/batch=N/`: written to a hidden folder (`.tmp-batch=N-...`,
   which Spark's file source never lists) and renamed in whole, so a reader sees all of batch N
   or none of it;
2. the rejected records, in the quarantine's layout (raw, reason, source, quarantined_at), as one
   JSON-lines file `QUARANTINE/I/batch-N.json`, the same way (hidden file, then rename).

A replayed batch N (a crash after the writes and before Spark's commit of N) reads the same
records (the source's offsets for N are logged before the batch runs): a part already renamed in
is kept and not written again, so nothing doubles and nothing is lost. The batch is parsed once
(cached) for both writes; `observe("quality")` on the ingest query counts `input`, `quarantined`
and `valid` per batch, so `valid + quarantined = records read` holds per batch and the listener
sums them as it summed the quarantine query's.

The outputs read `spark.readStream.schema(BRONZE).parquet(bronze)`: Spark's file source lists
the `batch=N` folders (a partition column `batch`, dropped before the pipeline sees the rows),
and takes new files in modification-time order; the pipeline's `build` still receives typed
frames with the columns it received before; the late-row function judges the typed rows
(runtime/late_rows.py).

When the outputs run: under a finite trigger (available-now, once) after the ingest queries
have ended, back to back over bronze, one bronze batch per output batch when the source bounds
its batches (`per_batch`): the batches, watermarks and late rows of a direct read. Under a live
trigger beside them: an output that catches up with its ingest query runs the no-data batch
Spark runs for a new watermark before the next batch, which then judges late rows by that
watermark (a direct read of a backlog runs its batches back to back and judges by the one
before). A live read of a source that trickles does the same; either way a row within the
watermark's delay is never dropped, and the dead-letter holds every row that was.

Not applied (the path of today: every query reads and parses): socket sources (not replayable),
Spark Connect (foreachBatch runs in a server-side worker), inputs that do not parse.

`--ingest-stage auto` (the default, `decide`) goes on with a checkpoint as it was made. Asked
for explicitly, a checkpoint made without the ingest stage is refused with
CHECKPOINT_FROM_OLDER_VERSION (and one made with it, by a run without it,
CHECKPOINT_FROM_INGEST_STAGE): its offsets name the raw files, not bronze."""

from __future__ import annotations

import os
import shutil
import signal
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType

from slipstream.errors import CheckpointError, ConfigError
from slipstream.ingest.parse import RAW, REASON
from slipstream.ingest.quarantine import QUALITY_METRICS, rejected
from slipstream.sinks.base import FAULT_ENV
from slipstream.sinks.delta import append_once

if TYPE_CHECKING:
    from slipstream.runtime.bound import BoundInput, BoundOutput, Prepared
    from slipstream.settings.config import Settings

BATCH = "batch"  # the partition column of bronze's `batch=N` folders
MARK = ".slipstream-ingest-stage"  # in each checkpoint a run with the ingest stage made
OLDER = "CHECKPOINT_FROM_OLDER_VERSION"
NEWER = "CHECKPOINT_FROM_INGEST_STAGE"


def applies(settings: Settings, bound: BoundInput) -> bool:
    """Whether input `bound` goes through the ingest stage in this run."""
    if not settings.ingest_stage or settings.remote is not None:
        return False
    if settings.trigger.kind in ("real-time", "continuous"):
        return False  # the outputs read the source itself (Kafka), record by record
    if bound.source is None or not bound.parses:
        return False
    return bound.source.stageable


def decide(settings: Settings, outputs: dict[str, BoundOutput]) -> bool:
    """`--ingest-stage auto` (the default): whether this run stages its inputs. A checkpoint
    that has planned a batch goes on as it was made (its mark); a new one stages only when a
    Delta quarantine asks for the ingest query's writer. Otherwise every output reads its
    inputs itself: since the quarantine and the dead-letter are written by the outputs' own
    read, the stage's Parquet write and read of every valid row cost more than the parses it
    saves, with three outputs on an input too (docs/benchmarks.md section 40, available-now,
    staged / not: `sensors` 0.90x the events/s, `ads` 0.95x, both at more CPU; live, the hop
    made latency 1.43-1.71x worse, section 23). `true`/`false` are taken as given."""
    if settings.ingest_stage is not None:
        return settings.ingest_stage
    checkpoints = [Path(out.ctx.checkpoint) for out in outputs.values()]
    made = [c for c in checkpoints if _has_run(c)]
    if made:
        return any((c / MARK).is_file() for c in made)
    return settings.quarantine_delta  # written by the ingest query's batch writer


def refuse_unstaged_delta(settings: Settings, inputs: dict[str, BoundInput]) -> None:
    """`--quarantine delta:DIR` is written a batch at a time, in one Delta commit each, by the
    ingest stage's query: an input that parses and is not staged has no such writer."""
    if not settings.quarantine_delta:
        return
    for b in inputs.values():
        if b.source is not None and b.parses and not b.staged:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--quarantine delta:...: input {b.name} is not read through the ingest stage "
                "in this run, and only the ingest stage's query writes a Delta quarantine",
                "give a folder: --quarantine DIR (JSON files), or run with --ingest-stage true "
                "(not with real-time mode, Spark Connect or a socket source)",
            )


def bronze_dir(settings: Settings, bound: BoundInput) -> Path:
    return settings.bronze_root / bound.name


def bronze_schema(valid: DataFrame) -> StructType:
    """The schema bronze is read with: the valid rows' columns, then the partition column."""
    return StructType([*valid.schema.fields, StructField(BATCH, LongType(), True)])


def per_batch(bound: BoundInput) -> bool:
    """A source that bounds its batches (`--max-files-per-trigger`, a topic's
    `maxOffsetsPerTrigger`): bronze is then written one file per batch and read one file per
    output batch, so the outputs' batches are the ingest query's, and the watermark judges late
    rows at the same boundaries as without the stage."""
    topic = bound.binding.topic
    if topic is not None and "maxOffsetsPerTrigger" in dict(topic.options):
        return True
    return bool(bound.source_options.get("max_files_per_trigger"))


def read_bronze(spark: SparkSession, folder: Path, schema: StructType, one: bool) -> DataFrame:
    """The typed stream of an input, as its outputs read it (a stream of `batch=N` folders);
    `one`: one bronze batch per output batch (`per_batch`)."""
    folder.mkdir(parents=True, exist_ok=True)
    reader = spark.readStream.schema(schema)
    if one:
        reader = reader.option("maxFilesPerTrigger", 1)
    return reader.parquet(str(folder))


def typed_rows(bronze: DataFrame) -> DataFrame:
    """What a pipeline's build receives from bronze: the columns it received before."""
    return bronze.drop(RAW, BATCH)


def _fault(point: str, batch_id: int) -> None:
    """Crash tests: SLIPSTREAM_FAULT=point@batch SIGKILLs this process there
    (`after-bronze`: batch N's rows are in bronze, its quarantine file not yet)."""
    if os.environ.get(FAULT_ENV) == f"{point}@{batch_id}":
        os.kill(os.getpid(), signal.SIGKILL)


def _sweep(folder: Path, prefix: str) -> None:
    """Hidden leftovers of a write a crash interrupted (never read: hidden names)."""
    for leftover in folder.glob(prefix + "*"):
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


@dataclass
class IngestBatch:
    """The ingest query's `foreachBatch`: batch N -> bronze `batch=N`, then the quarantine's
    `batch-N.json`; each part is skipped when a replay finds it already renamed in."""

    bronze: Path
    quarantine: Path
    one_file: bool = False  # `per_batch`: batch N is one Parquet file (from the cache)
    #: `--quarantine delta:DIR`: the quarantine is a Delta table, batch N appended once
    #: (Delta's txnAppId/txnVersion, the app being the input's ingest stage)
    delta_app: str | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        self.bronze.mkdir(parents=True, exist_ok=True)
        self.quarantine.mkdir(parents=True, exist_ok=True)
        done_bronze = self.bronze / f"{BATCH}={batch_id}"
        done_quarantine = self.quarantine / f"batch-{batch_id}.json"
        batch.persist()  # parsed once for both writes (and for `observe`)
        try:
            batch.count()  # the observed counts, even when a replay writes nothing
            if not done_bronze.exists():
                tmp = self.bronze / f".tmp-{BATCH}={batch_id}-{uuid.uuid4().hex}"
                valid = batch.filter(F.col(REASON).isNull()).drop(REASON)
                if self.one_file:
                    valid = valid.coalesce(1)
                valid.write.parquet(str(tmp))
                os.replace(tmp, done_bronze)
            _fault("after-bronze", batch_id)
            if self.delta_app is not None:
                append_once(rejected(batch), self.quarantine, self.delta_app, batch_id)
            elif not done_quarantine.exists():
                self._quarantine(batch, batch_id, done_quarantine)
        finally:
            batch.unpersist()

    def _quarantine(self, batch: DataFrame, batch_id: int, target: Path) -> None:
        tmp = self.quarantine / f".tmp-batch-{batch_id}-{uuid.uuid4().hex}"
        rejected(batch).coalesce(1).write.option("ignoreNullFields", "false").json(str(tmp))
        parts = sorted(tmp.glob("part-*"))
        hidden = self.quarantine / f".batch-{batch_id}.json.tmp"
        if parts:
            os.replace(parts[0], hidden)
        else:
            hidden.write_bytes(b"")
        os.replace(hidden, target)
        shutil.rmtree(tmp, ignore_errors=True)


def ingest_batch(settings: Settings, bound: BoundInput) -> IngestBatch:
    assert bound.quarantine is not None
    folder = bronze_dir(settings, bound)
    for where in (folder, bound.quarantine):
        if where.is_dir():
            _sweep(where, ".tmp-")
    app = None
    if settings.quarantine_delta:
        app = f"slipstream.ingest.{settings.pipeline}.{bound.name}"
    return IngestBatch(folder, bound.quarantine, per_batch(bound), app)


def quality(parsed: DataFrame) -> DataFrame:
    """The ingest query's per-batch counts: every record read, quarantined, valid, and one
    of the batch's reasons (the least, as the quarantine query's: `mostly_quarantined`)."""
    return parsed.observe(
        QUALITY_METRICS,
        F.count(F.lit(1)).alias("input"),
        F.count(F.col(REASON)).alias("quarantined"),
        F.count(F.when(F.col(REASON).isNull(), 1)).alias("valid"),
        F.min(F.col(REASON)).alias("reason"),
    )


def _has_run(checkpoint: Path) -> bool:
    """Whether a checkpoint has planned a batch (an `offsets/N` file): one with only its
    `metadata`, or the temp file of a kill inside its first offset write, has read nothing."""
    offsets = Path(checkpoint) / "offsets"
    return offsets.is_dir() and any(p.name.isdigit() for p in offsets.iterdir())


def check_checkpoints(prepared: Prepared, staged: set[str]) -> None:
    """Refuse a checkpoint made by a run of the other kind, before anything starts: with the
    ingest stage, an output's offsets must name bronze folders; without it, the raw files.
    A fresh checkpoint gets the mark when it is made with the ingest stage."""
    pipeline = prepared.pipeline.name
    for out in prepared.outputs.values():
        reads = tuple(prepared.inputs) if out.is_output else out.reads
        if not any(name in staged for name in reads):
            continue
        checkpoint = Path(out.ctx.checkpoint)
        if _has_run(checkpoint) and not (checkpoint / MARK).is_file():
            raise CheckpointError(
                OLDER,
                f"the checkpoint of {out.ctx.query_name} ({checkpoint}) was made before the "
                "ingest stage: its offsets name the raw input files, not the typed rows in "
                f"{prepared.settings.bronze_root}; it is not restarted from zero",
                f"run with --ingest-stage false to go on from it, or `slipstream reset {pipeline}"
                "` (or a new --checkpoint) to start over with the ingest stage",
            )
    if not staged:
        for out in prepared.outputs.values():
            checkpoint = Path(out.ctx.checkpoint)
            if (checkpoint / MARK).is_file():
                raise CheckpointError(
                    NEWER,
                    f"the checkpoint of {out.ctx.query_name} ({checkpoint}) was made with the "
                    "ingest stage: its offsets name typed rows in bronze, not raw files",
                    f"run with --ingest-stage true, or `slipstream reset {pipeline}` (or a new "
                    "--checkpoint) to start over without it",
                )


def mark_checkpoints(prepared: Prepared, staged: set[str]) -> None:
    for out in prepared.outputs.values():
        reads = tuple(prepared.inputs) if out.is_output else out.reads
        if any(name in staged for name in reads):
            checkpoint = Path(out.ctx.checkpoint)
            checkpoint.mkdir(parents=True, exist_ok=True)
            (checkpoint / MARK).write_text("slipstream ingest stage: outputs read bronze\n")
