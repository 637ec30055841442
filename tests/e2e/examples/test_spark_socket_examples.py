"""Apache Spark's socket examples, ported in `examples/spark/`: `slipstream feed` serves a fixed
set of lines (a server of its own for each program, on an ephemeral port); the original query
reads them with plain PySpark, the port with `slipstream run ... --stop-when-idle`, which ends by
itself once the input is consumed (docs/howto/migrate.md)."""

from __future__ import annotations

import io
import math
import re
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pandas as pd
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.functions import count, explode, session_window, split, window
from pyspark.sql.streaming.state import GroupState, GroupStateTimeout
from pyspark.sql.types import LongType, StringType, StructField, StructType

from slipstream.app import cli, exits
from slipstream.sinks.sqlite import read_table
from tests.helpers import cli_env

pytestmark = pytest.mark.spark

#: repeated words, two spaces (an empty word, as Spark's `split(value, ' ')` gives), a capital
LINES = ["apache spark structured streaming", "spark  streaming", "Spark", "spark window"]
WORDS = Counter(w for line in LINES for w in line.split(" "))


@pytest.fixture
def feed(tmp_path: Path) -> Iterator[Callable[[], int]]:
    """Start `slipstream feed LINES --port 0` (a real subprocess, as a user runs it) and return
    the port it listens on: it sends LINES to the first program that connects and keeps the
    connection open, as it does for a user. One server per program."""
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"{line}\n" for line in LINES))
    started: list[subprocess.Popen[str]] = []

    def start() -> int:
        server = subprocess.Popen(
            [sys.executable, "-m", "slipstream", "feed", str(lines), "--port", "0"],
            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=cli_env(),
        )  # fmt: skip
        started.append(server)
        assert server.stderr is not None
        listening = re.search(r"listening on 127\.0\.0\.1:(\d+)", server.stderr.readline())
        assert listening, "slipstream feed did not say where it listens"
        return int(listening.group(1))

    yield start
    for server in started:
        server.terminate()
        server.wait(timeout=30)


def original(
    spark: SparkSession,
    port: int,
    query: Callable[[DataFrame], DataFrame],
    total: int,
    name: str,
    mode: str = "complete",
    counted: str = "count",
) -> pd.DataFrame:
    """The original's query over the socket into a memory table, driven until its `counted`
    column sums to `total` words (bounded polling on that condition). Under a processing-time
    timeout `processAllAvailable` never returns: then the poll alone drives it."""
    lines = (
        spark.readStream.format("socket").option("host", "127.0.0.1").option("port", port)
        .option("includeTimestamp", "true").load()
    )  # fmt: skip
    running = query(lines).writeStream.outputMode(mode).format("memory").queryName(name)
    started = running.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if mode != "update":
                started.processAllAvailable()
            table = spark.table(name).toPandas()
            if not table.empty and table[counted].sum() == total:
                return table
            started.awaitTermination(0.2)  # bounded poll for the socket's reader thread
        raise AssertionError(f"the original's counts never reached {total} words")
    finally:
        started.stop()


def run_port(pipeline: str, port: int, state: Path, *more: str) -> Path:
    """`slipstream run PIPELINE` over the socket, in this process, ending by itself."""
    db = state / "out.db"
    code = cli.main(
        ["run", f"examples.spark.{pipeline}", "--source", "socket", "--host", "127.0.0.1",
         "--port", str(port), "--mode", "complete", "--sink", f"sqlite:{db}",
         "--state-dir", str(state), "--stop-when-idle", "5s", "--quiet", *more],
        io.StringIO(),
    )  # fmt: skip
    assert code == exits.EXIT_OK
    return db


def test_network_wordcount_port_equals_the_original(
    spark: SparkSession, feed: Callable[[], int], tmp_path: Path
) -> None:
    def query(lines: DataFrame) -> DataFrame:  # the original's, as Spark ships it
        words = lines.select(explode(split(lines.value, " ")).alias("word"))
        return words.groupBy("word").count()

    want = original(spark, feed(), query, sum(WORDS.values()), "original_network_wc")
    db = run_port("network_wordcount:NetworkWordCount", feed(), tmp_path)
    got = pd.DataFrame(read_table(db, "network_word_counts"))
    key = ["word"]
    pd.testing.assert_frame_equal(
        got[["word", "count"]].sort_values(key).reset_index(drop=True),
        want[["word", "count"]].sort_values(key).reset_index(drop=True),
        check_dtype=False,
    )
    assert dict(zip(got["word"], got["count"], strict=True)) == WORDS  # and Python's split


