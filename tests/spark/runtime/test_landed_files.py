"""issue 29 items 1-3: the file-level hostile kinds and their fates, through `mobile`.

- a file landed with an old modification time (`cp -p`, `rsync -a`, `tar x`, `mv`): read
  (Spark's maxFileAge would skip it after the first batch);
- a file that cannot be read (mode 000, for a process without CAP_DAC_OVERRIDE): the run stops
  with FILE_UNREADABLE naming it; made readable and landed again under a new name, every record
  is there (a subprocess under `setpriv`, which drops root's capabilities);
- lines appended to a file after its batch: not read (files land whole), and said
  (FILE_CHANGED) when the run resumes;
- a symlink in the landing folder to a file outside it: read, as the file it points to.

Each count is checked against the lines written, counted here."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from slipstream.testing import PipelineHarness

pytestmark = pytest.mark.spark

BASE = datetime(2018, 3, 2, 10, 0, 0)
_next = iter(range(1_000_000))


def records(n: int) -> list[str]:
    """n JSON lines of `mobile`, each with its own (increasing) event time: one result row each
    (window 1ms), so the sum of counts is the number of records read."""
    out = []
    for _ in range(n):
        at = BASE + timedelta(milliseconds=next(_next))
        out.append(json.dumps({"id": "p1", "action": "open", "ts": at.isoformat()}))
    return out


def land(folder: Path, name: str, lines: list[str], *, age_days: float = 0) -> Path:
    """Write outside, set the time, rename in (as `cp -p` / `rsync -a` / `mv` would)."""
    staging = folder.parent / f".staging-{name}"
    staging.write_text("".join(line + "\n" for line in lines))
    stamp = time.time() - age_days * 86400
    os.utime(staging, (stamp, stamp))
    target = folder / name
    staging.rename(target)
    return target


def counted(rows: list[dict[str, Any]]) -> int:
    return sum(int(r["count"]) for r in rows)


def harness(spark: SparkSession, workdir: Path) -> PipelineHarness:
    return PipelineHarness(spark, "mobile", workdir, mode="update", window="1ms")


def test_files_with_an_old_mtime_are_read(spark: SparkSession, tmp_path: Path) -> None:
    """item 1: 300 of 300 records of files older than 7 days were missing, without a word."""
    h = harness(spark, tmp_path).start()
    try:
        sent = 0
        first = records(20)
        land(h.input, "new.json", first)
        sent += len(first)
        got = counted(h.process())
        for day in (8, 30, 400):  # after the first batch: what maxFileAge would skip
            lines = records(50)
            land(h.input, f"old-{day}d.json", lines, age_days=day)
            sent += len(lines)
        got += counted(h.process())
    finally:
        h.stop()
    assert got == sent == 170


def test_a_symlink_to_a_file_outside_the_landing_folder_is_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    lines = records(30)
    (outside / "real.json").write_text("".join(x + "\n" for x in lines))
    h = harness(spark, tmp_path / "run").start()
    try:
        (h.input / "linked.json").symlink_to(outside / "real.json")
        got = counted(h.process())
        assert h.run is not None and h.run.landed is not None
        reported = dict(h.run.landed.reported)
    finally:
        h.stop()
    assert got == len(lines)
    assert not reported  # read whole, nothing to say


def test_lines_appended_after_a_batch_are_not_read_and_are_said(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """item 3: 50 of 50 appended lines were lost without a word."""
    first = records(40)
    h = harness(spark, tmp_path).start()
    try:
        grown = land(h.input, "grows.json", first)
        got = counted(h.process())
    finally:
        h.stop()
    assert got == 40
    stat = grown.stat()
    with grown.open("a") as handle:  # 50 lines appended after its batch
        handle.write("".join(x + "\n" for x in records(50)))
    os.utime(grown, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000))  # fs time can be coarse
    caplog.set_level(logging.WARNING, logger="slipstream.runtime.landed")
    again = harness(spark, tmp_path).start()  # the same checkpoint, resumed
    try:
        more = records(5)
        land(again.input, "next.json", more)
        got += counted(again.process())
    finally:
        again.stop()
    assert got == 45  # the appended lines are not read: Spark reads a path once
    said = [r.getMessage() for r in caplog.records if "FILE_CHANGED" in r.getMessage()]
    assert len(said) == 1 and "grows.json" in said[0], said


def test_a_file_being_written_while_listed_is_said_in_its_batch(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A file whose time is not the one its batch listed: said after that very batch."""
    caplog.set_level(logging.WARNING, logger="slipstream.runtime.landed")
    h = harness(spark, tmp_path).start()
    try:
        land(h.input, "a.json", records(10))
        h.process()
        from slipstream.checkpoint.logs import LoggedFile
        from slipstream.runtime.landed import judge

        path = h.input / "a.json"
        listed = path.stat().st_mtime_ns // 1_000_000
        assert judge(LoggedFile(path.as_uri(), listed)) is None
        problem = judge(LoggedFile(path.as_uri(), listed - 1000))
        assert problem is not None and problem.code == "FILE_CHANGED"
        path.unlink()
        problem = judge(LoggedFile(path.as_uri(), listed))
        assert problem is not None and problem.code == "FILE_DELETED"
    finally:
        h.stop()


# ---- unreadable: a real permission denial needs a process without CAP_DAC_OVERRIDE

SETPRIV = shutil.which("setpriv")


def _run_without_capabilities(landing: Path, state: Path) -> subprocess.CompletedProcess[str]:
    assert SETPRIV is not None
    drop = [SETPRIV, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"]
    command = [sys.executable, "-m", "slipstream", "run", "mobile", "--input", str(landing)]
    command += ["--state-dir", str(state), "--trigger", "available-now", "--quiet"]
    command += ["--mode", "update", "--window", "1ms", "--sink", "sqlite"]
    return subprocess.run([*drop, *command], capture_output=True, text=True, timeout=600)


def _rows_in(database: Path) -> int:
    with sqlite3.connect(database) as conn:
        return int(
            conn.execute('SELECT coalesce(sum("count"), 0) FROM mobile_action_counts').fetchone()[0]
        )


@pytest.mark.skipif(SETPRIV is None or os.geteuid() != 0, reason="needs root and setpriv")
def test_an_unreadable_file_stops_the_run_and_is_read_once_landed_again(tmp_path: Path) -> None:
    """item 2: a mode-000 file was recorded as read (400 of 500 records counted, rc 0)."""
    landing = tmp_path / "landing"
    landing.mkdir()
    state = tmp_path / "state"
    sent = 0
    for index in range(4):
        lines = records(100)
        land(landing, f"ok-{index}.json", lines)
        sent += len(lines)
    hidden = land(landing, "hidden.json", records(100))
    sent += 100
    hidden.chmod(0o000)
    done = _run_without_capabilities(landing, state)
    assert done.returncode != 0, done.stderr
    assert "[FILE_UNREADABLE]" in done.stderr and "hidden.json" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    # the documented way out: make it readable, land it again under a new name, run again
    hidden.chmod(0o644)
    hidden.rename(landing / "hidden.json.again")
    done = _run_without_capabilities(landing, state)
    assert done.returncode == 0, done.stderr
    assert _rows_in(state / "slipstream.db") == sent == 500
