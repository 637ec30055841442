"""Trending articles (seed 002): views per article in sliding event-time windows.

Input: JSON lines `{"event_id", "article_id", "user_id", "ts"}` (see generators/trending.py);
`event_id`, `article_id` and a parseable `ts` are required, `ts` without a zone means UTC.

Inputs: `events` (the stream, `--input DIR`) and `catalog` (a static CSV table,
`--input catalog=FILE`).

    withWatermark(ts, W)                        W = --watermark (10m)
    dropDuplicatesWithinWatermark(event_id)     a re-sent event counts once; state per event_id
                                                is dropped once the watermark passes ts + W
      or dropDuplicates(event_id, ts)           --dedup event-time: the form Spark 4.3's
                                                real-time mode runs (`--dedup auto`, the
                                                default, picks it under --trigger real-time);
                                                state dropped once the watermark passes ts
      or TimerDedup by event_id                 --dedup timers: what dropDuplicatesWithin-
                                                Watermark keeps, each id expiring by an
                                                event-time timer (slipstream/jvm/dedup.py)
    groupBy(window(ts, L, S), article_id)       L = --window (10m), S = --slide (1m): each event
      .count() as views                         counts in L/S windows; a window's state is
                                                dropped once the watermark passes its end
    LEFT JOIN catalog ON article_id             stream-static (broadcast): title, section;
                                                an unknown article is still counted, with
                                                title/section NULL and in_catalog = false

Output `views`: table `article_views(window_start, window_end, article_id, title, section,
views, in_catalog)`, key `(window_start, article_id)`, upserted in update mode (default sink
`sqlite:` under the state dir). Output `archive` (table `article_views_final` in a database)
is off unless given a sink
(`--sink archive=parquet:DIR`): a second query of the same run that appends finalised windows
(append mode: emitted once the watermark passes the window's end).

The two deduplications. Both drop a row whose `ts` is at or before the watermark as late
before comparing it, so an event re-sent with the same `event_id` and the same `ts` counts once
under either (a duplicate while the first copy is held, late once the watermark has passed its
`ts`). They differ in one case only: the same `event_id` re-sent with another `ts`.
dropDuplicatesWithinWatermark(event_id) drops it while the first copy is held (until the
watermark passes the first `ts` + W); dropDuplicates(event_id, ts) counts it again, in the
windows of its own `ts`. `slipstream generate trending` re-sends an event as an exact copy, so
on its data the two count the same; a producer that stamps a retry with a new time does not.

Late data. Spark drops a row as late when its `ts` is at or before the watermark *of the
previous micro-batch* (every stateful operator filters late rows with the watermark it evicted
with one batch earlier; the watermark shown for a batch is the new one, used for eviction). The
deduplication runs first, with the same watermark, so every late row is dropped and counted
there, as a row; the aggregation then never sees a row older than its own late-row watermark
(every window holding `ts` ends after `ts`), so nothing is counted twice. Within one batch
nothing is late: an available-now run over all files as one batch counts every valid event.

Expectations (slipstream.ingest.expectations): an `article_id` not shaped like `a123` drops to
the quarantine; a missing `user_id` is counted only. The runner's event-time guard quarantines
a `ts` more than `--max-future` (a day) ahead before the watermark, so a far-future timestamp
cannot push the watermark and make every later event late.
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from datetime import timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.frames import (
    check_windows,
    dedup_difference,
    not_null,
    spark_interval,
    watermarked,
    window_bounds,
)
from slipstream.api.pipeline import (
    Expectation,
    Input,
    Output,
    Params,
    Pipeline,
    dedup_param,
    duration_param,
    event_stream,
)
from slipstream.api.schema import check_csv_header, parse_ddl
from slipstream.errors import ConfigError

# published_at is not used; text, so a bad value is harmless
CATALOG_SCHEMA = parse_ddl("article_id STRING, title STRING, section STRING, published_at STRING")
EVENT_SCHEMA = parse_ddl("event_id STRING, article_id STRING, user_id STRING, ts TIMESTAMP")
ARTICLE_ID_PATTERN = "^a[0-9]+$"
KEY = ("window_start", "article_id")


def catalog_side(catalog: DataFrame) -> DataFrame:
    """The static side of the join: one row per article, with an `in_catalog` marker.

    The runner reads the catalog input as a plan, not a cached table: every micro-batch reads
    the file again, so an article added to it (replace the file atomically) has its title from
    the next batch on."""
    return catalog.select("article_id", "title", "section", F.lit(True).alias("in_catalog"))


def check_catalog(path: Path) -> None:
    """Before Spark starts: the file exists, has the expected header and unique article ids."""
    what = "the article catalog CSV (`slipstream generate trending` writes one)"
    check_csv_header(path, "catalog", CATALOG_SCHEMA, what, compared=3)
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        next(reader, None)  # the header
        seen: set[str] = set()
        for line, row in enumerate(reader, start=2):
            if row and row[0] in seen:
                raise ConfigError(
                    "CONFIG_BAD_VALUE",
                    f"--input catalog={path} lists article_id {row[0]!r} twice (line {line})",
                    "keep one row per article_id (the join would count its views twice)",
                )
            if row:
                seen.add(row[0])


class TrendingPipeline(Pipeline):
    name = "trending"
    description = (
        "article views in sliding event-time windows: deduplicated, late data dropped and "
        "counted, joined to the article catalog"
    )
    inputs = (
        event_stream(
            "events",
            EVENT_SCHEMA,
            "ts",
            ("event_id", "article_id", "ts"),
            sources=("files", "kafka"),
        ),
        Input(
            "catalog",
            CATALOG_SCHEMA,
            format="csv",
            static=True,
            help="the article catalog CSV; `slipstream generate trending` writes one",
        ),
    )
    params = (
        duration_param("window", timedelta(minutes=10), "length of the sliding window"),
        duration_param("slide", timedelta(minutes=1), "how often a window starts"),
        duration_param("watermark", timedelta(minutes=10), "how late an event may arrive"),
        dedup_param(
            "how a re-sent event counts once: within-watermark (by event_id), event-time (by "
            "event_id and ts, what real-time mode runs), timers (what within-watermark "
            "keeps, each batch reading only the ids the watermark passed: for a large state); "
            "auto: event-time under a real-time trigger"
        ),
    )
    outputs = (
        Output(
            "views",
            table="article_views",
            key=KEY,
            modes=("update", "append"),
            help="views per window and article, upserted as they count",
        ),
        Output(
            "archive",
            table="article_views_final",
            key=KEY,
            modes=("append",),
            sink=None,
            help="finalised windows, appended once the watermark passes their end "
            "(off unless given a sink, e.g. --sink archive=parquet:DIR)",
        ),
    )

    def expectations(self, input_name: str, params: Params) -> Sequence[Expectation]:
        return (
            Expectation("article_id_format", f"article_id RLIKE '{ARTICLE_ID_PATTERN}'", "drop"),
            Expectation("user_id_present", "user_id IS NOT NULL", "warn"),
        )

    def notes(self, params: Params) -> Sequence[str]:
        return (f"dedup       {dedup_difference(('event_id',), 'ts', params.dedup)}",)

    def validate(self, params: Params, paths: Mapping[str, Path | None]) -> None:
        catalog = paths["catalog"]
        assert catalog is not None  # the runner refuses a missing table input first
        check_catalog(catalog)
        check_windows(params.window, params.slide)

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        events = watermarked(
            inputs["events"], "ts", params.watermark, unique=("event_id",), dedup=params.dedup
        )
        counts = events.groupBy(
            F.window("ts", spark_interval(params.window), spark_interval(params.slide)).alias(
                "window"
            ),
            F.col("article_id"),
        ).agg(F.count(F.lit(1)).alias("views"))
        catalog = F.broadcast(catalog_side(inputs["catalog"]))
        joined = counts.join(catalog, on="article_id", how="left")
        views = joined.select(
            *window_bounds(),
            "article_id",
            "title",
            "section",
            "views",
            F.coalesce(F.col("in_catalog"), F.lit(False)).alias("in_catalog"),
        )
        views = not_null(views, *KEY)
        return {"views": views, "archive": views}
