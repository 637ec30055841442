"""Ctrl-C typed at a real terminal (tests/terminal.py: a pseudo-terminal, SIGINT from the line
discipline to the whole foreground process group, as a person's Ctrl-C): at start-up, while
batches run, and twice. Each stops without a Python or Py4J traceback; a run stopped by Ctrl-C
prints its summary and one line saying so, and exits 130 (issue 30, item 1)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from slipstream.checkpoint.lifecycle import is_locked
from slipstream.tools.demo import copy_samples
from tests.terminal import Terminal

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: what a traceback of ours, PySpark's or Py4J's looks like on the terminal
#: a line of Spark's log (log4j2.properties: `yy/MM/dd HH:mm:ss LEVEL Logger: message`)
SPARK_LOG = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (ERROR|WARN) ", re.MULTILINE)
NOISE = ("Traceback", "Py4J", "py4j", "reentrant call", "Exception in thread")


def clean(text: str) -> None:
    for noise in NOISE:
        assert noise not in text, f"{noise!r} on the terminal:\n{text}"


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    copy_samples(tmp_path / "landing", "mobile")
    return tmp_path / "landing"


@pytest.fixture
def terminals() -> Iterator[list[Terminal]]:
    opened: list[Terminal] = []
    yield opened
    for terminal in opened:
        terminal.close()


def run_mobile(tmp_path: Path, terminals: list[Terminal]) -> Terminal:
    """`slipstream run mobile` on the default trigger: it runs until stopped."""
    terminal = Terminal("run", "mobile", "--input", "landing", cwd=tmp_path)
    terminals.append(terminal)
    return terminal


def test_ctrl_c_while_batches_run_stops_at_a_batch_boundary_with_the_summary(
    tmp_path: Path, landing: Path, terminals: list[Terminal]
) -> None:
    terminal = run_mobile(tmp_path, terminals)
    # the first batch line: the other query's batch 0 is usually still running
    terminal.read_until(" batch    0 |")
    terminal.ctrl_c()
    code = terminal.wait()
    text = terminal.text
    assert code == 130, text
    assert "Ctrl-C: stopping at the next batch boundary" in text
    assert "summary mobile.counts:" in text
    assert "quarantine actions: the records mobile.counts rejected are in" in text
    assert text.count("stopped by Ctrl-C:") == 1
    assert "the same command resumes from there" in text
    clean(text)
    assert not is_locked(tmp_path / "state" / "checkpoints" / "mobile")


def test_ctrl_c_in_a_backfill_shows_none_of_sparks_log(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    """A backfill's batches run back to back, so the stop interrupts the next batch as it
    starts; Spark logged that as ERROR lines (`TorrentBroadcast: Store broadcast ... fail`,
    `FileFormatWriter: Aborting job`), 3 stops of 3 (issue 43 item 3)."""
    for n in range(12):
        copy_samples(tmp_path / "staging", "mobile")
        for f in sorted((tmp_path / "staging").iterdir()):
            (tmp_path / "landing").mkdir(exist_ok=True)
            f.rename(tmp_path / "landing" / f"{n:02d}-{f.name}")
    args = ("--trigger", "available-now", "--max-files-per-trigger", "1", "--sink", "parquet:out")
    terminal = Terminal("run", "mobile", "--input", "landing", *args, cwd=tmp_path)
    terminals.append(terminal)
    third = tmp_path / "state" / "checkpoints" / "mobile" / "counts" / "commits" / "2"
    terminal.read_while(lambda: not third.exists())
    terminal.ctrl_c()
    assert terminal.wait() == 130, terminal.text
    assert "stopped by Ctrl-C:" in terminal.text
    clean(terminal.text)
    assert not SPARK_LOG.search(terminal.text), terminal.text


def test_a_second_ctrl_c_stops_at_once(
    tmp_path: Path, landing: Path, terminals: list[Terminal]
) -> None:
    terminal = run_mobile(tmp_path, terminals)
    terminal.read_until(" batch    0 |")
    terminal.ctrl_c()
    terminal.read_until("Ctrl-C again to stop at once")
    terminal.ctrl_c()
    code = terminal.wait(timeout=30)
    assert code == 130, terminal.text
    assert "second Ctrl-C: stopped at once" in terminal.text
    clean(terminal.text)
    assert not is_locked(tmp_path / "state" / "checkpoints" / "mobile")


def test_ctrl_c_during_start_up_says_so(
    tmp_path: Path, landing: Path, terminals: list[Terminal]
) -> None:
    terminal = run_mobile(tmp_path, terminals)
    terminal.read_until("starting Spark")  # the JVM is starting
    terminal.ctrl_c()
    code = terminal.wait(timeout=30)
    assert code == 130, terminal.text
    assert "interrupted during start-up (Ctrl-C)" in terminal.text
    clean(terminal.text)
    assert not is_locked(tmp_path / "state" / "checkpoints" / "mobile")


def test_ctrl_c_stops_the_mobile_demo_with_its_outputs(
    tmp_path: Path, terminals: list[Terminal]
) -> None:
    terminal = Terminal("demo", "mobile", "--state-dir", "demo-state", cwd=tmp_path)
    terminals.append(terminal)
    terminal.read_until(">>> ")  # the first file landed: its batch runs
    terminal.ctrl_c()
    code = terminal.wait()
    assert code == 130, terminal.text
    assert "stopped by Ctrl-C at a batch boundary." in terminal.text
    assert "results: table mobile_action_counts" in terminal.text
    clean(terminal.text)
