"""The trending pipeline on local Spark: exactness, late data, duplicates, accounting, restarts,
a SIGKILL mid-batch, expectations and the archive.

Every expected table comes from `trending_reference` (plain Python + pandas, no slipstream code)
or from hand-written events. Streams are small (a few thousand events) and batch boundaries are
controlled with maxFilesPerTrigger=1; nothing waits by sleeping."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.core.files import write_atomically
from slipstream.ingest.expectations import Expectation, ExpectationFailed
from slipstream.monitor.accounts import output_account
from slipstream.monitor.state import read_state
from slipstream.pipelines.trending import TrendingPipeline
from slipstream.sinks.quarantine import read_quarantine
from slipstream.sinks.sqlite import read_table
from slipstream.testing import PipelineHarness, fault
from slipstream.tools.generators.trending import (
    GenerationReport,
    TrendingSpec,
    generate,
    write_catalog,
)
from slipstream.tools.serving import top_articles
from tests.helpers import late_records
from tests.trending_reference import article_views, counted_events, table_rows

pytestmark = pytest.mark.spark

SRC = Path(__file__).resolve().parents[3] / "src"
RESULTS = "trending.views"
WINDOW, SLIDE, WATERMARK = timedelta(minutes=10), timedelta(minutes=1), timedelta(minutes=10)
# Dirty, small, one file per second of event time; late events appear from the third file on.
STREAM = TrendingSpec(
    articles=40,
    users=300,
    rate=300.0,
    events=1200,
    seed=11,
    out_of_order=0.08,
    late=0.04,
    duplicates=0.05,
    malformed=0.03,
    unknown_article=0.03,
)


def _files(directory: Path) -> list[Path]:
    return sorted(directory.glob("views-*.jsonl"))


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _event(event_id: str, article: str, ts: str, user: str | None = "u1") -> str:
    record: dict[str, Any] = {"event_id": event_id, "article_id": article, "ts": ts}
    if user is not None:
        record["user_id"] = user
    return json.dumps(record)


def _now() -> datetime:
    return datetime.now(UTC)


# --- exactness: one available-now batch -----------------------------------------------------


def test_available_now_run_equals_an_independent_computation(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = replace(STREAM, seed=21, events=1500, rate=500.0)
    catalog = write_catalog(tmp_path / "catalog.csv", spec)
    report = generate(spec, tmp_path / "input")
    # The expectations' cases, which the generator does not write.
    write_atomically(
        tmp_path / "input",
        "views-99999999.jsonl",
        [
            _event("x-future", "a0001", "2099-01-01T00:00:00Z"),  # the event-time guard
            _event("x-shape", "A-17", "2026-01-01T00:00:01Z"),  # article_id_format: drop
            _event("x-empty", "", "2026-01-01T00:00:01Z"),  # article_id_format: drop
            _event("x-anon", "a0002", "2026-01-01T00:00:02Z", user=None),  # user_id: warn
        ],
    )
    with PipelineHarness(
        spark, "trending", tmp_path, sink="sqlite", trigger="available-now", catalog=catalog
    ) as h:
        h.process()
        table = h.results()
        totals = h.totals[RESULTS]
        queries = set(h.totals)
        quarantine = read_quarantine(spark, h.prepared.inputs["events"].quarantine).collect()
        log = [json.loads(x) for x in h.prepared.settings.event_log.read_text().splitlines()]

    lines = [line for path in _files(tmp_path / "input") for line in _lines(path)]
    events, stats = counted_events([lines], WATERMARK, _now())  # one batch: nothing is late
    assert stats["late"] == 0
    assert table_rows(table) == article_views(events, catalog, WINDOW, SLIDE)
    # every unknown article is counted and flagged
    unknown = {r["article_id"] for r in table if not r["in_catalog"]}
    assert unknown and all(r["title"] is None for r in table if not r["in_catalog"])
    assert len(events) == report.valid_unique + 1  # + x-anon
    assert totals["duplicates"] == stats["duplicates"] == report.duplicates
    assert totals["late"] == 0
    assert totals["quarantined"] == report.malformed + 3 == stats["invalid"]
    assert totals["expectations"] == {"article_id_format": 2, "user_id_present": 1}
    reasons = sorted(r["reason"] for r in quarantine if r["reason"].startswith(("exp", "event")))
    assert reasons == [
        "event_time_too_far_in_future: ts more than 24h after the batch's time",
        "expectation article_id_format failed",
        "expectation article_id_format failed",
    ]
    assert len(quarantine) == totals["quarantined"]
    # the output wrote the quarantine from its own read (no query beside it), and its line
    # reconciles: read = valid + quarantined + late + duplicates (issue 30, item 7)
    assert queries == {RESULTS} and totals["rows"] == len(lines)
    line = output_account(RESULTS, totals)
    # the rows the sink wrote, by its own count, in the event log: one data batch upserted each
    # row of the table once (Spark's numOutputRows is -1 for foreachBatch); the quarantine's
    # file sink does not count
    progress = [r for r in log if r["event"] == "progress"]
    written = [r["written_rows"] for r in progress if r["query"] == RESULTS]
    assert written and sum(written) == len(table)
    assert not any("written_rows" in r for r in progress if r["query"] != RESULTS)
    assert (
        f"{len(lines):,} records read = {len(events):,} valid + {len(quarantine):,} quarantined "
        f"+ 0 late (dropped by the watermark) + {report.duplicates:,} duplicates dropped"
    ) in line, line


# --- late data and duplicates across files, batches and a restart --------------------------


@pytest.fixture(scope="module")
def restarted(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two runs on one checkpoint, one file per batch, window 10m sliding by 5m, archive on.

    run 1: f1 = e1, e2, e3 and e1 again; f2 = e1 again (another file and batch), e4 at 00:30.
           The watermark ends at 00:30 - 10m = 00:20.
    run 2: f3 = L1 00:05 and L2 00:19:59 (late: at or before 00:20), W1 00:22 (inside the
           watermark), e2 again (duplicate across the restart), e5 00:40."""
    root = tmp_path_factory.mktemp("restart")
    catalog = write_catalog(root / "catalog.csv", TrendingSpec(articles=5))
    settings = {
        "sink": ["sqlite", f"archive=parquet:{root / 'archive'}"],
        "catalog": catalog,
        "slide": "5m",
        "max_files_per_trigger": 1,
    }
    day = "2026-01-01T00:"
    at = {  # event id: (article, time after 00:00)
        "e1": ("a0001", "20:00Z"),
        "e2": ("a0001", "21:00Z"),
        "e3": ("a0002", "25:00+00:00"),
        "e4": ("a0001", "30:00Z"),
        "e5": ("a0004", "40:00Z"),
        "L1": ("a0001", "05:00Z"),
        "L2": ("a0003", "19:59Z"),
        "W1": ("a0001", "22:00Z"),
    }

    def file(*ids: str) -> list[str]:
        return [_event(i, at[i][0], day + at[i][1]) for i in ids]

    with PipelineHarness(spark, "trending", root, **settings) as h:
        h.feed(file("e1", "e2", "e3", "e1"))
        h.feed(file("e1", "e4"))
        h.process()
        first = dict(h.totals[RESULTS])
    with PipelineHarness(spark, "trending", root, **settings) as h:
        h.feed(file("L1", "L2", "W1", "e2", "e5"), name="batch-00002.json")
        h.process()
        second = dict(h.totals[RESULTS])
        table = h.results()
        watermark = h.progress("archive")[-1]["eventTime"]["watermark"]
    frame = spark.read.parquet(str(root / "archive"))
    iso = "yyyy-MM-dd'T'HH:mm:ss'Z'"  # the session time zone is UTC
    archived = [
        r.asDict()
        for r in frame.select(
            F.date_format("window_start", iso).alias("window_start"), "article_id", "views"
        ).collect()
    ]
    return {"first": first, "second": second, "table": table, "catalog": catalog,
            "archived": archived, "watermark": watermark}  # fmt: skip


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_restart_drops_and_counts_late_rows_and_keeps_rows_inside_the_watermark(
    restarted: dict[str, Any],
) -> None:
    assert restarted["first"]["late"] == 0
    assert restarted["second"]["late"] == 2  # L1, L2
    counted = [
        ("e1", "a0001", "20:00"),
        ("e2", "a0001", "21:00"),
        ("e3", "a0002", "25:00"),
        ("e4", "a0001", "30:00"),
        ("W1", "a0001", "22:00"),
        ("e5", "a0004", "40:00"),
    ]
    events = [
        {"event_id": e, "article_id": a, "ts": _ts(f"2026-01-01T00:{t}:00Z")} for e, a, t in counted
    ]
    expected = article_views(events, restarted["catalog"], WINDOW, timedelta(minutes=5))
    assert table_rows(restarted["table"]) == expected


