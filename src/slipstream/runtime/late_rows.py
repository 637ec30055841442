"""The rows of one committed batch that Spark dropped as late, read again (the dead-letter's
re-read, runtime/deadletter.py): a file input's files of the batch, or a Kafka input's offset
ranges of the batch; then the input's own parse, event-time guard at the batch's time and `drop`
expectations, as in the query, and the first stateful operator's rule (late_plan.py).

A Kafka input's batch is the offset range between the source's offsets in `offsets/N-1` (for
batch 0: the source's initial offsets, `sources/I/0`) and in `offsets/N` (Spark's offsets are
the next record to read, so the range ends before them), read with a batch Kafka read
(`startingOffsets`/`endingOffsets` as JSON per partition)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from slipstream.analysis.late import LateRule
from slipstream.checkpoint.logs import BatchOffsets, batch_offsets
from slipstream.core.kafka_url import KafkaTopic
from slipstream.ingest.expectations import route
from slipstream.ingest.parse import RAW, REASON, SOURCE
from slipstream.runtime.inputs import parse_input
from slipstream.sources.kafka import Ranges, read_ranges
from slipstream.sources.parquet_files import parquet_rows

if TYPE_CHECKING:
    from slipstream.runtime.bound import BoundInput


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso(micros: int) -> str:
    """Microseconds since the epoch as ISO UTC (`2018-03-02T10:03:00Z`; year 0001 too)."""
    moment = (_EPOCH + timedelta(microseconds=micros)).replace(tzinfo=None)
    return moment.isoformat(timespec="microseconds" if micros % 10**6 else "seconds") + "Z"


def reason(rule: LateRule, at: int, judged: int, watermark_ms: int) -> str:
    """A late row's reason, as its dead-letter line says it."""
    mark = iso(watermark_ms * 1000)
    if rule.window is not None:
        return f"late: {rule.column} {iso(at)} in a window ending {iso(judged)} <= watermark {mark}"
    return f"late: {rule.column} {iso(at)} <= watermark {mark}"


def late_rows(
    spark: SparkSession, bound: BoundInput, rule: LateRule, files: list[str], at: BatchOffsets,
    watermark_ms: int, bronze: StructType | None = None,
) -> DataFrame | None:  # fmt: skip
    """The rows of `files` that `rule` drops against `watermark_ms`: the input parsed,
    guarded at the batch's time and routed by its `drop` expectations as in the query; with
    the ingest stage (`bronze`: the schema its typed rows are read with), `files` are the
    batch's bronze files, judged once already. None for a file input of text records (json,
    csv, text): those are read with `tagged_records` and judged together (`late_of_tagged`)."""
    spec = bound.spec
    reader = spark.read.option("ignoreMissingFiles", "true")
    if bronze is not None:  # the ingest stage judged them once: typed rows, by batch
        valid = reader.schema(bronze).parquet(*files)
        return _late(valid, rule, F.lit(watermark_ms))
    if bound.binding.format == "parquet":  # judged as the stream judged them
        assert spec.schema is not None
        raw = parquet_rows(reader.format("binaryFile").load(files), spec.schema, spec.required)
        return judged(raw, "parquet", bound, rule, at, watermark_ms)
    return None


def tagged_records(
    spark: SparkSession, files: list[str], batch: int, at: BatchOffsets, watermark_ms: int
) -> DataFrame:
    """A batch's files of text records (value, source), each record's source tagged with the
    batch, its time and the watermark it judged by (`BATCH|TIME_MS|WATERMARK_MS|path`), so that
    the records of several batches are parsed, guarded and judged in one plan
    (`late_of_tagged`): its Python cost is paid once a catch-up, not once a batch."""
    raw = spark.read.option("ignoreMissingFiles", "true").format("text").load(files)
    tag = F.lit(f"{batch}|{at.timestamp_ms}|{watermark_ms}|")
    return raw.select(F.col("value"), F.concat(tag, F.col("_metadata.file_path")).alias(SOURCE))


