"""Built-in pipelines complete, exact, on a machine held busy (issue 45): 4 busy-looping
processes per core for as long as the runs last, while transformWithState's activity writes
SQLite and mobile's windowed aggregation writes PostgreSQL and Parquet files (Spark's file sink),
each judged against its independent model (tests/load/cases.py), all at once: each state API
and each kind of sink. `make stress` runs every case at 4x and 8x."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.load.harness import run_cases

pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.postgres]


def test_a_state_api_and_a_sink_each_complete_exact_under_4x_cpu_pressure(
    tmp_path: Path, postgres: Any
) -> None:
    results, pressure = run_cases(
        ["activity into sqlite", "mobile into postgresql", "mobile into parquet"],
        4,
        tmp_path,
        postgres,
        keep=True,
        together=True,
    )
    print(pressure, [(r.case, round(r.seconds), r.notes) for r in results])
    for result in results:
        assert result.exact, (result.case, result.notes, result.log[-3000:])
