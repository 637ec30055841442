"""Restarts resume exactly where they stopped; a SIGKILL between the sink's commit and Spark's
checkpoint commit leaves no duplicate and no gap (the sink's ledger skips the replay)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import uuid
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from slipstream.checkpoint.lifecycle import CheckpointLock
from slipstream.errors import CheckpointError
from slipstream.testing import PipelineHarness, fault
from tests.helpers import MOBILE_SAMPLES, cli_env, mobile_counts, slipstream

FILES = ("file1.json", "file2.json", "file3.json", "file4.json")


def land(input_dir: Path, names: tuple[str, ...], first_mtime: int) -> list[str]:
    """Copy sample files in, with increasing modification times: Spark's file source orders new
    files by modification time, and event-time results depend on that order."""
    lines: list[str] = []
    for i, name in enumerate(names):
        target = input_dir / name
        shutil.copy(MOBILE_SAMPLES / name, target)
        os.utime(target, (first_mtime + i, first_mtime + i))
        lines += (MOBILE_SAMPLES / name).read_text().splitlines()
    return lines


def final_windows(lines: list[str], watermark: str = "10min") -> list[tuple[str, str, int]]:
    """Append mode emits a window once the watermark (max event time - delay) passes its end."""
    counts = mobile_counts(lines)
    max_ts = pd.to_datetime(
        pd.read_json(pd.io.common.StringIO("\n".join(lines)), lines=True)["ts"],
        utc=True,
        format="ISO8601",
    ).max()
    horizon = max_ts - pd.Timedelta(watermark)
    ends = pd.to_datetime(counts["window_start"], utc=True) + pd.Timedelta("10min")
    return sorted(counts[ends <= horizon].itertuples(index=False, name=None))


def table(db: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(db) as conn:
        return sorted(
            conn.execute("SELECT window_start, action, count FROM mobile_action_counts").fetchall()
        )


def ledger(db: Path) -> list[tuple[str, int, int]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT query_id, batch_id, rows FROM _slipstream_batches ORDER BY batch_id"
        ).fetchall()


def run_args(workdir: Path, *extra: str) -> list[str]:
    return [
        "run",
        "mobile",
        "--input",
        str(workdir / "in"),
        "--state-dir",
        str(workdir / "st"),
        "--mode",
        "append",
        "--trigger",
        "available-now",
        "--max-files-per-trigger",
        "1",
        "--quiet",
        *extra,
    ]


@pytest.mark.spark
@pytest.mark.slow
def test_sigkill_after_sink_commit_before_checkpoint_commit(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    lines = land(tmp_path / "in", FILES, 1_700_000_000)
    db = tmp_path / "st" / "slipstream.db"
    # batches 0-3 read one file each; batch 4 (no new data) moves the watermark to 11:07:29 and
    # emits the two closed 10:xx windows. Die right after the sink committed batch 4.
    killed = slipstream(*run_args(tmp_path), env=cli_env(**fault("after-write", 4)))
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert table(db) == final_windows(lines)  # the sink committed...
    commits = tmp_path / "st" / "checkpoints" / "mobile" / "counts" / "commits"
    assert not (commits / "4").exists()  # ...but Spark's checkpoint did not

    again = slipstream(*run_args(tmp_path))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "batch 4 was already committed" in again.stderr
    assert (commits / "4").exists()
    assert table(db) == final_windows(lines)  # no duplicate (append mode inserts plainly)
    batches = [b for _, b, _ in ledger(db)]
    assert batches == sorted(set(batches)) == list(range(len(batches)))  # no gap, no repeat


@pytest.mark.spark
@pytest.mark.slow
def test_run_again_resumes_where_it_stopped(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    db = tmp_path / "st" / "slipstream.db"
    first = land(tmp_path / "in", FILES[:2], 1_700_000_000)
    done = slipstream(*run_args(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert table(db) == final_windows(first) == []
    seen_batches = len(ledger(db))

    later = land(tmp_path / "in", FILES[2:], 1_700_000_100)
    again = slipstream(*run_args(tmp_path, "--sink", "sqlite"))
    assert again.returncode == 0, again.stderr[-2000:]
    assert table(db) == final_windows(first + later)
    rows = ledger(db)
    assert len({q for q, _, _ in rows}) == 1  # one query id across both runs
    assert [b for _, b, _ in rows] == list(range(len(rows)))
    assert len(rows) > seen_batches  # the new files were new batches, the old ones not redone


@pytest.mark.spark
def test_restart_in_process_update_mode(spark: SparkSession, tmp_path: Path) -> None:
    seen: list[str] = []
    for names in (FILES[:2], FILES[2:]):
        with PipelineHarness(spark, "mobile", tmp_path, sink="sqlite", mode="update") as h:
            for name in names:
                text = (MOBILE_SAMPLES / name).read_text()
                seen += text.splitlines()
                h.feed(text, name=name)
                h.process()
            results = sorted((r["window_start"], r["action"], r["count"]) for r in h.results())
            assert h.totals["mobile.counts"]["rows"] == sum(
                len((MOBILE_SAMPLES / n).read_text().splitlines()) for n in names
            )
        assert results == sorted(mobile_counts(seen).itertuples(index=False, name=None))


def test_one_run_per_checkpoint(tmp_path: Path) -> None:
    with CheckpointLock(tmp_path / "ckpt"):
        with pytest.raises(CheckpointError) as err:
            CheckpointLock(tmp_path / "ckpt").acquire()
        assert err.value.code == "CHECKPOINT_IN_USE"
        assert str(os.getpid()) in err.value.message
    CheckpointLock(tmp_path / "ckpt").acquire().release()  # free again once released


def _stranded(checkpoint: Path) -> Path:
    """What a SIGKILL inside Spark's write of `offsets/0` leaves: the query's metadata and the
    offset log's hidden temp file, not yet renamed into place."""
    (checkpoint / "offsets").mkdir(parents=True)
    (checkpoint / "metadata").write_text(json.dumps({"id": str(uuid.uuid4())}))
    tmp = checkpoint / "offsets" / f".0.{uuid.uuid4()}.tmp"
    tmp.write_text('v1\n{"batchWatermarkMs":0,"batchTimesta')
    return tmp


@pytest.mark.spark
def test_a_kill_inside_the_first_offset_write_does_not_strand_the_checkpoint(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Spark alone refuses such a checkpoint at batch 0, on every restart: the crash suite's
    # random kills found it (a quarantine query killed while planning its first batch)
    (tmp_path / "raw-in").mkdir()
    (tmp_path / "raw-in" / "a.txt").write_text("a\n")
    _stranded(tmp_path / "raw-ck")
    query = (
        spark.readStream.text(str(tmp_path / "raw-in"))
        .writeStream.format("noop")
        .option("checkpointLocation", str(tmp_path / "raw-ck"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY"):
        query.awaitTermination()

    # slipstream sweeps the dead writer's temp files under the checkpoint lock, then starts
    h = PipelineHarness(spark, "mobile", tmp_path / "mobile", sink="sqlite", mode="update")
    leftovers = [_stranded(out.ctx.checkpoint) for out in h.prepared.outputs.values()]
    assert len(leftovers) == 1  # the counts query (it writes the quarantine too)
    lines = []
    with h:
        for name in FILES:
            lines += (MOBILE_SAMPLES / name).read_text().splitlines()
            h.feed((MOBILE_SAMPLES / name).read_text(), name=name)
        h.process()
        got = sorted((r["window_start"], r["action"], r["count"]) for r in h.results())
    assert got == sorted(mobile_counts(lines).itertuples(index=False, name=None))
    assert not any(p.exists() for p in leftovers)
