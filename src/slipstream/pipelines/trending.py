"""Trending articles (seed 002): views per article in sliding event-time windows.

Input: JSON lines `{"event_id", "article_id", "user_id", "ts"}` (see generators/trending.py);
`event_id`, `article_id` and a parseable `ts` are required, `ts` without a zone means UTC.

    withWatermark(ts, W)                        W = --watermark (10m)
    dropDuplicatesWithinWatermark(event_id)     a re-sent event counts once; state per event_id
                                                is dropped once the watermark passes ts + W
    groupBy(window(ts, L, S), article_id)       L = --window (10m), S = --slide (1m): each event
      .count() as views                         counts in L/S windows; a window's state is
                                                dropped once the watermark passes its end
    LEFT JOIN catalog ON article_id             stream-static (broadcast): title, section;
                                                an unknown article is still counted, with
                                                title/section NULL and in_catalog = false

Output `article_views(window_start, window_end, article_id, title, section, views,
in_catalog)`, key `(window_start, article_id)`, upserted in update mode (default sink
`sqlite:` under the state dir). `--archive DIR` adds a second query of the same run that appends
finalised windows (append mode: emitted once the watermark passes the window's end) to Parquet.

Late data. Spark drops a row as late when its `ts` is at or before the watermark *of the
previous micro-batch* (every stateful operator filters late rows with the watermark it evicted
with one batch earlier; the watermark shown for a batch is the new one, used for eviction). The
deduplication runs first, with the same watermark, so every late row is dropped and counted
there, as a row; the aggregation then never sees a row older than its own late-row watermark
(every window holding `ts` ends after `ts`), so nothing is counted twice. Within one batch
nothing is late: an available-now run over all files as one batch counts every valid event.

Expectations (slipstream.quality.expectations): `ts` at most one day in the future and
`article_id` shaped like `a123` drop to the quarantine; a missing `user_id` is counted only.
The future rule runs before the watermark, so a far-future timestamp cannot push the watermark
and make every later event late.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from slipstream.config import Settings
from slipstream.errors import ConfigError
from slipstream.pipelines.base import ExtraOutput, Pipeline
from slipstream.plan import Plan
from slipstream.quality.expectations import Expectation
from slipstream.specs import SinkSpec, format_duration, spark_interval

CATALOG_COLUMNS = ("article_id", "title", "section", "published_at")
CATALOG_SCHEMA = StructType(
    [
        StructField("article_id", StringType()),
        StructField("title", StringType()),
        StructField("section", StringType()),
        StructField("published_at", StringType()),  # not used; text so a bad value is harmless
    ]
)
OUTPUT_COLUMNS = (
    "window_start",
    "window_end",
    "article_id",
    "title",
    "section",
    "views",
    "in_catalog",
)
ARTICLE_ID_PATTERN = "^a[0-9]+$"
FUTURE_TOLERANCE = timedelta(days=1)
# Each event is counted in ceil(window / slide) windows; beyond this the state and the output
# grow faster than the input for no visible gain.
MAX_WINDOWS_PER_EVENT = 60
ARCHIVE = "archive"


def read_catalog(spark: SparkSession, path: Path) -> DataFrame:
    """The static side of the join: one row per article, with an `in_catalog` marker.

    Re-read at every micro-batch (it is a plan, not a cached table), so an article added to the
    catalog file (replace the file atomically) has its title from the next batch on."""
    frame = spark.read.schema(CATALOG_SCHEMA).option("header", "true").csv(str(path))
    return frame.select("article_id", "title", "section", F.lit(True).alias("in_catalog"))


def check_catalog(path: Path) -> None:
    """Before Spark starts: the file exists, has the expected header and unique article ids."""
    if not path.is_file():
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--catalog {path} is not a file",
            "give the article catalog CSV (`slipstream generate trending` writes one)",
        )
    if path.name.startswith(("_", ".")):
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--catalog {path}: Spark treats names starting with '_' or '.' as hidden and "
            "would read no article at all",
            "rename the catalog file, e.g. catalog.csv",
        )
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None or tuple(h.strip() for h in header[:3]) != CATALOG_COLUMNS[:3]:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--catalog {path} has header {header!r}",
                f"start the CSV with the header {','.join(CATALOG_COLUMNS)}",
            )
        seen: set[str] = set()
        for line, row in enumerate(reader, start=2):
            if row and row[0] in seen:
                raise ConfigError(
                    "CONFIG_BAD_VALUE",
                    f"--catalog {path} lists article_id {row[0]!r} twice (line {line})",
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
    output = "article_views"
    key = ("window_start", "article_id")
    modes = ("update", "append")
    sources = ("files",)
    input_format = "json"
    schema = StructType(
        [
            StructField("event_id", StringType()),
            StructField("article_id", StringType()),
            StructField("user_id", StringType()),
            StructField("ts", TimestampType()),
        ]
    )
    required = ("event_id", "article_id", "ts")
    defaults = {
        "window": timedelta(minutes=10),
        "slide": timedelta(minutes=1),
        "watermark": timedelta(minutes=10),
    }

    def expectations(self, settings: Settings) -> Sequence[Expectation]:
        hours = int(FUTURE_TOLERANCE.total_seconds() // 3600)
        return (
            Expectation(
                "ts_not_in_future",
                f"ts <= current_timestamp() + INTERVAL {hours} HOURS",
                "drop",
            ),
            Expectation("article_id_format", f"article_id RLIKE '{ARTICLE_ID_PATTERN}'", "drop"),
            Expectation("user_id_present", "user_id IS NOT NULL", "warn"),
        )

    def validate(self, settings: Settings) -> None:
        if settings.catalog is None:
            raise ConfigError(
                "CONFIG_MISSING",
                "pipeline trending needs --catalog FILE (the article catalog CSV)",
                "pass --catalog FILE; `slipstream generate trending --catalog FILE` writes one",
            )
        check_catalog(settings.catalog)
        window, slide = settings.window, settings.slide
        assert window is not None and slide is not None and settings.watermark is not None
        if slide > window:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--slide must be no longer than --window; got slide={format_duration(slide)}, "
                f"window={format_duration(window)}",
                f"use --slide {format_duration(window)} or less (equal gives tumbling windows)",
            )
        per_event = -(-window // slide)
        if per_event > MAX_WINDOWS_PER_EVENT:
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--slide {format_duration(slide)} puts every event in {per_event} windows of "
                f"--window {format_duration(window)} (at most {MAX_WINDOWS_PER_EVENT})",
                f"use --slide {format_duration(window / MAX_WINDOWS_PER_EVENT)} or longer",
            )
        for name, value in (("window", window), ("slide", slide)):
            if value % timedelta(milliseconds=1):
                raise ConfigError(
                    "CONFIG_BAD_VALUE",
                    f"--{name} {value} is not a whole number of milliseconds",
                    f"give --{name} in ms, s, m or h",
                )
        sink = settings.sink
        archive = settings.archive
        if archive and sink and sink.is_file_sink and archive.resolve() == sink.path().resolve():
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--archive {archive} is also the --sink directory",
                "give the archive its own directory",
            )

    def plan(self, settings: Settings) -> Plan:
        window, slide, watermark = settings.window, settings.slide, settings.watermark
        assert window and slide and watermark
        wm = format_duration(watermark)
        steps = [
            f"withWatermark(ts, {wm})",
            f"dropDuplicatesWithinWatermark(event_id)  -- state per event_id until the "
            f"watermark passes ts + {wm}; late rows dropped and counted here",
            f"groupBy(window(ts, {format_duration(window)}, slide {format_duration(slide)}), "
            f"article_id).count() as views  -- sliding: each event in "
            f"{-(-window // slide)} windows; state dropped once the watermark passes window end",
            "left join catalog on article_id (stream-static, broadcast)  -- unknown articles "
            "still counted, in_catalog = false",
        ]
        if settings.archive is not None:
            steps.append(f"second query: append finalised windows to parquet:{settings.archive}")
        return Plan(
            steps=tuple(steps),
            aggregation=True,
            window="sliding",
            window_column="ts",
            window_length=window,
            window_slide=slide,
            watermark_column="ts",
            watermark_delay=watermark,
            dedup=True,
            stream_static_join=True,
        )

    def transform(self, records: DataFrame, settings: Settings, spark: SparkSession) -> DataFrame:
        window, slide, watermark = settings.window, settings.slide, settings.watermark
        assert window and slide and watermark and settings.catalog
        events = records.withWatermark(
            "ts", spark_interval(watermark)
        ).dropDuplicatesWithinWatermark(["event_id"])
        counts = events.groupBy(
            F.window("ts", spark_interval(window), spark_interval(slide)).alias("window"),
            F.col("article_id"),
        ).agg(F.count(F.lit(1)).alias("views"))
        catalog = F.broadcast(read_catalog(spark, settings.catalog))
        joined = counts.join(catalog, on="article_id", how="left")
        return joined.select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "article_id",
            "title",
            "section",
            "views",
            F.coalesce(F.col("in_catalog"), F.lit(False)).alias("in_catalog"),
        )

    def extra_outputs(
        self, result: DataFrame, records: DataFrame, settings: Settings, spark: SparkSession
    ) -> list[ExtraOutput]:
        if settings.archive is None:
            return []
        spec = SinkSpec("parquet", str(settings.archive))
        return [ExtraOutput(ARCHIVE, result, spec, "append", self.key)]

    def results_view(self, settings: Settings) -> dict[str, Any] | None:
        """The dashboard's table: the top 10 articles of the current window (the window in
        progress that closes first, see slipstream.serving.trending), updating as it counts."""
        from slipstream.monitor.results import last_commit, sqlite_database
        from slipstream.serving.trending import top_articles

        settings = self.resolve(settings)
        db = sqlite_database(settings)
        if db is None:
            return None
        table = settings.table or self.output
        current = top_articles(db, 10, table=table)["current"]
        title = "Top 10 articles, current window"
        if current:
            start, end = current[0]["window_start"], current[0]["window_end"]
            title += f" {start[11:16]}-{end[11:16]} UTC (in progress)"
        return {
            "title": title,
            "columns": ["rank", "article", "title", "section", "views"],
            "rows": [
                [
                    r["rank"],
                    r["article_id"],
                    r["title"] if r["in_catalog"] else "(not in catalog)",
                    r["section"],
                    r["views"],
                ]
                for r in current
            ],
            "updated": last_commit(db, table),
        }
