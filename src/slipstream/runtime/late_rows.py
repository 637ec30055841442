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
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark.sql import DataFrame, SparkSession
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


def late_rows(
    spark: SparkSession, bound: BoundInput, rule: LateRule, files: list[str], at: BatchOffsets,
    watermark_ms: int, bronze: StructType | None = None,
) -> DataFrame:  # fmt: skip
    """The rows of `files` that `rule` drops against `watermark_ms`: the input parsed,
    guarded at the batch's time and routed by its `drop` expectations as in the query; with
    the ingest stage (`bronze`: the schema its typed rows are read with), `files` are the
    batch's bronze files, judged once already."""
    spec = bound.spec
    reader = spark.read.option("ignoreMissingFiles", "true")
    if bronze is not None:  # the ingest stage judged them once: typed rows, by batch
        valid = reader.schema(bronze).parquet(*files)
        return _late(valid, rule, watermark_ms)
    if bound.binding.format == "parquet":  # judged as the stream judged them
        assert spec.schema is not None
        raw = parquet_rows(reader.format("binaryFile").load(files), spec.schema, spec.required)
        return judged(raw, "parquet", bound, rule, at, watermark_ms)
    raw = reader.format("text").load(files)
    raw = raw.select(F.col("value"), F.col("_metadata.file_path").alias(SOURCE))
    return judged(raw, bound.binding.format, bound, rule, at, watermark_ms)


def judged(
    raw: DataFrame, fmt: str, bound: BoundInput, rule: LateRule, at: BatchOffsets,
    watermark_ms: int,
) -> DataFrame:  # fmt: skip
    """`raw` records (value, source) parsed, guarded and routed as the query does; the late."""
    records = parse_input(raw, fmt, bound.spec)
    if bound.guard is not None:
        records = bound.guard.apply(records, F.timestamp_millis(F.lit(at.timestamp_ms)))
    valid = route(records, bound.expectations).filter(F.col(REASON).isNull())
    return _late(valid, rule, watermark_ms)


def _late(valid: DataFrame, rule: LateRule, watermark_ms: int) -> DataFrame:
    time = F.col(rule.column)
    watermark = F.timestamp_micros(F.lit(watermark_ms * 1000))
    if rule.window is not None:
        judged_at = F.window(time, f"{rule.window // timedelta(microseconds=1)} microseconds").end
    else:
        judged_at = time
    return valid.filter(judged_at <= watermark).select(
        F.col(RAW).alias("raw"),
        F.col(SOURCE).alias("source"),
        F.unix_micros(time).alias("at"),
        F.unix_micros(judged_at).alias("judged"),
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
