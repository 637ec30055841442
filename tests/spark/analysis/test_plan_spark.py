"""The plan slipstream reads from a real query agrees with Spark: on deliberately wrong (and
right) queries, whatever Spark refuses at start, slipstream's rules refuse too, before start,
with the expected code; and the right queries pass both.

Each query reads an empty folder through the file source and is started with
`availableNow`, so Spark's own unsupported-operation check gives its verdict at `start()`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.analysis.plan import plan_of
from slipstream.analysis.validate import violations
from slipstream.core.specs import SinkSpec, TriggerSpec

pytestmark = pytest.mark.spark

Build = Callable[[DataFrame, DataFrame, DataFrame], DataFrame]  # (events, other, static)

WM = "10 minutes"
CASES: list[tuple[str, Build, str, str, str | None]] = [
    # name, query, mode, sink, slipstream's expected code (None: accepted)
    ("agg append, no watermark", lambda e, o, s: e.groupBy("k").count(), "append", "noop",
     "APPEND_NEEDS_WATERMARK"),
    ("agg complete", lambda e, o, s: e.groupBy("k").count(), "complete", "noop", None),
    ("map complete", lambda e, o, s: e.select("k"), "complete", "noop",
     "COMPLETE_NEEDS_AGGREGATION"),
    ("session window update",
     lambda e, o, s: e.withWatermark("ts", WM).groupBy(F.session_window("ts", "5 minutes"), "k")
     .count(), "update", "noop", "SESSION_WINDOW_NO_UPDATE"),
    ("session window append",
     lambda e, o, s: e.withWatermark("ts", WM).groupBy(F.session_window("ts", "5 minutes"), "k")
     .count(), "append", "noop", None),
    ("sort without aggregation", lambda e, o, s: e.orderBy("k"), "append", "noop",
     "UNSUPPORTED_STREAM_OPERATION"),
    ("sort after aggregation, update", lambda e, o, s: e.groupBy("k").count().orderBy("count"),
     "update", "noop", "SORT_NEEDS_COMPLETE"),
    ("sort after aggregation, complete", lambda e, o, s: e.groupBy("k").count().orderBy("count"),
     "complete", "noop", None),
    ("tumbling window append",
     lambda e, o, s: e.withWatermark("ts", WM).groupBy(F.window("ts", "5 minutes"), "k").count(),
     "append", "noop", None),
    ("sliding window append to parquet",
     lambda e, o, s: e.withWatermark("ts", WM)
     .groupBy(F.window("ts", "10 minutes", "5 minutes"), "k").count()
     .select(F.col("window.start").alias("start"), "k", "count"), "append", "parquet", None),
    ("watermark after the aggregation",
     lambda e, o, s: e.groupBy(F.window("ts", "5 minutes"), "k").count()
     .withWatermark("window", "1 minute"), "append", "noop", "APPEND_NEEDS_WATERMARK"),
    ("update into parquet", lambda e, o, s: e.groupBy("k").count(), "update", "parquet",
     "FILE_SINK_APPEND_ONLY"),
    ("stream-static join", lambda e, o, s: e.join(F.broadcast(s), "k", "left"), "append", "noop",
     None),
    ("stream-stream inner join, append",
     lambda e, o, s: e.withWatermark("ts", "2 hours").join(
         o.withWatermark("ts2", "3 hours"),
         F.expr("k = k2 AND ts2 BETWEEN ts AND ts + INTERVAL 1 HOUR")), "append", "noop", None),
    ("stream-stream join, update",
     lambda e, o, s: e.join(o, F.expr("k = k2")), "update", "noop", "STREAM_JOIN_APPEND_ONLY"),
    ("stream-stream left outer join without watermarks",
     lambda e, o, s: e.join(o, F.expr("k = k2"), "left"), "append", "noop",
     "STREAM_JOIN_NEEDS_WATERMARK"),
    ("stream-stream left outer join, bounded",
     lambda e, o, s: e.withWatermark("ts", "2 hours").join(
         o.withWatermark("ts2", "3 hours"),
         F.expr("k = k2 AND ts2 BETWEEN ts AND ts + INTERVAL 1 HOUR"), "left"), "append", "noop",
     None),
]  # fmt: skip


def spark_refuses(frame: DataFrame, mode: str, sink: str, work: Path, name: str) -> str | None:
    """Spark's verdict at start: the error class (or first line) when it refuses, else None."""
    writer = frame.writeStream.outputMode(mode).trigger(availableNow=True)
    writer = writer.option("checkpointLocation", str(work / "ck" / name))
    if sink == "parquet":
        writer = writer.format("parquet").option("path", str(work / "out" / name))
    else:
        writer = writer.format("noop")
    try:
        query = writer.start()
    except PySparkException as exc:
        return exc.getCondition() or str(exc).splitlines()[0]
    try:
        query.awaitTermination()
    finally:
        query.stop()
    return None


def test_slipstream_never_passes_what_spark_refuses(spark: SparkSession, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    events = spark.readStream.schema("ts timestamp, k string").json(str(tmp_path / "a"))
    other = spark.readStream.schema("ts2 timestamp, k2 string").json(str(tmp_path / "b"))
    static = spark.createDataFrame([("a", "A")], "k string, name string")
    disagreements = []
    for i, (name, build, mode, sink, expected) in enumerate(CASES):
        frame = build(events, other, static)
        ours = [v.code for v in violations(plan_of(frame), mode, SinkSpec(sink), TriggerSpec(),
                                           "files")]  # type: ignore[arg-type]  # fmt: skip
        theirs = spark_refuses(frame, mode, sink, tmp_path, f"q{i}")
        if theirs is not None and not ours:
            disagreements.append(f"{name}: Spark refuses ({theirs}), slipstream passes it")
        if ours != ([expected] if expected else []):
            disagreements.append(f"{name}: slipstream says {ours}, expected {expected}")
        if expected is None and theirs is not None:
            disagreements.append(f"{name}: meant to be right, but Spark refuses ({theirs})")
    assert not disagreements, "\n".join(disagreements)
