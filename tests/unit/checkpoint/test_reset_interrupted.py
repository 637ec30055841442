"""issue 29 item 5: `reset --outputs` killed part-way (SIGKILL, or SIGTERM which had no handler)
left the checkpoint and deleted the outputs, and the next `run` resumed without a word (0 of
6,000 results). A reset marks the checkpoint before its first delete; an interrupted one is
refused by `run` (RESET_INTERRUPTED) and finished by the next `reset`. No Spark: the kills hit
the reset itself (in a subprocess, at its late-row step, after the outputs)."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from slipstream.app import commands
from slipstream.app.reset import reset as reset_command
from slipstream.checkpoint.lifecycle import LOCK_FILE, RESET_MARK, refuse_interrupted_reset
from slipstream.errors import CheckpointError
from slipstream.settings.config import load_settings

KILL_AT_LATE_ROWS = """
import os, signal, sys
from slipstream.app import cli, reset
def hit(*args, **kwargs):
    os.kill(os.getpid(), signal.{signal})
    return []
reset.reset_late = hit
sys.exit(cli.main(["reset", "mobile", "--outputs", "--yes", "--state-dir", sys.argv[1]]))
"""


def checkpoint(state: Path) -> Path:
    """A checkpoint root as a run leaves it: the lock file and a query's logs."""
    root = state / "checkpoints" / "mobile"
    (root / "counts" / "offsets").mkdir(parents=True)
    (root / "counts" / "offsets" / "0").write_text('v1\n{"batchTimestampMs": 1}\n')
    (root / LOCK_FILE).write_text("")
    return root


def reset_killed_by(sig: str, state: Path) -> subprocess.CompletedProcess[str]:
    code = KILL_AT_LATE_ROWS.format(signal=sig)
    return subprocess.run(
        [sys.executable, "-c", code, str(state)], capture_output=True, text=True, timeout=120
    )


def test_a_reset_killed_part_way_is_refused_by_run_and_finished_by_reset(tmp_path: Path) -> None:
    state = tmp_path / "state"
    root = checkpoint(state)
    killed = reset_killed_by("SIGKILL", state)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (root / RESET_MARK).is_file() and (root / "counts").is_dir()  # cut mid-way
    settings = load_settings("mobile", {"state_dir": state, "input": str(tmp_path)}, environ={})
    with pytest.raises(CheckpointError) as refused:  # before Spark starts
        commands.run(settings, io.StringIO())
    assert refused.value.code == "RESET_INTERRUPTED"
    assert "reset mobile --outputs" in refused.value.fix
    out = io.StringIO()
    assert reset_command(settings, outputs=False, yes=True, out=out) == 0  # finishes it
    assert "its outputs too" in out.getvalue()
    assert not root.exists()
    refuse_interrupted_reset(root, "mobile")  # nothing left to refuse


def test_sigterm_during_a_reset_lets_it_finish_then_exits(tmp_path: Path) -> None:
    state = tmp_path / "state"
    root = checkpoint(state)
    done = reset_killed_by("SIGTERM", state)
    assert done.returncode == 128 + signal.SIGTERM, done.stderr
    assert "the reset finished first" in done.stderr
    assert not root.exists()  # the reset was finished: no mark, no checkpoint


def test_a_finished_reset_leaves_no_mark(tmp_path: Path) -> None:
    state = tmp_path / "state"
    root = checkpoint(state)
    settings = load_settings("mobile", {"state_dir": state}, environ={})
    assert reset_command(settings, outputs=True, yes=True, out=io.StringIO()) == 0
    assert not root.exists() and not os.path.exists(root / RESET_MARK)
