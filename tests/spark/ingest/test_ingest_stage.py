"""The ingest stage (`--ingest-stage true`): each input read and parsed once; the outputs read
the typed rows from bronze; the quarantine written in the same batch; the counts reconcile;
a SIGKILL between the bronze write and the quarantine write loses and doubles nothing; a
checkpoint made before it is refused. Expected tables come from independent computations
(pandas in tests.helpers / tests.trending_reference)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.errors import CheckpointError
from slipstream.sinks.quarantine import read_quarantine
from slipstream.sinks.sqlite import read_table
from slipstream.testing import PipelineHarness, fault
from slipstream.tools.generators.trending import (
    GenerationReport,
    TrendingSpec,
    generate,
    write_catalog,
)
from tests.helpers import mobile_counts
from tests.spark.ingest.test_quarantine import MALFORMED, VALID
from tests.trending_reference import article_views, counted_events, table_rows

pytestmark = pytest.mark.spark

WINDOW, SLIDE, WATERMARK = timedelta(minutes=10), timedelta(minutes=1), timedelta(minutes=10)
SRC = Path(__file__).resolve().parents[3] / "src"
STREAM = TrendingSpec(
    articles=40, users=300, rate=300.0, events=1200, seed=11, out_of_order=0.08, late=0.04,
    duplicates=0.05, malformed=0.03, unknown_article=0.03,
)  # fmt: skip


def _bronze_batches(state: Path, pipeline: str, name: str) -> list[str]:
    folder = state / "bronze" / pipeline / name
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))


def test_mobile_parses_once_and_reconciles(spark: SparkSession, tmp_path: Path) -> None:
    lines = VALID[:2] + [m[0] for m in MALFORMED] + VALID[2:]
    with PipelineHarness(
        spark, "mobile", tmp_path, sink="sqlite", mode="update", ingest_stage=True
    ) as h:
        landed = h.feed(lines, name="mixed.json")
        h.process()
        results = h.results()
        quarantined = read_quarantine(spark, h.prepared.inputs["actions"].quarantine).collect()
        # what the harness (and the dashboard's preview) reads: the ingest query's batch files
        shown = h.results("quarantine.actions")
        totals, read = h.totals, dict(h.run.totals.by_query)
    by_raw = {r["raw"]: r for r in quarantined}
    assert len(quarantined) == len(MALFORMED)
    assert sorted(r["raw"] for r in shown) == sorted(line for line, _ in MALFORMED)
    for line, reason in MALFORMED:
        assert by_raw[line]["reason"].startswith(reason), (line, by_raw[line]["reason"])
        assert by_raw[line]["source"].endswith(landed.name)
    expected = mobile_counts(VALID)
    assert sorted((r["window_start"], r["action"], r["count"]) for r in results) == sorted(
        expected.itertuples(index=False, name=None)
    )
    # one read of the raw records: the ingest query; the output read only the valid rows
    ingest = totals["mobile.quarantine.actions"]
    assert ingest["rows"] == len(lines)
    assert ingest["quarantined"] == len(MALFORMED)
    assert read["mobile.counts"]["rows"] == len(VALID)  # what the output itself read: bronze
    # its account, as read from the source, includes what the ingest query quarantined
    assert (totals["mobile.counts"]["rows"], totals["mobile.counts"]["quarantined"]) == (
        len(lines),
        len(MALFORMED),
    )
    assert len(VALID) + ingest["quarantined"] == ingest["rows"]
    assert _bronze_batches(tmp_path / "state", "mobile", "actions") == ["batch=0"]


def test_mobile_restart_reads_on_and_quarantines_exactly_once(
    spark: SparkSession, tmp_path: Path
) -> None:
    bad = [json.dumps({"id": f"x{i}", "action": "open", "ts": "nope"}) for i in range(5)]
    with PipelineHarness(spark, "mobile", tmp_path, sink="sqlite", ingest_stage=True) as h:
        h.feed(bad[:3] + VALID[:2])
        h.process()
    with PipelineHarness(spark, "mobile", tmp_path, sink="sqlite", ingest_stage=True) as h:
        h.feed(bad[3:] + VALID[2:])
        h.process()
        quarantined = read_quarantine(spark, h.prepared.inputs["actions"].quarantine).collect()
        results = h.results()
    assert sorted(r["raw"] for r in quarantined) == sorted(bad)
    expected = mobile_counts(VALID)
    assert sorted((r["window_start"], r["action"], r["count"]) for r in results) == sorted(
        expected.itertuples(index=False, name=None)
    )


def test_a_checkpoint_from_before_the_ingest_stage_is_refused(
    spark: SparkSession, tmp_path: Path
) -> None:
    # a checkpoint made without the ingest stage
    with PipelineHarness(spark, "mobile", tmp_path, sink="sqlite", ingest_stage=False) as h:
        h.feed(VALID)
        h.process()
    with pytest.raises(CheckpointError) as refused:  # refused, never restarted from zero
        PipelineHarness(spark, "mobile", tmp_path, sink="sqlite", ingest_stage=True).start()
    assert refused.value.code == "CHECKPOINT_FROM_OLDER_VERSION"
    assert "reset" in str(refused.value.fix) and "--ingest-stage false" in str(refused.value.fix)
    # and the way back: the old checkpoint goes on without the ingest stage
    with PipelineHarness(spark, "mobile", tmp_path, sink="sqlite", ingest_stage=False) as h:
        h.process()


def _stream(root: Path, spec: TrendingSpec) -> tuple[Path, Path, GenerationReport]:
    root.mkdir(parents=True, exist_ok=True)
    catalog = write_catalog(root / "catalog.csv", spec)
    report = generate(spec, root / "files")
    start = time.time() - 600  # distinct mtimes: the file source's order
    for i, path in enumerate(sorted((root / "files").iterdir())):
        os.utime(path, (start + i, start + i))
    return root / "files", catalog, report


def test_trending_available_now_equals_an_independent_computation(
    spark: SparkSession, tmp_path: Path
) -> None:
    spec = replace(STREAM, seed=21, events=1500, rate=500.0)
    files, catalog, _ = _stream(tmp_path, spec)
    shutil.copytree(files, tmp_path / "input")
    with PipelineHarness(
        spark, "trending", tmp_path, sink="sqlite", trigger="available-now", catalog=catalog,
        ingest_stage=True,
    ) as h:  # fmt: skip
        h.process()
        table = h.results()
        totals, read = h.totals, dict(h.run.totals.by_query)
        quarantine = read_quarantine(spark, h.prepared.inputs["events"].quarantine).collect()
    lines = [
        line
        for path in sorted((tmp_path / "input").iterdir())
        for line in path.read_text().splitlines()
    ]
    events, stats = counted_events([lines], WATERMARK, datetime.now(UTC))
    assert table_rows(table) == article_views(events, catalog, WINDOW, SLIDE)
    ingest = totals["trending.quarantine.events"]
    assert ingest["rows"] == len(lines)
    assert ingest["quarantined"] == len(quarantine) == stats["invalid"]
    views = read["trending.views"]
    # valid + quarantined + late + duplicates = records read
    assert views["rows"] + ingest["quarantined"] == ingest["rows"]
    assert totals["trending.views"]["rows"] == ingest["rows"]  # its account: from the source
    assert views["rows"] - views["duplicates"] - views["late"] == len(events)


def test_a_sigkill_between_bronze_and_quarantine_loses_and_doubles_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    files, catalog, report = _stream(tmp_path / "gen", STREAM)
    shutil.copytree(files, tmp_path / "input")
    command = [
        sys.executable, "-m", "slipstream", "run", "trending", "--quiet",
        "--input", str(tmp_path / "input"), "--input", f"catalog={catalog}",
        "--state-dir", str(tmp_path / "state"), "--trigger", "available-now",
        "--max-files-per-trigger", "1", "--master", "local[2]", "--ingest-stage", "true",
        "--conf", "spark.sql.shuffle.partitions=2",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(SRC), "SPARK_LOCAL_IP": "127.0.0.1"}
    killed = subprocess.run(
        command, env={**env, **fault("after-bronze", 1)}, capture_output=True, timeout=600
    )
    assert killed.returncode == -9, killed.stderr.decode()[-2000:]
    state = tmp_path / "state"
    assert "batch=1" in _bronze_batches(state, "trending", "events")
    assert not (state / "quarantine" / "trending" / "events" / "batch-1.json").exists()
    with PipelineHarness(
        spark, "trending", tmp_path, sink="sqlite", catalog=catalog, max_files_per_trigger=1,
        ingest_stage=True,
    ) as h:  # fmt: skip
        h.process()
        quarantine = read_quarantine(spark, h.prepared.inputs["events"].quarantine).collect()
    table = read_table(state / "slipstream.db", "article_views")
    # the same stream in one uninterrupted run, with the ingest stage
    with PipelineHarness(
        spark, "trending", tmp_path / "clean", sink="sqlite", catalog=catalog,
        max_files_per_trigger=1, ingest_stage=True,
    ) as h:  # fmt: skip
        for path in sorted(files.iterdir()):
            shutil.copy2(path, h.input / f".{path.name}")
            os.replace(h.input / f".{path.name}", h.input / path.name)
        h.process()
        clean_quarantine = read_quarantine(spark, h.prepared.inputs["events"].quarantine).collect()
        totals, read = h.totals, dict(h.run.totals.by_query)
    # one bronze batch per output batch (--max-files-per-trigger): late rows are judged at the
    # same boundaries as without the stage, and every line is accounted for
    ingest, views = totals["trending.quarantine.events"], read["trending.views"]
    assert report.late > 0 and report.duplicates > 0 and report.malformed > 0
    assert ingest["rows"] == report.total_lines
    assert (ingest["quarantined"], views["duplicates"], views["late"]) == (
        report.malformed,
        report.duplicates,
        report.late,
    )
    assert views["rows"] + ingest["quarantined"] == ingest["rows"]
    clean = read_table(tmp_path / "clean" / "state" / "slipstream.db", "article_views")
    assert table_rows(table) == table_rows(clean)
    assert sorted(r["raw"] for r in quarantine) == sorted(r["raw"] for r in clean_quarantine)
    assert len({r["raw"] for r in quarantine}) == len(quarantine)  # no doubles
    bronze = spark.read.parquet(str(state / "bronze" / "trending" / "events"))
    counted = bronze.groupBy("batch").count().collect()
    assert len(counted) == len(list(files.iterdir()))  # one folder per batch, no double


def test_reset_with_outputs_deletes_what_the_ingest_stage_wrote(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The ingest query writes the quarantine itself (not through Spark's file sink), so it
    marks the folder as slipstream's: `reset --outputs` deletes it with bronze and the rest."""
    import io

    from slipstream.app.reset import reset as reset_command

    with PipelineHarness(
        spark, "mobile", tmp_path, sink="sqlite", mode="update", ingest_stage=True
    ) as h:
        h.feed(VALID + [m[0] for m in MALFORMED])
        h.process()
        settings = h.prepared.settings
        quarantine = h.prepared.inputs["actions"].quarantine
    assert quarantine is not None and any(quarantine.glob("batch-*.json"))
    assert _bronze_batches(tmp_path / "state", "mobile", "actions") == ["batch=0"]
    assert reset_command(settings, outputs=True, yes=True, out=io.StringIO()) == 0
    assert not quarantine.exists() or not any(quarantine.glob("batch-*.json"))
    assert not settings.bronze_root.exists()


