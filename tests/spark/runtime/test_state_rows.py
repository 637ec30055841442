"""issue 40 item 2: a finite run's state stores do not count their rows (RocksDB reads every key
before it writes it to count them: 1.07-1.28x trending's CPU over a backfill), and says so rather
than a false 0; a later run that counts them counts the checkpoint's rows right.

Real subprocesses of the CLI; the rows the state holds are read with Spark's own state reader
(`statestore`), not with the count under test."""

from __future__ import annotations

import io
import json
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from slipstream.checkpoint.logs import recorded_conf
from slipstream.runtime.partitions import HDFS_STORE, ROCKSDB_STORE, STATE_ROWS_COUNTED
from slipstream.settings.session import STATE_PROVIDER
from tests.helpers import slipstream

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BASE = datetime(2018, 3, 2, 10, 0, 0)


def land(folder: Path, name: str, first: int, n: int) -> None:
    """`mobile` records one second apart from second `first`: a window of their own each."""
    lines = [
        json.dumps({"id": "p1", "action": "open", "ts": (BASE + timedelta(seconds=i)).isoformat()})
        for i in range(first, first + n)
    ]
    staging = folder.parent / f".{name}"
    staging.write_text("".join(line + "\n" for line in lines))
    staging.rename(folder / name)


def batch_lines(stdout: str) -> list[str]:
    return [
        line for line in stdout.splitlines() if line.startswith("mobile.counts") and "batch" in line
    ]


def held(spark: SparkSession, checkpoint: Path) -> int:
    """The rows the aggregation's state holds after the last batch, by Spark's state reader."""
    return spark.read.format("statestore").load(str(checkpoint)).count()


def test_a_finite_run_does_not_count_state_rows_and_a_live_count_is_right_after_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    land(landing, "a.json", 0, 40)
    # RocksDB: Spark's own store (a small backfill's) always counts
    run = ["run", "mobile", "--input", "landing", "--window", "10s"]
    run += ["--conf", f"{STATE_PROVIDER}={ROCKSDB_STORE}"]
    first = slipstream(*run, "--trigger", "available-now", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    lines = batch_lines(first.stdout)
    assert lines and all("| state - |" in line for line in lines), first.stdout
    events = tmp_path / "state" / "events" / "mobile.jsonl"
    progress = [json.loads(x) for x in events.read_text().splitlines() if '"progress"' in x]
    assert progress and all(r.get("state_rows_counted") is False for r in progress)

    # the same checkpoint, counted: Spark counts the keys the uncounted versions hold
    land(landing, "b.json", 40, 20)
    counted = f"{STATE_ROWS_COUNTED}=true"
    second = slipstream(*run, "--trigger", "available-now", "--conf", counted, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    last = batch_lines(second.stdout)[-1]
    shown = int(last.split("| state ")[1].split(" |")[0].replace(",", ""))
    checkpoint = tmp_path / "state" / "checkpoints" / "mobile" / "counts"
    assert shown == held(spark, checkpoint) > 0, second.stdout


def backfill_here(landing: Path, state: Path, records: int, *flags: str) -> io.StringIO:
    """`records` landed, then `mobile` run available-now in this process; what it printed."""
    from slipstream.app.cli import main

    landing.mkdir()
    land(landing, "a.json", 0, records)
    out = io.StringIO()
    argv = ["run", "mobile", "--input", str(landing), "--window", "10s", "--state-dir", str(state)]
    assert main([*argv, *flags, "--trigger", "available-now"], out=out) == 0, out.getvalue()
    return out


def test_a_finite_run_in_this_process_leaves_the_session_counting(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The row count is set while each query starts, not left in the session: a later query
    on the same session (a live run, a test's harness) counts its rows."""
    landing = tmp_path / "landing"
    out = backfill_here(
        landing, tmp_path / "state", 10, "--conf", f"{STATE_PROVIDER}={ROCKSDB_STORE}"
    )
    assert all("| state - |" in line for line in batch_lines(out.getvalue())), out.getvalue()
    assert spark.conf.get(STATE_ROWS_COUNTED, None) is None  # the session's own: unset

    counts = spark.readStream.schema("k STRING").json(str(landing)).groupBy("k").count()
    query = (
        counts.writeStream.outputMode("update")
        .format("noop")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .start()
    )
    try:
        query.processAllAvailable()
        assert query.lastProgress["stateOperators"][0]["numRowsTotal"] == 1  # one key: null
    finally:
        query.stop()


def test_a_small_backfill_keeps_its_state_in_sparks_own_store_and_counts_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A backfill whose input is small beside the driver's heap gets Spark's HDFS-backed store
    (runtime/partitions.py), fixed in its checkpoint, and its batch lines count the rows."""
    state = tmp_path / "state"
    out = backfill_here(tmp_path / "landing", state, 30)
    checkpoint = state / "checkpoints" / "mobile" / "counts"
    assert recorded_conf(checkpoint, STATE_PROVIDER) == HDFS_STORE
    last = batch_lines(out.getvalue())[-1]
    shown = int(last.split("| state ")[1].split(" |")[0].replace(",", ""))
    assert shown == held(spark, checkpoint) > 0, out.getvalue()
