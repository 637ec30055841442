"""Disk full under the state dir (issue 43 break 8): `[Errno 28]` with no code, a `Traceback`
line and no fix. ENOSPC anywhere in a run is DISK_FULL, naming the path where it is known and
the way out, in one line without --verbose: from Python's OSError (the CLI's last net) and from
the text Spark gives a failed query (a Java IOException inside Py4J's and PySpark's wrapping)."""

from __future__ import annotations

import errno
import io
from pathlib import Path

import pytest

from slipstream.app import cli
from slipstream.errors import disk_full, query_failure

SPARK_TEXT = (
    "[STREAM_FAILED] Query [id = 5d0f, runId = 9a1b] terminated with exception: Job aborted "
    "due to stage failure: Task 0 in stage 2.0 failed 1 times, most recent failure: Lost task "
    "0.0 in stage 2.0 (TID 7) (localhost executor driver): java.io.IOException: No space left "
    "on device\n\tat java.base/java.io.FileOutputStream.writeBytes(Native Method)\n\tat org."
    "apache.spark.sql.execution.streaming.state.RocksDBFileManager..."
)
PYTHON_TEXT = (
    "An exception was raised by the Python Proxy. Return Message: Traceback (most recent call "
    'last):\n  File "/x/sinks/sqlite.py", line 80, in write_batch\nsqlite3.OperationalError: '
    "database or disk is full\n"
)


def test_spark_and_python_disk_full_texts_are_disk_full_naming_the_state_dir(
    tmp_path: Path,
) -> None:
    for text in (SPARK_TEXT, PYTHON_TEXT, "[Errno 28] No space left on device: '/st/x'"):
        error = query_failure(text, "local[2]", tmp_path / "state")
        assert error is not None and error.code == "DISK_FULL", text
        assert str(tmp_path / "state") in error.fix
        assert "Traceback" not in error.render() and "\tat " not in error.render()
    named = disk_full("[Errno 28] No space left on device: '/st/checkpoints/x/offsets/.3.tmp'")
    assert named is not None and "/st/checkpoints/x/offsets/.3.tmp" in named.message
    assert disk_full("java.io.IOException: Connection reset by peer") is None
    assert query_failure("[DIVIDE_BY_ZERO] Division by zero", "local[2]", tmp_path) is None


def test_an_oserror_enospc_anywhere_in_a_command_is_disk_full_not_internal_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    where = tmp_path / "state" / "events" / "mobile.jsonl"

    def full(*_: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device", str(where))

    monkeypatch.setattr(cli, "_dispatch", full)
    code = cli.main(["list"], out=io.StringIO())
    said = capsys.readouterr().err
    assert code == 1, said
    assert "[DISK_FULL]" in said and str(where) in said and "fix:" in said
    assert "INTERNAL_ERROR" not in said and "Traceback" not in said


def test_a_full_disk_that_names_no_file_names_the_state_dir_and_its_room(tmp_path: Path) -> None:
    """A write's OSError (`[Errno 28] No space left on device`, no file) and Java's IOException
    name no file: the message names the state dir (or its nearest existing folder's disk)."""
    for text in ("[Errno 28] No space left on device", SPARK_TEXT):
        error = disk_full(text, tmp_path / "state" / "not-yet")
        assert error is not None
        assert f"that holds {tmp_path / 'state' / 'not-yet'} (" in error.message
        assert " free of " in error.message
