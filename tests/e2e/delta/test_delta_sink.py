"""`--sink delta:DIR` (sinks/delta.py) on the Spark 4.2 line: mobile's table read back by
delta-rs (`deltalake`, not Spark) equals pandas over the input, and after a SIGKILL between
Delta's commit and the checkpoint's, the restart's replay is skipped by Delta's idempotent
writes: one commit per batch id, no doubled or missing rows."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from slipstream.testing.harness import fault
from slipstream.tools.demo import copy_samples
from tests.helpers import REPO, mobile_counts

pytestmark = [pytest.mark.delta, pytest.mark.spark, pytest.mark.slow]


def run_mobile(tmp_path: Path, mode: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "slipstream", "run", "mobile"]
    command += ["--input", str(tmp_path / "landing"), "--state-dir", str(tmp_path / "state")]
    command += ["--trigger", "available-now", "--mode", mode, "--max-files-per-trigger", "1"]
    command += ["--sink", f"delta:{tmp_path / 'out'}"]
    full = {**os.environ, "PYTHONPATH": str(REPO / "src"), **env}
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=full)


def read_table(path: Path) -> pd.DataFrame:
    """The table as delta-rs reads it, shaped as `mobile_counts`."""
    from deltalake import DeltaTable

    frame = DeltaTable(str(path)).to_pandas()[["window_start", "action", "count"]]
    frame["window_start"] = pd.to_datetime(frame["window_start"], utc=True).dt.strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    return frame.sort_values(["window_start", "action"]).reset_index(drop=True)


def txn_versions(path: Path) -> list[int]:
    """The batch ids (`txn` actions' versions) of the table's commits, read from its log."""
    found = []
    for entry in sorted((path / "_delta_log").glob("*.json")):
        for line in entry.read_text().splitlines():
            action = json.loads(line)
            if "txn" in action:
                found.append(int(action["txn"]["version"]))
    return found


def lines_of(files: list[Path]) -> list[str]:
    return [line for f in files for line in f.read_text().splitlines() if line.strip()]


def test_complete_mode_writes_what_pandas_counts_one_commit_a_batch(tmp_path: Path) -> None:
    files = copy_samples(tmp_path / "landing", "mobile")
    done = run_mobile(tmp_path, "complete", {})
    assert done.returncode == 0, done.stderr[-3000:]
    assert ":: loading settings ::" not in done.stderr  # Ivy's report is not shown
    pd.testing.assert_frame_equal(
        read_table(tmp_path / "out"), mobile_counts(lines_of(files)), check_dtype=False
    )
    assert txn_versions(tmp_path / "out") == list(range(len(files)))


def test_a_batch_killed_after_its_merge_is_not_merged_again(tmp_path: Path) -> None:
    files = copy_samples(tmp_path / "landing", "mobile")
    killed = run_mobile(tmp_path, "update", fault("after-write", 1))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert txn_versions(tmp_path / "out") == [0, 1]  # batch 1 is in the table
    again = run_mobile(tmp_path, "update", {})
    assert again.returncode == 0, again.stderr[-3000:]
    pd.testing.assert_frame_equal(
        read_table(tmp_path / "out"), mobile_counts(lines_of(files)), check_dtype=False
    )
    # the restart replayed batch 1 (its checkpoint commit was lost) and did not write it
    # again: each batch id once, in order (update mode may end with a batch of no data that
    # only moves the watermark)
    versions = txn_versions(tmp_path / "out")
    assert versions == list(range(len(versions))) and len(versions) >= len(files), versions
    assert "a replay, not written again" in again.stderr + again.stdout
