"""Bronze -> silver through Delta on the Spark 4.2 line: mobile writes its counts with
`--sink delta:DIR`, and examples/action_totals.py reads that table with
`--input counts=delta:DIR` into a Delta table of its own, which delta-rs reads back equal to
pandas over mobile's original input."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from slipstream.tools.demo import copy_samples
from tests.e2e.delta.test_delta_sink import lines_of, txn_versions
from tests.helpers import REPO, cli_env, mobile_counts, slipstream

pytestmark = [pytest.mark.delta, pytest.mark.spark, pytest.mark.slow]


def run(args: list[str], state: Path) -> None:
    # src for slipstream, the checkout's root for examples.action_totals
    env = cli_env(PYTHONPATH=os.pathsep.join([str(REPO / "src"), str(REPO)]))
    command = ["run", *args, "--state-dir", str(state), "--trigger", "available-now"]
    done = slipstream(*command, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_a_pipeline_reads_another_pipelines_delta_output(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    files = copy_samples(tmp_path / "landing", "mobile")
    bronze, silver = tmp_path / "tables" / "mobile_counts", tmp_path / "tables" / "totals"
    run(["mobile", "--input", str(tmp_path / "landing"), "--mode", "complete",
         "--sink", f"delta:{bronze}"], tmp_path / "bronze_state")  # fmt: skip
    # all of landing in one batch: one commit that adds files only, which a Delta stream reads
    assert txn_versions(bronze) == [0]
    run(["examples.action_totals:ActionTotals", "--input", f"counts=delta:{bronze}",
         "--sink", f"delta:{silver}"], tmp_path / "silver_state")  # fmt: skip

    got = DeltaTable(str(silver)).to_pandas()[["action", "actions", "windows"]]
    got = got.sort_values("action").reset_index(drop=True)
    # pandas over mobile's raw lines: its 10-minute window counts, summed per action
    windows = mobile_counts(lines_of(files))
    expected = windows.groupby("action").agg(
        actions=("count", "sum"), windows=("window_start", "nunique")
    )
    pd.testing.assert_frame_equal(got, expected.reset_index(), check_dtype=False)
