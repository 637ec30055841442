"""A batch, or a run, that quarantines all or nearly all of its records says so, with the likely
cause and a reason (issue 30, item 2): the README's TOML example once bound the stream to the
folder holding catalog.csv, and 201 of 201 records went to the quarantine without a word."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from slipstream.monitor.listener import ConsoleReporter, mostly_quarantined
from slipstream.monitor.totals import RunTotals
from slipstream.runtime.ingest_stage import MARK as STAGED
from tests.helpers import slipstream


def progress(rows: int, quarantined: int, reason: str | None) -> dict[str, object]:
    return {
        "batchId": 0,
        "numInputRows": rows,
        "durationMs": {"addBatch": 5, "triggerExecution": 10},
        "observedMetrics": {
            "quality": {"input": rows, "quarantined": quarantined, "reason": reason}
        },
    }


def record(p: dict[str, object]) -> dict[str, object]:
    return {"event": "progress", "query": "mobile.counts", "progress": p}


def test_a_batch_that_quarantines_nearly_everything_says_so_with_a_reason() -> None:
    out = io.StringIO()
    ConsoleReporter(out)(record(progress(201, 201, "not JSON")))
    line = out.getvalue()
    assert "WARNING every record quarantined" in line
    assert "right folder and format" in line and "first reason: not JSON" in line
    out = io.StringIO()
    ConsoleReporter(out)(record(progress(100, 95, "not JSON")))
    assert "WARNING 95 of 100 records quarantined" in out.getvalue()


def test_a_few_bad_records_or_a_tiny_batch_are_not_a_warning() -> None:
    assert mostly_quarantined(5, 100, "not JSON") is None
    assert mostly_quarantined(3, 3, "not JSON") is None  # one bad file of three lines
    out = io.StringIO()
    ConsoleReporter(out)(record(progress(100, 10, "not JSON")))
    assert "WARNING" not in out.getvalue()


def test_the_run_totals_keep_the_checked_records_and_a_reason() -> None:
    totals = RunTotals()
    totals(record(progress(50, 50, None)))
    totals(record(progress(151, 151, "not JSON")))
    t = totals.by_query["mobile.counts"]
    assert (t["checked"], t["quarantined"], t["reason"]) == (201, 201, "not JSON")


@pytest.mark.spark
@pytest.mark.slow
def test_a_run_bound_to_the_wrong_folder_warns_on_the_batch_line_and_in_the_summary(
    tmp_path: Path,
) -> None:
    landing = tmp_path / "landing"
    landing.mkdir()
    # the README's old mistake: the stream bound to a folder of CSV, not JSON lines
    (landing / "catalog.csv").write_text(
        "article_id,title,section\n" + "".join(f"a{i},Title {i},news\n" for i in range(20))
    )
    result = slipstream(
        "run", "mobile", "--input", "landing", "--trigger", "available-now", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # the query that judged the records: the output, or under the ingest stage its ingest query
    staged = (tmp_path / "state" / "checkpoints" / "mobile" / "counts" / STAGED).is_file()
    judge = "mobile.quarantine.actions" if staged else "mobile.counts"
    batch = next(line for line in lines if line.startswith(judge) and "batch    0" in line)
    assert "WARNING every record quarantined" in batch and "first reason: not JSON" in batch
    summary = [line for line in lines if line.startswith("WARNING")]
    assert len(summary) == 1, result.stdout
    assert "every record quarantined" in summary[0] and "not JSON" in summary[0]
    assert "state/quarantine/mobile" in summary[0]