def late_of_tagged(raw: DataFrame, bound: BoundInput, rule: LateRule) -> DataFrame:
    """`tagged_records` of one or more batches (a union) -> the rows `rule` drops, each against
    its own batch's watermark, with its `batch`."""
    records = parse_input(raw, bound.binding.format, bound.spec)
    tags = F.split(F.col(SOURCE), r"\|", 4)
    records = records.withColumns(
        {
            "_batch": tags[0].cast("long"),
            "_at_ms": tags[1].cast("long"),
            "_watermark_ms": tags[2].cast("long"),
            SOURCE: tags[3],
        }
    )
    if bound.guard is not None:
        records = bound.guard.apply(records, F.timestamp_millis(F.col("_at_ms")))
    valid = route(records, bound.expectations).filter(F.col(REASON).isNull())
    return _late(valid, rule, F.col("_watermark_ms"), F.col("_batch"))


def judged(
    raw: DataFrame, fmt: str, bound: BoundInput, rule: LateRule, at: BatchOffsets,
    watermark_ms: int,
) -> DataFrame:  # fmt: skip
    """`raw` records (value, source) parsed, guarded and routed as the query does; the late."""
    records = parse_input(raw, fmt, bound.spec)
    if bound.guard is not None:
        records = bound.guard.apply(records, F.timestamp_millis(F.lit(at.timestamp_ms)))
    valid = route(records, bound.expectations).filter(F.col(REASON).isNull())
    return _late(valid, rule, F.lit(watermark_ms))


def _late(
    valid: DataFrame, rule: LateRule, watermark_ms: Column, batch: Column | None = None
) -> DataFrame:
    """The rows `rule` drops against `watermark_ms`: raw, source, at, judged (and `batch`)."""
    time = F.col(rule.column)
    watermark = F.timestamp_millis(watermark_ms)
    if rule.window is not None:
        judged_at = F.window(time, f"{rule.window // timedelta(microseconds=1)} microseconds").end
    else:
        judged_at = time
    return valid.filter(judged_at <= watermark).select(
        F.col(RAW).alias("raw"),
        F.col(SOURCE).alias("source"),
        F.unix_micros(time).alias("at"),
        F.unix_micros(judged_at).alias("judged"),
        *([] if batch is None else [batch.alias("batch")]),
    )


# --- Kafka inputs ------------------------------------------------------------------------------


def _initial_offsets(checkpoint: Path, index: int) -> Any:
    """The Kafka source's initial offsets (`sources/I/0`: a zero byte Spark writes for old
    readers, a version line, the JSON), or None."""
    try:
        text = (Path(checkpoint) / "sources" / str(index) / "0").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    lines = text.lstrip("\x00").splitlines()
    try:
        return json.loads(lines[1]) if len(lines) > 1 else None
    except ValueError:
        return None


def kafka_ranges(checkpoint: Path, batch: int, topic: KafkaTopic) -> Ranges:
    """The offset ranges batch `batch` read of each topic `topic` reads (a list, a pattern's
    matches, the partitions assigned), by topic (empty: none, or not a Kafka input). The
    source is the first whose offsets name only topics this input reads."""
    now = batch_offsets(checkpoint, batch).sources
    before = batch_offsets(checkpoint, batch - 1).sources if batch > 0 else ()
    for index, offset in enumerate(now):
        if not (isinstance(offset, dict) and offset and "logOffset" not in offset):
            continue
        if not all(isinstance(v, dict) and topic.reads(str(t)) for t, v in offset.items()):
            continue
        if batch > 0:
            previous = before[index] if index < len(before) else None
        else:
            previous = _initial_offsets(checkpoint, index)
        found: Ranges = {}
        for name, ends in offset.items():
            starts = previous.get(name, {}) if isinstance(previous, dict) else {}
            ranges = {}
            for partition, end in ends.items():
                start = starts.get(partition) if isinstance(starts, dict) else None
                if isinstance(end, int) and isinstance(start, int) and start >= 0 and end > start:
                    ranges[str(partition)] = (start, end)
                elif isinstance(end, int) and end > 0 and start is None:
                    ranges[str(partition)] = (-2, end)  # a partition (a topic) new since
            if ranges:
                found[str(name)] = ranges
        return found
    return {}


def kafka_late_rows(
    spark: SparkSession, bound: BoundInput, rule: LateRule, topic: KafkaTopic, ranges: Ranges,
    at: BatchOffsets, watermark_ms: int,
) -> DataFrame:  # fmt: skip
    """The rows of a Kafka input's offset `ranges` that `rule` drops against `watermark_ms`."""
    fmt = bound.binding.format
    raw = read_ranges(spark, topic, ranges)
    return judged(raw, fmt if fmt in ("json", "csv", "text") else "json", bound, rule, at,
                  watermark_ms)  # fmt: skip
