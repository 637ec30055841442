"""`--input delta:PATH?...` (sources/delta.py) on the Spark 4.2 line: a table delta-rs wrote
(not Spark) is read as mobile's input, two commits a batch each, into a Delta table that delta-rs
reads back equal to pandas over the rows written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.e2e.delta.test_delta_sink import read_table, txn_versions
from tests.helpers import REPO

pytestmark = [pytest.mark.delta, pytest.mark.spark, pytest.mark.slow]

ROWS = [
    ("a1", "open", "2018-03-02T10:01:00Z"),
    ("a2", "open", "2018-03-02T10:04:00Z"),
    ("a3", "close", "2018-03-02T10:09:59Z"),
    ("a4", "open", "2018-03-02T10:10:00Z"),
    ("a5", "crash", "2018-03-02T11:02:00Z"),
    ("a6", "close", "2018-03-02T10:05:00Z"),
]


def test_a_table_delta_rs_wrote_is_read_by_the_delta_source(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    frame = pd.DataFrame(ROWS, columns=["id", "action", "ts"])
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    table = tmp_path / "actions"
    write_deltalake(str(table), frame.iloc[:3])  # version 0
    write_deltalake(str(table), frame.iloc[3:], mode="append")  # version 1

    command = [sys.executable, "-m", "slipstream", "run", "mobile"]
    command += ["--input", f"delta:{table}?startingVersion=0&maxFilesPerTrigger=1"]
    command += ["--state-dir", str(tmp_path / "state"), "--trigger", "available-now"]
    command += ["--mode", "complete", "--sink", f"delta:{tmp_path / 'out'}"]
    full = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env=full)
    assert done.returncode == 0, done.stderr[-3000:]

    expected = frame.assign(window_start=frame["ts"].dt.floor("10min"))
    expected = expected.groupby(["window_start", "action"]).size().rename("count").reset_index()
    expected["window_start"] = expected["window_start"].dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    pd.testing.assert_frame_equal(read_table(tmp_path / "out"), expected, check_dtype=False)
    assert txn_versions(tmp_path / "out") == [0, 1]  # one file a batch: one batch a commit