def test_duplicates_count_once_across_files_batches_and_a_restart(
    restarted: dict[str, Any],
) -> None:
    assert restarted["first"]["duplicates"] == 2  # e1 in the same file, e1 in the next batch
    assert restarted["second"]["duplicates"] == 1  # e2 after the restart
    views = {(r["window_start"], r["article_id"]): r["views"] for r in restarted["table"]}
    # a0001 in [00:15, 00:25): e1 20:00, e2 21:00, W1 22:00 -- each once
    assert views[("2026-01-01T00:15:00Z", "a0001")] == 3


def test_archive_holds_the_finalised_windows_with_their_final_counts(
    restarted: dict[str, Any],
) -> None:
    watermark = _ts(restarted["watermark"])
    assert watermark == _ts("2026-01-01T00:30:00Z")  # e5 at 00:40 - 10m
    final = {
        (r["window_start"], r["article_id"]): r["views"]
        for r in restarted["table"]
        if _ts(r["window_end"]) <= watermark
    }
    archived = {(r["window_start"], r["article_id"]): r["views"] for r in restarted["archived"]}
    assert final and archived == final


# --- one file per batch: accounting, restart mid-stream, SIGKILL mid-batch -------------------


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, GenerationReport]:
    root = tmp_path_factory.mktemp("stream")
    catalog = write_catalog(root / "catalog.csv", STREAM)
    report = generate(STREAM, root / "files")
    # Distinct modification times, 1 s apart: the files source orders new files by mtime, and
    # with one file per batch the order decides which rows are late.
    start = time.time() - 600
    for i, path in enumerate(_files(root / "files")):
        os.utime(path, (start + i, start + i))
    return root, catalog, report


