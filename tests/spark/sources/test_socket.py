"""The seeds' quick example: word count over a socket, served by `slipstream feed`'s server;
and Spark's windowed one, on the arrival time the socket source adds (`--include-timestamp`)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from slipstream.api.pipeline import Input, Output, Params, Pipeline
from slipstream.testing import PipelineHarness
from slipstream.tools.generators.feed import LineServer

pytestmark = pytest.mark.spark


def test_wordcount_over_socket(spark: SparkSession, tmp_path: Path) -> None:
    lines = ["apache spark structured streaming", "spark  streaming", "Spark"]
    expected = Counter(w for line in lines for w in line.split())
    server = LineServer(0)
    try:
        with PipelineHarness(
            spark,
            "wordcount",
            tmp_path,
            source="socket",
            host="127.0.0.1",
            port=server.port,
            mode="complete",
        ) as h:
            assert server.wait_for_client(timeout=120), "Spark's socket source never connected"
            server.send(lines)
            latest: dict[str, int] = {}
            # The socket reader thread buffers lines asynchronously; drive batches until the
            # complete-mode result holds every word (bounded: no sleeping, no fixed count).
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                rows = h.process()
                if rows:
                    latest = {r["word"]: r["count"] for r in rows}
                if sum(latest.values()) == sum(expected.values()):
                    break
                assert h.run is not None
                h.run.queries["counts"].awaitTermination(0.2)  # bounded poll, not a sync
            assert latest == dict(expected)
    finally:
        server.close()


class ArrivalWordCount(Pipeline):
    """Spark's windowed network word count (structured_network_wordcount_windowed.py): words
    counted per 10-second window of the time each line arrived (`includeTimestamp`)."""

    name = "arrival_wordcount"
    description = "word counts per 10-second window of arrival time"
    inputs = (Input("lines", format="text", sources=("socket",)),)
    outputs = (
        Output("counts", table="arrival_word_counts", key=("window_start", "word"),
               modes=("complete",)),
    )  # fmt: skip

    def build(
        self, spark: SparkSession, inputs: Mapping[str, DataFrame], params: Params
    ) -> dict[str, DataFrame]:
        lines = inputs["lines"]
        words = lines.select(
            F.explode(F.split(F.col("value"), r"\s+")).alias("word"), F.col("timestamp")
        ).filter(F.col("word") != "")
        window = F.window(F.col("timestamp"), "10 seconds")
        counts = words.groupBy(window.alias("w"), F.col("word")).count()
        return {
            "counts": counts.select(
                F.col("w.start").alias("window_start"),
                F.col("w.end").alias("window_end"),
                "word",
                "count",
            )
        }


def test_a_windowed_word_count_on_arrival_time_with_include_timestamp(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Each word is counted once, in the 10-second window of when its line arrived: the
    counts per word over the windows are those of the lines sent, and each window is a
    10-second one that holds a moment between sending and the last count."""
    lines = ["apache spark structured streaming", "spark  streaming", "Spark", "spark window"]
    expected = Counter(w for line in lines for w in line.split())
    server = LineServer(0)
    try:
        with PipelineHarness(
            spark, ArrivalWordCount(), tmp_path, source="socket", host="127.0.0.1",
            port=server.port, mode="complete", include_timestamp=True,
        ) as h:  # fmt: skip
            assert server.wait_for_client(timeout=120), "Spark's socket source never connected"
            sent = datetime.now(UTC)
            server.send(lines)
            latest: list[dict[str, Any]] = []
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                rows = h.process()
                if rows:
                    latest = rows  # complete mode: each batch holds the whole table
                if sum(r["count"] for r in latest) == sum(expected.values()):
                    break
                assert h.run is not None
                h.run.queries["counts"].awaitTermination(0.2)  # bounded poll, not a sync
            done = datetime.now(UTC)
    finally:
        server.close()
    per_word: Counter[str] = Counter()
    for row in latest:
        per_word[row["word"]] += row["count"]
    assert per_word == expected
    for row in latest:
        start, end = _utc(row["window_start"]), _utc(row["window_end"])
        assert end - start == timedelta(seconds=10) and start.timestamp() % 10 == 0
        assert start <= done and sent - timedelta(seconds=1) < end  # arrival time, not event


def _utc(moment: Any) -> datetime:
    """A result's timestamp as aware UTC (the collect sink gives naive UTC or an ISO text)."""
    if isinstance(moment, str):
        moment = datetime.fromisoformat(moment.replace("Z", "+00:00"))
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
