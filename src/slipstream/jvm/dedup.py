"""Deduplication by event-time timers (`--dedup timers`): `dropDuplicatesWithinWatermark(unique)`
as a transformWithState processor (java/src/slipstream/jvm/TimerDedup.java) whose held keys
expire by timers, so that a batch reads only what the watermark passed instead of every key
held (docs/benchmarks.md section 45). The processor is built in the driver's JVM: a classic
session only, and its state needs RocksDB's provider (runtime/partitions.store_settings).

Spark's deduplication counts the duplicates it drops (`numDroppedDuplicateRows`); a processor
reports none. So the rows are counted on both sides of it (`observe`, DEDUP_TIMERS_METRIC): the
rows in, less the rows out, less the late rows Spark dropped before the processor saw them (its
operator's `numRowsDroppedByWatermark`), are the duplicates (monitor/listener.progress_summary)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from slipstream.errors import ConfigError
from slipstream.jvm import DEDUP_TIMERS_METRIC, TIMER_DEDUP_CLASS

_calls = itertools.count()


def timer_dedup(
    frame: DataFrame, unique: Sequence[str], event_time: str, delay_ms: int
) -> DataFrame:
    """`frame` (under a watermark on `event_time`) with a row of the same `unique` values kept
    once while the watermark has not passed the first one's time + `delay_ms`."""
    spark: Any = frame.sparkSession
    if getattr(spark, "_jvm", None) is None or not hasattr(frame, "_jdf"):
        raise ConfigError(
            "CONNECT_NOT_SUPPORTED",
            "--dedup timers builds its processor in the driver's JVM, and a Spark Connect "
            "client has none",
            "use --dedup within-watermark under --remote: it keeps the same rows",
        )
    n = next(_calls)
    rows = F.count(F.lit(1)).alias("rows")
    counted = frame.observe(f"{DEDUP_TIMERS_METRIC}.in.{n}", rows)
    jvm = spark._jvm
    keys = spark.sparkContext._gateway.new_array(jvm.java.lang.String, len(unique))
    for i, name in enumerate(unique):
        keys[i] = name
    entry: Any = jvm
    for part in TIMER_DEDUP_CLASS.split("."):
        entry = getattr(entry, part)
    kept = DataFrame(entry.apply(counted._jdf, keys, event_time, int(delay_ms)), spark)
    return kept.observe(f"{DEDUP_TIMERS_METRIC}.out.{n}", rows)