def test_windowed_network_wordcount_port_equals_the_original(
    spark: SparkSession, feed: Callable[[], int], tmp_path: Path
) -> None:
    """10-second windows sliding by 5: each line is in two windows of its arrival time. The
    two runs read at different moments, so the windows differ; what both must give: 10-second
    windows, and per word twice its count in the lines."""

    def query(lines: DataFrame) -> DataFrame:  # the original's, as Spark ships it
        words = lines.select(explode(split(lines.value, " ")).alias("word"), lines.timestamp)
        counts = words.groupBy(window(words.timestamp, "10 seconds", "5 seconds"), words.word)
        return counts.count().orderBy("window")

    want = original(spark, feed(), query, 2 * sum(WORDS.values()), "original_windowed_wc")
    db = run_port(
        "network_wordcount_windowed:WindowedNetworkWordCount", feed(), tmp_path,
        "--include-timestamp", "--window", "10s", "--slide", "5s",
    )  # fmt: skip
    got = pd.DataFrame(read_table(db, "windowed_word_counts"))
    assert got.groupby("word")["count"].sum().to_dict() == {w: 2 * n for w, n in WORDS.items()}
    assert want.groupby("word")["count"].sum().to_dict() == {w: 2 * n for w, n in WORDS.items()}
    lengths = pd.to_datetime(got["window_end"], format="ISO8601") - pd.to_datetime(
        got["window_start"], format="ISO8601"
    )
    assert set(lengths) == {timedelta(seconds=10)}
    assert {w["end"] - w["start"] for w in want["window"]} == {timedelta(seconds=10)}


def test_sessionization_port_equals_the_original_in_complete_mode(
    spark: SparkSession, feed: Callable[[], int], tmp_path: Path
) -> None:
    """The original as Spark ships it (update mode) is refused by Spark 4 at start; in complete
    mode, the nearest Spark allows, its sessions equal the port's: per word one session of its
    count of events, 10 seconds (one more when the arrivals straddle a second) long."""

    def query(lines: DataFrame) -> DataFrame:  # the original's, as Spark ships it
        events = lines.select(
            explode(split(lines.value, " ")).alias("sessionId"), lines.timestamp.alias("eventTime")
        )
        return (
            events.groupBy(session_window(events.eventTime, "10 seconds").alias("session"),
                           events.sessionId)
            .agg(count("*").alias("numEvents"))
            .selectExpr("sessionId", "CAST(session.start AS LONG)", "CAST(session.end AS LONG)",
                        "CAST(session.end AS LONG) - CAST(session.start AS LONG) AS durationMs",
                        "numEvents")
        )  # fmt: skip

    shipped = query(spark.readStream.format("rate").load().selectExpr("'a' AS value", "timestamp"))
    with pytest.raises(AnalysisException) as refused:
        shipped.writeStream.outputMode("update").format("noop").start().stop()
    assert "STREAMING_OUTPUT_MODE" in str(refused.value.getCondition())
    total = sum(WORDS.values())
    want = original(spark, feed(), query, total, "original_sessions", counted="numEvents")
    db = run_port("sessionization:Sessionization", feed(), tmp_path, "--include-timestamp")
    got = pd.DataFrame(read_table(db, "word_sessions"))
    for frame in (got, want):
        assert dict(zip(frame["sessionId"], frame["numEvents"], strict=True)) == WORDS
        assert set(frame["durationMs"]) <= {10, 11}


def test_session_window_word_count_port_equals_the_original(
    spark: SparkSession, feed: Callable[[], int], tmp_path: Path
) -> None:
    """The original keeps each word's session with applyInPandasWithState and emits it after
    10 s of processing time without the word; the port says it with session_window. Per word:
    the same count, and a session from its first to its last arrival (the same second or the
    next: every line arrives at once)."""

    def session(
        key: tuple, frames: Iterator[pd.DataFrame], state: GroupState
    ) -> Iterator[pd.DataFrame]:  # the original's function, as Spark ships it
        if state.hasTimedOut:
            n, start, end = state.get
            state.remove()
            yield pd.DataFrame({"sessionId": [key[0]], "count": [n], "start": [start],
                                "end": [end]})  # fmt: skip
        else:
            start, end, n = math.inf, 0, 0
            for frame in frames:
                start = min(start, min(frame["timestamp"]))
                end = max(end, max(frame["timestamp"]))
                n += len(frame)
            if state.exists:
                old = state.get
                n, start, end = n + old[0], old[1], max(end, old[2])
            state.update((n, start, end))
            state.setTimeoutDuration(10000)
            yield pd.DataFrame()

    fields = [StructField("sessionId", StringType()), StructField("count", LongType()),
              StructField("start", LongType()), StructField("end", LongType())]  # fmt: skip

    def query(lines: DataFrame) -> DataFrame:
        events = lines.select(
            explode(split(lines.value, " ")).alias("sessionId"), lines.timestamp.cast("long")
        )
        return events.groupBy(events["sessionId"]).applyInPandasWithState(
            session, StructType(fields), StructType(fields[1:]), "Update",
            GroupStateTimeout.ProcessingTimeTimeout,
        )  # fmt: skip

    total = sum(WORDS.values())
    want = original(spark, feed(), query, total, "original_word_sessions", mode="update")
    db = run_port(
        "network_wordcount_sessions:WordSessions", feed(), tmp_path, "--include-timestamp"
    )
    got = pd.DataFrame(read_table(db, "word_sessions"))
    for frame in (got, want):
        assert dict(zip(frame["sessionId"], frame["count"], strict=True)) == WORDS
        assert set(frame["end"] - frame["start"]) <= {0, 1}