def _batch_spans(events_log: Path, query: str) -> list[tuple[datetime, datetime]]:
    """(start, end) of each batch of `query` that read records, from the run's event log."""
    spans = []
    for line in events_log.read_text().splitlines():
        event = json.loads(line)
        progress = event.get("progress") or {}
        if event.get("query") != query or not progress.get("numInputRows"):
            continue
        began = datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00"))
        spans.append((began, began + timedelta(milliseconds=progress["batchDuration"])))
    return spans


def test_available_now_reads_bronze_back_to_back_after_the_ingest_query(
    spark: SparkSession, tmp_path: Path
) -> None:
    """`--trigger available-now --max-files-per-trigger 1 --ingest-stage true`, as a user types
    it: the results query starts once the ingest query has ended and reads bronze one batch
    per landed file, back to back, so its table equals an independent replay of the same
    batches, late rows judged at the boundaries a direct read judges them (a results query
    beside the ingest query would catch up and run no-data batches between them)."""
    spec = replace(STREAM, seed=31, events=1500, rate=500.0)
    files, catalog, report = _stream(tmp_path / "gen", spec)
    state = tmp_path / "state"
    command = [
        sys.executable, "-m", "slipstream", "run", "trending", "--quiet",
        "--input", str(files), "--input", f"catalog={catalog}", "--sink", "sqlite",
        "--state-dir", str(state), "--trigger", "available-now",
        "--max-files-per-trigger", "1", "--master", "local[2]", "--ingest-stage", "true",
        "--conf", "spark.sql.shuffle.partitions=2",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(SRC), "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    log = state / "events" / "trending.jsonl"
    assert "finished: all input processed" in log.read_text()
    ingest = _batch_spans(log, "trending.quarantine.events")
    views = _batch_spans(log, "trending.views")
    paths = sorted(files.iterdir())
    assert len(ingest) == len(views) == len(paths) > 2  # one file, one bronze batch, each
    assert views[0][0] >= ingest[-1][1], (views, ingest)  # after it, not beside it
    batches = [path.read_text().splitlines() for path in paths]
    events, stats = counted_events(batches, WATERMARK, datetime.now(UTC))
    assert stats["late"] > 0 and stats["late"] <= report.late
    table = read_table(state / "slipstream.db", "article_views")
    assert table_rows(table) == article_views(events, catalog, WINDOW, SLIDE)
    quarantine = read_quarantine(spark, state / "quarantine" / "trending" / "events").collect()
    assert len(quarantine) == stats["invalid"] == report.malformed
