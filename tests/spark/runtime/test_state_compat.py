"""Changing a stateful pipeline and restarting it on its checkpoint (issue 28): for mobile and
trending, run 1, then run 2 on the same checkpoint with one change. A change the state cannot
take is refused before any query starts (STATE_INCOMPATIBLE); a change Spark handles runs, says
what changed, and its results equal an independent pandas computation over the input files.
Beside them, what Spark itself does with the same change and no slipstream: it runs on."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import time
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from slipstream.app import operate
from slipstream.app.reset import reset as reset_command
from slipstream.checkpoint.lifecycle import last_committed_batch
from slipstream.errors import CheckpointError
from slipstream.testing import PipelineHarness
from slipstream.tools.generators.trending import TrendingSpec, generate, write_catalog
from tests.helpers import MOBILE_SAMPLES, mobile_counts
from tests.trending_reference import article_views, counted_events, table_rows

pytestmark = pytest.mark.spark

FILES = ("file1.json", "file2.json", "file3.json", "file4.json")


def land(folder: Path, names: tuple[str, ...], first_mtime: int) -> list[str]:
    """Sample files in, with increasing modification times (the file source's order)."""
    lines: list[str] = []
    for i, name in enumerate(names):
        shutil.copy(MOBILE_SAMPLES / name, folder / name)
        os.utime(folder / name, (first_mtime + i, first_mtime + i))
        lines += (MOBILE_SAMPLES / name).read_text().splitlines()
    return lines


def mobile_table(db: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(db) as conn:
        return sorted(
            conn.execute("SELECT window_start, action, count FROM mobile_action_counts").fetchall()
        )


def expected(lines: list[str], window: str = "10min") -> list[tuple[str, str, int]]:
    return sorted(mobile_counts(lines, window).itertuples(index=False, name=None))


def mobile(spark: SparkSession, workdir: Path, **settings: Any) -> PipelineHarness:
    return PipelineHarness(spark, "mobile", workdir, sink="sqlite", **settings)


def landing(workdir: Path) -> Path:
    """The harness's landing folder: files land before an available-now run starts."""
    folder = workdir / "input"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def first_run(spark: SparkSession, workdir: Path, **settings: Any) -> list[str]:
    lines = land(landing(workdir), FILES[:2], 1_700_000_000)
    with mobile(spark, workdir, trigger="available-now", **settings) as h:
        h.process()
    return lines


def refused(spark: SparkSession, workdir: Path, **settings: Any) -> CheckpointError:
    checkpoint = workdir / "state" / "checkpoints" / "mobile" / "counts"
    before = last_committed_batch(checkpoint)
    harness = mobile(spark, workdir, trigger="available-now", **settings)
    with pytest.raises(CheckpointError) as err:
        harness.start()
    assert err.value.code == "STATE_INCOMPATIBLE"
    assert not spark.streams.active  # nothing was started
    assert last_committed_batch(checkpoint) == before
    return err.value


def test_mobile_window_change_is_refused_and_state_counts_the_open_windows(
    spark: SparkSession, tmp_path: Path
) -> None:
    lines = first_run(spark, tmp_path)
    db = tmp_path / "state" / "slipstream.db"
    assert mobile_table(db) == expected(lines)

    # `slipstream state`: the rows held are the windows the watermark has not passed
    out = StringIO()
    settings = mobile(spark, tmp_path).settings
    assert operate.state(settings, out, as_json=True, keys=1, spark=spark) == 0
    [operator] = json.loads(out.getvalue())["mobile.counts"]
    frame = mobile_counts(lines)
    ts = pd.to_datetime(pd.read_json(StringIO("\n".join(lines)), lines=True)["ts"], utc=True)
    watermark = ts.max() - pd.Timedelta("10min")
    ends = pd.to_datetime(frame["window_start"], utc=True) + pd.Timedelta("10min")
    assert operator["rows"] == int((ends > watermark).sum()) > 0
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
    assert operator["operator"] == "stateStoreSave" and operator["partitions"] == partitions
    assert operator["watermark"] == watermark.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert operator["bytes_on_disk"] > 0 and len(operator["sample"]) == 1

    error = refused(spark, tmp_path, window="5m")
    assert "--window 10m -> 5m changes the aggregation's state" in error.message
    assert "output mobile.counts" in error.message
    assert "slipstream reset mobile --outputs counts" in error.fix
    assert "--from-checkpoint" in error.fix
    assert mobile_table(db) == expected(lines)  # untouched

    # the way out: start this output over, then the new window counts everything once
    assert reset_command(settings, outputs="counts", yes=True, out=StringIO()) == 0
    lines += land(landing(tmp_path), FILES[2:], 1_700_000_100)
    with mobile(spark, tmp_path, trigger="available-now", window="5m") as h:
        h.process()
    assert mobile_table(db) == expected(lines, "5min")


def test_a_garbled_build_record_refuses_a_changed_window_and_is_kept(
    spark: SparkSession, tmp_path: Path
) -> None:
    """issue 43 break 2: with `slipstream-build.json` garbled, `--window 5m` on a 10-minute
    checkpoint ran, added 5-minute rows to the 10-minute table and overwrote the record."""
    lines = first_run(spark, tmp_path)
    db = tmp_path / "state" / "slipstream.db"
    record = tmp_path / "state" / "checkpoints" / "mobile" / "counts" / "slipstream-build.json"
    garbled = record.read_bytes()[:40]
    record.write_bytes(garbled)
    harness = mobile(spark, tmp_path, trigger="available-now", window="5m")
    with pytest.raises(CheckpointError) as err:
        harness.start()
    assert err.value.code == "CHECKPOINT_DAMAGED", err.value.render()
    assert str(record) in err.value.message
    assert "slipstream reset mobile --outputs" in err.value.fix
    assert not spark.streams.active
    assert mobile_table(db) == expected(lines)  # no 5-minute row
    assert record.read_bytes() == garbled  # not overwritten: the next run refuses again


def test_mobile_mode_change_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    first_run(spark, tmp_path)
    error = refused(spark, tmp_path, mode="append")
    assert "--mode update -> append" in error.message


def test_mobile_trigger_and_max_files_change_runs_and_equals_pandas(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = first_run(spark, tmp_path)
    with (
        caplog.at_level(logging.WARNING, logger="slipstream"),
        mobile(spark, tmp_path, max_files_per_trigger=1) as h,
    ):
        lines += land(h.input, FILES[2:], 1_700_000_100)
        h.process()
    said = caplog.text
    assert "changed since its checkpoint was built, and safe" in said
    assert "--trigger available-now -> default" in said and "max_files_per_trigger" in said
    assert mobile_table(tmp_path / "state" / "slipstream.db") == expected(lines)


def test_mobile_watermark_change_runs_and_equals_pandas(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = first_run(spark, tmp_path)
    lines += land(landing(tmp_path), FILES[2:], 1_700_000_100)
    with (
        caplog.at_level(logging.WARNING, logger="slipstream"),
        mobile(spark, tmp_path, trigger="available-now", watermark="1m") as h,
    ):
        h.process()
    assert "--watermark 10m -> 1m" in caplog.text
    assert mobile_table(tmp_path / "state" / "slipstream.db") == expected(lines)


def test_mobile_new_sink_on_a_resumed_checkpoint_is_named_before_start(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first_run(spark, tmp_path)
    other = tmp_path / "other.db"
    lines = land(landing(tmp_path), FILES[2:], 1_700_000_100)
    with caplog.at_level(logging.WARNING, logger="slipstream"):
        harness = PipelineHarness(
            spark, "mobile", tmp_path, sink=f"sqlite:{other}", trigger="available-now"
        )
        with harness as h:
            h.process()
    assert "is new to this checkpoint" in caplog.text
    assert "only what is written from now on" in caplog.text
    # and it does: only windows the new files touched, not the first run's
    held = mobile_table(other)
    assert held and set(held) <= set(expected(lines + first_lines()))
    assert len(held) < len(expected(lines + first_lines()))


def first_lines() -> list[str]:
    return [x for n in FILES[:2] for x in (MOBILE_SAMPLES / n).read_text().splitlines()]


# --- what Spark does with the same change, without slipstream ------------------------------


def test_without_slipstream_spark_runs_a_changed_window_on_old_state_silently(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The raw query of mobile, run twice on one checkpoint with the window 10m then 5m: Spark
    raises nothing, and the second run emits 5-minute windows over state built for 10."""
    landing, checkpoint = tmp_path / "in", tmp_path / "cp"
    landing.mkdir()
    emitted: list[tuple[datetime, datetime]] = []

    def collect(batch: Any, _: int) -> None:
        emitted.extend((r.window.start, r.window.end) for r in batch.collect())

    def run(window: str) -> None:
        frame = (
            spark.readStream.schema("id STRING, action STRING, ts TIMESTAMP")
            .json(str(landing))
            .withWatermark("ts", "10 minutes")
            .groupBy(F.window("ts", window), "action")
            .count()
        )
        query = (
            frame.writeStream.outputMode("update")
            .option("checkpointLocation", str(checkpoint))
            .foreachBatch(collect)
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        assert query.exception() is None

    land(landing, FILES[:2], 1_700_000_000)
    run("10 minutes")
    emitted.clear()
    land(landing, FILES[2:], 1_700_000_100)
    run("5 minutes")  # no error: Spark ran on
    lengths = {end - start for start, end in emitted}
    assert timedelta(minutes=5) in lengths


# --- trending -----------------------------------------------------------------------------

SPEC = TrendingSpec(articles=20, users=100, rate=200.0, events=600, seed=5, out_of_order=0.05)


def trending_files(tmp_path: Path) -> tuple[list[Path], Path]:
    catalog = write_catalog(tmp_path / "catalog.csv", SPEC)
    generate(SPEC, tmp_path / "files")
    files = sorted((tmp_path / "files").glob("views-*.jsonl"))
    start = time.time() - 600
    for i, path in enumerate(files):
        os.utime(path, (start + i, start + i))
    return files, catalog


def trending(
    spark: SparkSession, workdir: Path, catalog: Path, files: list[Path], **kw: Any
) -> list[dict[str, Any]]:
    folder = landing(workdir)
    for path in files:  # before the start: an available-now run reads what is there
        shutil.copy2(path, folder / f".{path.name}")
        os.replace(folder / f".{path.name}", folder / path.name)
    with PipelineHarness(
        spark, "trending", workdir, sink="sqlite", catalog=catalog, max_files_per_trigger=1, **kw
    ) as h:
        h.process()
        return h.results()


def test_trending_slide_and_window_changes_are_refused(spark: SparkSession, tmp_path: Path) -> None:
    files, catalog = trending_files(tmp_path)
    trending(spark, tmp_path / "run", catalog, files[:3])
    for change, said in (
        ({"slide": "5m"}, "--slide 1m -> 5m changes the aggregation's state"),
        ({"window": "5m"}, "--window 10m -> 5m changes the aggregation's state"),
    ):
        harness = PipelineHarness(
            spark, "trending", tmp_path / "run", sink="sqlite", catalog=catalog, **change
        )
        with pytest.raises(CheckpointError) as err:
            harness.start()
        assert err.value.code == "STATE_INCOMPATIBLE" and said in err.value.message
        assert "output trending.views" in err.value.message
        assert not spark.streams.active


def test_trending_trigger_change_runs_and_equals_the_independent_model(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    files, catalog = trending_files(tmp_path)
    trending(spark, tmp_path / "run", catalog, files[:3])
    with caplog.at_level(logging.WARNING, logger="slipstream"):
        table = trending(spark, tmp_path / "run", catalog, files[3:], trigger="available-now")
    assert "--trigger default -> available-now" in caplog.text
    batches = [p.read_text(encoding="utf-8").splitlines() for p in files]
    events, _ = counted_events(batches, timedelta(minutes=10), datetime.now(UTC))
    assert table_rows(table) == article_views(
        events, catalog, timedelta(minutes=10), timedelta(minutes=1)
    )
