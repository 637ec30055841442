"""A batch writer (`--sink batch:...`) killed with SIGKILL at the sink's fault points, then run
again on the same checkpoint (issue 42 item 4): the SQLite table equals pandas over the input,
no batch's rows are doubled, and a batch the ledger recorded is not written again."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from examples.batch_writer import DB_ENV

from slipstream.testing.harness import fault
from slipstream.tools.demo import copy_samples
from tests.helpers import REPO, mobile_counts

pytestmark = [pytest.mark.slow, pytest.mark.spark]


def _run(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "slipstream", "run", "mobile"]
    command += ["--input", str(tmp_path / "landing"), "--state-dir", str(tmp_path / "state")]
    command += ["--trigger", "available-now", "--mode", "update", "--max-files-per-trigger", "1"]
    command += ["--sink", "batch:examples.batch_writer:to_sqlite"]
    path = os.pathsep.join([str(REPO / "src"), str(REPO)])
    full = {**os.environ, "PYTHONPATH": path, DB_ENV: str(tmp_path / "counts.db"), **env}
    return subprocess.run(command, capture_output=True, text=True, timeout=600, env=full)


@pytest.mark.parametrize(
    ("point", "replayed_by"),
    [("before-commit", "the writer, idempotent"), ("after-write", "the ledger")],
)
def test_a_killed_batch_writer_is_applied_once(
    tmp_path: Path, point: str, replayed_by: str
) -> None:
    files = copy_samples(tmp_path / "landing", "mobile")
    lines = [line for f in files for line in f.read_text().splitlines() if line.strip()]
    killed = _run(tmp_path, fault(point, 1))
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    again = _run(tmp_path, {})
    assert again.returncode == 0, again.stderr[-2000:]
    skipped = "in the batch ledger: a replay, not written again" in again.stderr + again.stdout
    assert skipped == (replayed_by == "the ledger")

    with sqlite3.connect(tmp_path / "counts.db") as conn:
        counts = pd.read_sql_query("SELECT window_start, action, count FROM counts", conn)
        changes = pd.read_sql_query("SELECT batch_id, window_start, action FROM changes", conn)
    pd.testing.assert_frame_equal(
        counts.sort_values(["window_start", "action"]).reset_index(drop=True),
        mobile_counts(lines),
        check_dtype=False,
    )
    assert not changes.duplicated().any()  # no batch's rows twice
