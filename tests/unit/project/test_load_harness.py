"""The load harness's own logic, without Spark (tests/load/; its cases run in `make stress` and
tests/e2e/load/): the summary lines it reads back, the final watermark it reads from an offset
log, the report, and that every case has a name of its own."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from slipstream.monitor.accounts import output_account
from tests.load import base
from tests.load.base import RUN_TIMEOUT_S, Result, run_slipstream, summaries
from tests.load.cases import CASES
from tests.load.harness import report
from tests.load.streams import final_watermark


def test_the_summary_lines_are_read_back_per_query() -> None:
    totals = {"rows": 1234, "quarantined": 27, "late": 5, "duplicates": 28, "batches": 8,
              "expectations": {}}  # fmt: skip
    plain = {"rows": 240, "quarantined": 5, "late": 0, "batches": 1, "expectations": {}}
    log = "\n".join(
        ["a line of its own", output_account("sensors.sensor_stats", totals),
         output_account("temperature_load.temperature_load", plain)]
    )  # fmt: skip
    assert summaries(log) == {
        "sensors.sensor_stats": {"rows": 1234, "quarantined": 27, "late": 5, "duplicates": 28},
        "temperature_load.temperature_load": {
            "rows": 240, "quarantined": 5, "late": 0, "duplicates": 0
        },
    }  # fmt: skip


def test_the_final_watermark_is_the_last_batchs_in_the_offset_log(tmp_path: Path) -> None:
    offsets = tmp_path / "offsets"
    offsets.mkdir()
    for batch, ms in ((0, 0), (1, 1_767_225_600_000), (10, 1_767_229_200_000)):
        meta = {"batchWatermarkMs": ms, "batchTimestampMs": 1, "conf": {}}
        (offsets / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{{}}\n")
    (offsets / ".9.crc").write_text("")
    assert final_watermark(tmp_path) == datetime(2026, 1, 1, 1, tzinfo=UTC)
    (offsets / "11").write_text('v1\n{"batchWatermarkMs":0}\n')
    assert final_watermark(tmp_path) is None


def test_every_case_has_its_own_name_and_a_failure_shows_in_the_report() -> None:
    assert all(name == case.name for name, case in CASES.items())
    assert [n for n, c in CASES.items() if c.kafka] == ["sensors from kafka into sqlite"]
    failed = Result("sensors into sqlite")
    failed.fail("sensor_stats: the summary says None")
    text = report([("4x (8 hogs)", failed), ("4x (8 hogs)", Result("ads into sqlite"))], "cmd")
    assert "| 4x (8 hogs) | sensors into sqlite | 0 s | FAILED; sensor_stats: the summary" in text
    assert "| 4x (8 hogs) | ads into sqlite | 0 s | exact |" in text


def test_a_run_past_its_bound_is_a_failed_case_not_a_failed_harness(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def too_long(command: list[str], **_: object) -> None:
        raise subprocess.TimeoutExpired(command, 1800, output=b"batch 6 of 8", stderr=None)

    monkeypatch.setattr(base.subprocess, "run", too_long)
    result = Result("sensors into sqlite")
    assert run_slipstream(result, ["sensors"]) is False
    assert not result.exact and result.notes == [f"still running after {RUN_TIMEOUT_S} s: stopped"]
    assert result.log == "batch 6 of 8"


def test_the_campaigns_runs_under_load_are_bound_by_the_harness_not_the_campaign(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A campaign-based case (mobile into a sink, the heap and disk cases) runs each command
    under the harness's bound, not the campaign's 300 s, which a round of every case at once
    outgrew (the runs were progressing: batch 0 in 140 s)."""
    from tests.chaos import execute as chaos_execute
    from tests.chaos.runner import PROCESS_TIMEOUT_S
    from tests.chaos.scenario import Scenario
    from tests.load.cases import Chaos
    from tests.load.resources import sqlite_runner

    assert RUN_TIMEOUT_S > PROCESS_TIMEOUT_S
    runner = sqlite_runner(Scenario(45, "mobile", "sqlite", 2, data_seed=45), tmp_path / "r")
    assert runner.timeout_s == RUN_TIMEOUT_S
    bounds: list[float] = []

    def execute(*args: object, timeout_s: float = PROCESS_TIMEOUT_S) -> object:
        bounds.append(timeout_s)
        raise RuntimeError("not run here")

    monkeypatch.setattr(chaos_execute, "execute", execute)
    case = CASES["mobile into sqlite"]
    assert isinstance(case, Chaos)
    with pytest.raises(RuntimeError, match="not run here"):
        case.run(tmp_path / "c", None)
    assert bounds == [RUN_TIMEOUT_S]


def test_a_case_that_raises_is_a_failed_case_and_the_rounds_other_results_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round of cases at once lost every result when one case's own code raised (a throttled
    disk's cgroup left by the round before): now that case fails, with its traceback."""
    from tests.load import harness

    class Raises(base.Case):
        name = "raises"

        def run(self, workdir: Path, postgres: object, kafka: object = None) -> Result:
            raise FileExistsError("a cgroup of that name exists")

    class Passes(base.Case):
        name = "passes"

        def run(self, workdir: Path, postgres: object, kafka: object = None) -> Result:
            return Result(self.name, seconds=1.0)

    monkeypatch.setitem(harness.ALL_CASES, "raises", Raises())
    monkeypatch.setitem(harness.ALL_CASES, "passes", Passes())
    for together in (True, False):
        results, _ = harness.run_cases(["raises", "passes"], 0, tmp_path, together=together)
        assert [(r.case, r.exact) for r in results] == [("raises", False), ("passes", True)]
        assert "FileExistsError" in results[0].notes[0] and "Traceback" in results[0].log