def _run_in_batches(
    spark: SparkSession, workdir: Path, catalog: Path, parts: list[list[Path]], **params: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Each part is fed to a fresh harness on the same checkpoint (a stop and restart between)."""
    totals: dict[str, int] = {"rows": 0, "quarantined": 0, "late": 0, "duplicates": 0}
    table: list[dict[str, Any]] = []
    for files in parts:
        with PipelineHarness(
            spark, "trending", workdir, sink="sqlite", catalog=catalog, max_files_per_trigger=1,
            **params,
        ) as h:  # fmt: skip
            for path in files:
                shutil.copy2(path, h.input / f".{path.name}")  # keeps the mtime order
                os.replace(h.input / f".{path.name}", h.input / path.name)
            h.process()
            for key in totals:
                totals[key] += h.totals[RESULTS][key]
            table = h.results()
    return table, totals


@pytest.fixture(scope="module")
def one_go(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory, stream: Any
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    root, catalog, _ = stream
    return _run_in_batches(
        spark, tmp_path_factory.mktemp("one-go"), catalog, [_files(root / "files")]
    )


def test_accounting_valid_quarantined_duplicates_and_late_add_up_to_the_lines_sent(
    stream: tuple[Path, Path, GenerationReport], one_go: Any
) -> None:
    root, catalog, report = stream
    table, totals = one_go
    assert report.late > 0 and report.duplicates > 0 and report.malformed > 0
    windows_per_event = WINDOW // SLIDE
    valid = sum(r["views"] for r in table) // windows_per_event
    assert totals["rows"] == report.total_lines
    assert (totals["quarantined"], totals["duplicates"], totals["late"]) == (
        report.malformed,
        report.duplicates,
        report.late,
    )
    assert valid == report.valid_unique - report.late
    assert valid + totals["quarantined"] + totals["duplicates"] + totals["late"] == (
        report.total_lines
    )
    # and the table is the independent model's, batch by batch
    batches = [_lines(path) for path in _files(root / "files")]
    events, stats = counted_events(batches, WATERMARK, _now())
    assert stats["late"] == report.late
    assert table_rows(table) == article_views(events, catalog, WINDOW, SLIDE)


def test_a_restart_in_the_middle_of_the_stream_gives_the_same_final_table(
    spark: SparkSession, tmp_path: Path, stream: Any, one_go: Any
) -> None:
    root, catalog, _ = stream
    files = _files(root / "files")
    table, totals = _run_in_batches(spark, tmp_path, catalog, [files[:3], files[3:]])
    assert table_rows(table) == table_rows(one_go[0])
    assert totals == one_go[1]


def test_dedup_by_timers_keeps_the_same_table_counts_and_dead_letter(
    spark: SparkSession, tmp_path: Path, stream: Any, one_go: Any
) -> None:
    """`--dedup timers` (a transformWithState whose ids expire by event-time timers) over the
    same files, stopped and restarted in the middle (its ids and timers restored from the
    checkpoint): the table and every count equal the run with Spark's operator (itself checked
    against the reference above), the late records are in the dead-letter, and `slipstream
    state` counts the ids held: the reference's kept events the final watermark has not passed
    by the watermark's delay."""
    root, catalog, report = stream
    files = _files(root / "files")
    table, totals = _run_in_batches(
        spark, tmp_path, catalog, [files[:3], files[3:]], dedup="timers"
    )
    assert table_rows(table) == table_rows(one_go[0])
    assert totals == one_go[1]
    written = late_records(tmp_path / "state", "trending", "views")
    assert sum(len(rows) for rows in written.values()) == report.late
    checkpoint = tmp_path / "state" / "checkpoints" / "trending" / "views"
    (timers,) = [o for o in read_state(spark, checkpoint) if o.operator.startswith("transform")]
    assert timers.watermark is not None
    mark = datetime.fromisoformat(timers.watermark.replace("Z", "+00:00"))
    events, _ = counted_events([_lines(path) for path in files], WATERMARK, _now())
    assert timers.rows == len({e["event_id"] for e in events if e["ts"] + WATERMARK > mark})


