"""`--quarantine delta:Q --dead-letter delta:L` on the Spark 4.2 line: mobile over four files
(one batch each) with dirty records and late ones writes its rejected records into a Delta table
per input and its late rows into a Delta table per output; delta-rs reads them back equal to the
dirt the test wrote and to the rows a plain-Python model of the watermark calls late, and the
counts reconcile with the summary's equation."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.helpers import REPO, at, cli_env, iso_at, slipstream, window_end

pytestmark = [pytest.mark.delta, pytest.mark.spark, pytest.mark.slow]


def action(n: int, minutes: float, what: str = "open") -> dict[str, str]:
    return {"id": f"p{n}", "action": what, "ts": iso_at(minutes)}


# four files, one batch each, with no batch of no data between them (available-now): batch N
# drops the rows late against the watermark batch N-1 ran with (Spark's for late events)
BATCHES = [
    [action(1, 0), action(2, 12), action(3, 20, "close")],
    [action(4, 3), action(5, 9.99), action(6, 10), action(7, 14, "close"), action(8, 31)],
    [action(9, 19), action(10, 15, "close"), action(11, 21), action(12, 2)],
    [action(13, 4), action(14, 16, "close"), action(15, 25)],
]
WINDOW, DELAY = timedelta(minutes=10), timedelta(minutes=5)
#: the dirt, by batch: not JSON, a required field missing, an event time the guard refuses
DIRT = {
    1: ['{"id": "bad"', json.dumps({"id": "d1", "action": "open"})],
    2: [json.dumps({"id": "d2", "action": "open", "ts": "9999-12-31T00:00:00Z"})],
}


def land(folder: Path) -> None:
    folder.mkdir(parents=True)
    for index, rows in enumerate(BATCHES):
        path = folder / f"actions-{index}.json"
        path.write_text("\n".join([json.dumps(r) for r in rows] + DIRT.get(index, [])) + "\n")
        stamp = at(index).timestamp()
        os.utime(path, (stamp, stamp))  # the file source reads them in this order


def late_model() -> list[tuple[str, int, str]]:
    """(id, batch, watermark) of each late row, in plain Python: batch N judges by the newest
    event time of batches 0..N-2 minus DELAY (the epoch before any), a row late when its
    window ends at or before that."""
    late = []
    for n, rows in enumerate(BATCHES):
        before = [datetime.fromisoformat(r["ts"]) for b in BATCHES[: max(n - 1, 0)] for r in b]
        mark = max(before) - DELAY if before else datetime(1970, 1, 1, tzinfo=UTC)
        shown = mark.strftime("%Y-%m-%dT%H:%M:%SZ")
        for row in rows:
            if window_end(datetime.fromisoformat(row["ts"]), WINDOW) <= mark:
                late.append((row["id"], n, shown))
    return sorted(late)


def table(path: Path) -> list[dict]:
    from deltalake import DeltaTable

    return DeltaTable(str(path)).to_pandas().to_dict("records")


def test_rejected_and_late_records_land_in_delta_tables_once(tmp_path: Path) -> None:
    land(tmp_path / "landing")
    quarantine, late = tmp_path / "q", tmp_path / "l"
    done = slipstream(
        "run", "mobile", "--input", str(tmp_path / "landing"), "--state-dir",
        str(tmp_path / "state"), "--trigger", "available-now", "--max-files-per-trigger", "1",
        "--mode", "update", "--window", "10m", "--watermark", "5m",
        "--quarantine", f"delta:{quarantine}", "--dead-letter", f"delta:{late}",
        env=cli_env(PYTHONPATH=str(REPO / "src")), timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]

    rejected = table(quarantine / "actions")
    dirt = [line for lines in DIRT.values() for line in lines]
    assert sorted(r["raw"] for r in rejected) == sorted(dirt)
    assert all(r["reason"] and r["source"].endswith(".json") for r in rejected)

    expected = late_model()
    dropped = table(late / "counts")
    got = sorted((json.loads(r["raw"])["id"], r["batch"], r["watermark"]) for r in dropped)
    assert got == expected and len(expected) >= 3, (got, expected)
    assert all(r["reason"].startswith("late: ts ") and r["output"] == "counts" for r in dropped)

    # the summary: read = valid + quarantined + late, the quarantine's line, the dead-letter's
    records = sum(len(rows) for rows in BATCHES) + len(dirt)
    out = done.stdout + done.stderr
    # (a window aggregation's late records are among the valid: its late term is 0)
    assert re.search(
        rf"summary mobile.counts: \d+ batches, {records} records read = "
        rf"{records - len(dirt)} valid \+ {len(dirt)} quarantined \+ 0 late",
        out,
    ), out
    assert re.search(
        rf"{records} records read: {len(dirt)} quarantined \(written to delta:\S*q/actions\)", out
    ), out
    assert f"dead-letter: {len(expected)} late records" in out and f"delta:{late}" in out
