"""issue 29 items 6, 7, 8, 10: what a user can fix is a code and a fix, never a traceback;
what slipstream did not expect is one line, a code and the log file holding the traceback.

We run as root, which reads and writes whatever the mode bits say; `setpriv` drops every
capability (CAP_DAC_OVERRIDE among them), so a 0o000 or 0o555 folder is refused to the process
as it would be to any user. No test here starts Spark: the checks come before it (the conftest
points JAVA_HOME nowhere, so a run that got as far as Spark would fail with a traceback)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from slipstream.app import cli

SETPRIV = shutil.which("setpriv")
needs_setpriv = pytest.mark.skipif(
    SETPRIV is None or os.geteuid() != 0, reason="needs root and setpriv to drop capabilities"
)


def _slipstream_without_capabilities(*args: str) -> subprocess.CompletedProcess[str]:
    assert SETPRIV is not None
    command = [SETPRIV, "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all"]
    return subprocess.run(
        [*command, sys.executable, "-m", "slipstream", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SLIPSTREAM_STATE_DIR": ""},
    )


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    folder = tmp_path / "landing"
    folder.mkdir()
    (folder / "a.json").write_text('{"x": 1}\n')
    return folder


@needs_setpriv
def test_a_state_dir_that_cannot_be_written_is_refused_before_spark(
    tmp_path: Path, landing: Path
) -> None:
    """item 6: was a PermissionError traceback from CheckpointLock.acquire after Spark started."""
    state = tmp_path / "state"
    state.mkdir(mode=0o555)
    state.chmod(0o555)
    done = _slipstream_without_capabilities(
        "run", "mobile", "--state-dir", str(state), "--input", str(landing), "--quiet"
    )
    assert done.returncode == 2, done.stderr
    assert "[CONFIG_BAD_VALUE] --state-dir" in done.stderr and "cannot be written" in done.stderr
    assert "fix:" in done.stderr and "Traceback" not in done.stderr
    assert list(state.iterdir()) == []  # nothing left behind


@needs_setpriv
def test_a_landing_folder_that_cannot_be_read_is_refused_before_spark(
    tmp_path: Path, landing: Path
) -> None:
    """item 7: was a PermissionError traceback from monitor/backfill.py after Spark started."""
    landing.chmod(0o000)
    try:
        done = _slipstream_without_capabilities(
            "run", "mobile", "--state-dir", str(tmp_path / "state"), "--input", str(landing)
        )
    finally:
        landing.chmod(0o755)
    assert done.returncode == 2, done.stderr
    assert "[CONFIG_BAD_VALUE] --input" in done.stderr and "cannot be read" in done.stderr
    assert "chmod a+rx" in done.stderr and "Traceback" not in done.stderr


def test_a_state_dir_under_a_file_is_refused_before_spark(tmp_path: Path, landing: Path) -> None:
    """item 6, without privileges to drop: a file where the state folder should be."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    err = _run_cli(
        ["run", "mobile", "--state-dir", str(blocker / "state"), "--input", str(landing)]
    )
    assert err.rc == 2 and "[CONFIG_BAD_VALUE] --state-dir" in err.text
    assert "Traceback" not in err.text


def test_a_config_file_that_is_not_utf8_is_refused_by_the_cli(
    tmp_path: Path, landing: Path
) -> None:
    """item 8: was a UnicodeDecodeError traceback."""
    config = tmp_path / "s.toml"
    config.write_bytes("input = 'caf\xe9'\n".encode("latin-1"))
    err = _run_cli(["check", "mobile", "--config", str(config)])
    assert err.rc == 2 and "[CONFIG_FILE]" in err.text and "not UTF-8" in err.text
    assert "Traceback" not in err.text


class _Result:
    def __init__(self, rc: int, text: str) -> None:
        self.rc, self.text = rc, text


def _run_cli(argv: list[str]) -> _Result:
    done = subprocess.run(
        [sys.executable, "-m", "slipstream", *argv], capture_output=True, text=True, timeout=120
    )
    return _Result(done.returncode, done.stderr)


def test_an_unexpected_exception_is_one_line_with_a_code_and_the_log_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """item 10: any exception that reaches the top: one line with a code, the log file where
    the traceback is, exit 1."""
    from slipstream.app import reset

    def broken(*args: object, **kwargs: object) -> int:
        raise RuntimeError("something nobody planned for\nsecond line")

    monkeypatch.setattr(reset, "reset", broken)
    state = tmp_path / "state"
    rc = cli.main(["reset", "mobile", "--state-dir", str(state), "--yes"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "[INTERNAL_ERROR] RuntimeError: something nobody planned for" in err
    assert "second line" not in err and "Traceback" not in err
    logs = list((state / "logs").glob("slipstream-*.log"))
    assert len(logs) == 1 and str(logs[0]) in err
    written = logs[0].read_text()
    assert "Traceback (most recent call last)" in written and "second line" in written
    assert "in broken" in written  # the frame that raised


def test_an_unexpected_exception_without_a_writable_state_dir_goes_to_the_temp_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    where = cli.write_traceback(ValueError("x"), blocker / "state")
    assert isinstance(where, Path) and where.parent == tmp_path / "tmp" / "slipstream-logs"
    assert "ValueError: x" in where.read_text()