@pytest.mark.slow
def test_a_sigkill_mid_batch_then_restart_gives_the_same_final_table(
    spark: SparkSession, tmp_path: Path, stream: Any, one_go: Any
) -> None:
    """`slipstream run` in a subprocess SIGKILLs itself after the sink committed batch 1 and
    before Spark's commit log; the same run restarted (in this process, to save a JVM start)
    replays batch 1, which the ledger skips, and finishes with the uninterrupted run's table."""
    root, catalog, _ = stream
    shutil.copytree(root / "files", tmp_path / "input")
    command = [
        sys.executable, "-m", "slipstream", "run", "trending", "--quiet",
        "--input", str(tmp_path / "input"), "--input", f"catalog={catalog}",
        "--state-dir", str(tmp_path / "state"), "--trigger", "available-now",
        "--max-files-per-trigger", "1", "--master", "local[2]",
        "--conf", "spark.sql.shuffle.partitions=2",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(SRC), "SPARK_LOCAL_IP": "127.0.0.1"}
    killed = subprocess.run(
        command, env={**env, **fault("after-write", 1)}, capture_output=True, timeout=300
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    checkpoint = tmp_path / "state" / "checkpoints" / "trending" / "views"
    assert last_committed_batch(checkpoint) == 0  # the sink committed batch 1, Spark did not
    db = tmp_path / "state" / "slipstream.db"
    assert {r["batch_id"] for r in read_table(db, "_slipstream_batches")} == {0, 1}
    with PipelineHarness(
        spark, "trending", tmp_path, sink="sqlite", catalog=catalog, max_files_per_trigger=1
    ) as h:
        h.process()
        assert h.prepared.sink.skipped_batches == 1  # type: ignore[attr-defined]
    assert table_rows(read_table(db, "article_views")) == table_rows(one_go[0])
    ledger = read_table(db, "_slipstream_batches")
    assert sorted(r["batch_id"] for r in ledger) == list(range(len(ledger)))  # no gap, no dup


# --- the read side and the fail strength ----------------------------------------------------


def test_top_articles_reads_the_current_and_latest_complete_window(
    one_go: Any, tmp_path: Path
) -> None:
    table, _ = one_go
    import sqlite3

    db = tmp_path / "views.db"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE article_views (window_start TEXT, window_end TEXT, article_id TEXT, "
            "title TEXT, section TEXT, views BIGINT, in_catalog BOOLEAN)"
        )
        conn.executemany(
            "INSERT INTO article_views VALUES (?, ?, ?, ?, ?, ?, ?)",
            [tuple(r.values()) for r in table],
        )
    tops = top_articles(db, n=5)
    latest_start = max(r["window_start"] for r in table)
    current = tops["current"]
    assert current and current[0]["window_end"] == (
        (_ts(latest_start) + SLIDE).strftime("%Y-%m-%dT%H:%M:%SZ")
    )
    in_window = sorted(
        (r for r in table if r["window_end"] == current[0]["window_end"]),
        key=lambda r: (-r["views"], r["article_id"]),
    )
    assert [r["article_id"] for r in current] == [r["article_id"] for r in in_window[:5]]
    assert [r["rank"] for r in current] == [1, 2, 3, 4, 5]


class _StrictTrending(TrendingPipeline):
    def expectations(self, input_name: str, params: Any) -> Any:
        return (
            *super().expectations(input_name, params),
            Expectation("no_a999", "article_id <> 'a999'", "fail"),
        )


def test_a_fail_expectation_stops_the_query_with_its_code(
    spark: SparkSession, tmp_path: Path
) -> None:
    catalog = write_catalog(tmp_path / "catalog.csv", TrendingSpec(articles=5))
    with PipelineHarness(spark, _StrictTrending(), tmp_path, sink="sqlite", catalog=catalog) as h:
        h.feed([_event("ok", "a0001", "2026-01-01T00:00:00Z"),
                _event("bad", "a999", "2026-01-01T00:00:01Z")])  # fmt: skip
        with pytest.raises(ExpectationFailed) as caught:
            h.process()
    assert caught.value.code == "EXPECTATION_FAILED"
    assert "no_a999" in caught.value.message and '"bad"' in caught.value.message
    assert read_table(h.prepared.sink.path, "article_views") == []  # type: ignore[attr-defined]


@pytest.mark.slow
def test_the_demo_shows_a_live_top_ten_and_cleans_up(spark: SparkSession, tmp_path: Path) -> None:
    import io

    from slipstream.tools.demo_trending import demo

    out = io.StringIO()
    assert demo(tmp_path / "demo-state", out, rate=1000, max_batches=2) == 0
    text = out.getvalue()
    assert text.count("top 10 of the current window") >= 2
    assert "sustained:" in text and "outputs:" in text
    assert re.search(r"^dashboard   http://127\.0\.0\.1:\d+/$", text, re.M)  # make demo shows it
    report = json.loads(
        (tmp_path / "demo-state" / "generator" / "trending-report.json").read_text()
    )
    assert report["interrupted"] is True  # stopped by the demo, after its current file
    db = tmp_path / "demo-state" / "slipstream.db"
    assert len(top_articles(db)["current"]) == 10
