"""What a pipeline's `build` does to its DataFrames, the shortcuts every pipeline uses: a
watermark (with deduplication inside it), a window's bounds as columns, keys declared never
NULL, and the check of a window against its slide. What a pipeline declares is in `base`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    IntegralType,
    StringType,
    TimestampType,
)

from slipstream.core.specs import check_windows, spark_interval
from slipstream.jvm.dedup import timer_dedup

__all__ = [
    "DEDUP_FORMS",
    "check_windows",
    "dedup_difference",
    "not_null",
    "spark_interval",
    "watermarked",
    "window_bounds",
]

#: how `watermarked` keeps a re-sent record once: `within-watermark` is
#: dropDuplicatesWithinWatermark(unique); `event-time` is dropDuplicates(unique + event time),
#: the form Spark 4.3's real-time mode runs (its state is evicted by the watermark too);
#: `timers` keeps what `within-watermark` keeps, its keys expiring by event-time timers
#: (slipstream/jvm/dedup.py: a batch reads only the keys the watermark passed)
DEDUP_FORMS = ("within-watermark", "event-time", "timers")


def watermarked(
    frame: DataFrame,
    event_time: str,
    delay: timedelta,
    unique: Sequence[str] = (),
    dedup: str = "within-watermark",
) -> DataFrame:
    """`frame` under a watermark of `delay` on `event_time`; with `unique`, a record re-sent
    within the watermark (the same values of those columns) is kept once. `dedup` is the form
    (DEDUP_FORMS): `event-time` adds `event_time` to the columns, `timers` keeps the same rows
    as `within-watermark` with a processor of slipstream's (see `dedup_difference`)."""
    out = frame.withWatermark(event_time, spark_interval(delay))
    if not unique:
        return out
    if dedup == "event-time":
        return out.dropDuplicates(list(dict.fromkeys([*unique, event_time])))
    if dedup == "timers":
        return timer_dedup(out, unique, event_time, int(delay.total_seconds() * 1000))
    if dedup != "within-watermark":
        raise ValueError(f"dedup must be one of {', '.join(DEDUP_FORMS)}; got {dedup!r}")
    return out.dropDuplicatesWithinWatermark(list(unique))


def dedup_difference(unique: Sequence[str], event_time: str, dedup: str) -> str:
    """What `watermarked(..., unique, dedup)` keeps, said for `check`: when the two forms keep
    the same records, and the one case where they differ.

    Both drop a row whose `event_time` is at or before the watermark as late, before it is
    compared. A repeat with the same `unique` values and the same `event_time` is therefore
    dropped by both: while its first copy is held, as a duplicate; after the watermark passed
    that time (when dropDuplicates evicts it), as late. They differ only for a repeat of the
    same `unique` values with another `event_time`: within-watermark drops it (its state is
    keyed by `unique` alone, held until the watermark passes the first copy's time + the
    delay), event-time keeps it as another record."""
    keys = ", ".join(unique)
    if event_time in unique:
        same = f"dropDuplicates({keys}) keeps what dropDuplicatesWithinWatermark({keys}) keeps"
        return f"{same}: {event_time} is among the keys, so every repeat carries the same time"
    keyed = f"dropDuplicates({keys}, {event_time})"
    within = f"dropDuplicatesWithinWatermark({keys})"
    same = f"a repeat with the same {keys} and {event_time} is dropped by both"
    differ = (
        f"a repeat with the same {keys} and another {event_time} is kept by {keyed} "
        f"(counted again) and dropped by {within} while the first copy is held (until the "
        f"watermark passes its {event_time} + the delay)"
    )
    if dedup == "timers":
        return (
            f"{within} by event-time timers (a transformWithState on RocksDB): the same rows, "
            "and a batch reads only the ids the watermark passed, not every id held; "
            f"{same}; {differ}"
        )
    used = keyed if dedup == "event-time" else within
    return f"{used}: {same}; {differ}"


def window_bounds(window: str = "window") -> tuple[Column, Column]:
    """A window struct's bounds as the columns `window_start` and `window_end`."""
    return F.col(f"{window}.start").alias("window_start"), F.col(f"{window}.end").alias(
        "window_end"
    )


def _never_used(data_type: DataType) -> Column | None:
    """A non-null literal of `data_type` (what tells Spark a column cannot be NULL)."""
    from datetime import UTC, date, datetime

    if isinstance(data_type, StringType):
        return F.lit("")
    if isinstance(data_type, IntegralType):
        return F.lit(0).cast(data_type)
    if isinstance(data_type, TimestampType):
        return F.lit(datetime(1970, 1, 1, tzinfo=UTC))
    if isinstance(data_type, DateType):
        return F.lit(date(1970, 1, 1))
    if isinstance(data_type, BooleanType):
        return F.lit(False)
    return None


def not_null(frame: DataFrame, *columns: str) -> DataFrame:
    """Declare an output's key columns never NULL, so Spark's schema says so (what `check`
    reads: a NULL key never conflicts, so an upsert on it would add a row each batch). Spark
    marks window bounds and parsed fields nullable even when the pipeline guarantees them
    (event times are required, windows need one). Enforced, never assumed: a NULL arriving
    anyway fails the batch with "NULL key COLUMN" instead of writing it."""
    kinds = {f.name: f.dataType for f in frame.schema.fields}
    out = []
    for name in frame.columns:
        fallback = _never_used(kinds[name]) if name in columns else None
        if fallback is None:
            out.append(F.col(name))
            continue
        c = F.col(name)
        guarded = F.when(c.isNull(), F.raise_error(F.lit(f"NULL key {name}"))).otherwise(c)
        out.append(F.coalesce(guarded, fallback).alias(name))  # the fallback is never reached
    return frame.select(*out)
