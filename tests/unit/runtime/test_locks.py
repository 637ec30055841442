"""The checkpoint lock against a second process (issue 13): each race reproduced with two real
processes, no Spark. The other process stops at the exact moment of the race (inside a look at
the lock, before each deletion) and waits on a pipe until this test has tried its move."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from slipstream.app.reset import reset as reset_command
from slipstream.checkpoint.lifecycle import LOCK_FILE, CheckpointLock, is_locked
from slipstream.errors import CheckpointError
from slipstream.runtime import runner
from slipstream.runtime.ownership import record_outputs
from slipstream.settings.config import load_settings
from slipstream.sinks.spark_sinks import OUTPUT_MARK

# The other process: patches each `module:attr` so that it stops `before` or `after` the real
# call (printing "paused DETAIL" and reading a line), then runs CODE and prints "done RESULT".
_PAUSING = r"""
import functools, importlib, json, sys
def pausing(fn, when, name):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if when == "before":
            print("paused", name, json.dumps([str(a) for a in args[:1]]), flush=True)
            sys.stdin.readline()
        result = fn(*args, **kwargs)
        if when == "after":
            print("paused", name, flush=True)
            sys.stdin.readline()
        return result
    return wrapper
for spec in json.loads(sys.argv[1]):
    module_name, attr, when = spec
    owner = importlib.import_module(module_name)
    if "." in attr:
        cls, attr = attr.split(".")
        owner = getattr(owner, cls)
    setattr(owner, attr, pausing(getattr(owner, attr), when, attr))
scope = {}
exec(sys.argv[2], scope)
print("done", json.dumps(scope.get("result")), flush=True)
"""


class Other:
    """The second process, stopped at each pause until `go()`."""

    def __init__(self, patches: list[tuple[str, str, str]], code: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _PAUSING, json.dumps(patches), code],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def next(self) -> str:
        """The next line: `paused ...` (it waits) or `done ...` (it finished)."""
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait()
            raise AssertionError(f"the other process died: {self.proc.stderr.read()}")  # type: ignore[union-attr]
        return line.strip()

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def pauses(self) -> Iterator[str]:
        """Each pause, resumed after the caller's loop body ran; ends when it is done."""
        while (line := self.next()).startswith("paused"):
            yield line
            self.go()
        self.done = json.loads(line.split(" ", 1)[1])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@contextmanager
def other(patches: list[tuple[str, str, str]], code: str) -> Iterator[Other]:
    proc = Other(patches, code)
    try:
        yield proc
    finally:
        proc.close()


def assert_taken(root: Path) -> None:
    """A run starting now is refused: the lock is held by the other process."""
    assert is_locked(root)
    with pytest.raises(CheckpointError) as refused:
        CheckpointLock(root).acquire()
    assert refused.value.code == "CHECKPOINT_IN_USE"


# Every call that could take a lock: a look that took one would be caught holding it.
LOCK_CALLS = [("fcntl", "fcntl", "after"), ("fcntl", "flock", "after"), ("fcntl", "lockf", "after")]


@pytest.mark.parametrize("look", ["is_locked", "refuse_in_use"])
def test_looking_at_a_lock_never_takes_it(tmp_path: Path, look: str) -> None:
    """`status`, `stop` and a run's early check look at the lock (is_locked, refuse_in_use).
    Caught in the middle of a look, the other process holds nothing: a run starting at that
    moment takes the lock, and the look neither wrote its pid nor created a file."""
    (tmp_path / LOCK_FILE).write_text('{"pid": 1, "since": "an earlier run"}')
    code = (
        f"from slipstream.checkpoint.lifecycle import {look}\n"
        "from slipstream.errors import CheckpointError\n"
        f"try:\n    result = str({look}({str(tmp_path)!r}))\n"
        "except CheckpointError as exc:\n    result = exc.code"
    )
    with other(LOCK_CALLS, code) as looking:
        paused = 0
        for _ in looking.pauses():
            paused += 1
            assert (tmp_path / LOCK_FILE).read_text() == '{"pid": 1, "since": "an earlier run"}'
            lock = CheckpointLock(tmp_path).acquire()  # not refused
            assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
            lock.release()
            (tmp_path / LOCK_FILE).write_text('{"pid": 1, "since": "an earlier run"}')
        assert paused >= 1  # it was caught inside the look
        assert looking.done == ("None" if look == "refuse_in_use" else "False")
    # and while a run holds it, a look from another process sees it, and leaves it held
    with CheckpointLock(tmp_path), other([], code) as looking:
        seen = looking.next()
        assert seen == ('done "CHECKPOINT_IN_USE"' if look == "refuse_in_use" else 'done "True"')
        assert json.loads((tmp_path / LOCK_FILE).read_text())["pid"] == os.getpid()
        assert_taken(tmp_path)


def marked(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / OUTPUT_MARK).touch()
    (folder / "part-0.json").write_text("{}\n")
    return folder


DELETIONS = [("shutil", "rmtree", "before"), ("pathlib", "Path.unlink", "before")]


def test_reset_holds_the_lock_while_it_deletes_anything(tmp_path: Path) -> None:
    """`reset --outputs` stopped before each deletion (outputs, quarantine, event log,
    checkpoint, the lock file last): at every one of them a run starting is refused."""
    out = marked(tmp_path / "out")
    flags = {"state_dir": tmp_path / "st", "sink": f"json:{out}", "mode": "append"}
    settings = load_settings("mobile", flags, environ={})
    root = settings.checkpoint_root
    (root / "counts" / "offsets").mkdir(parents=True)
    (root / LOCK_FILE).write_text("")
    quarantine = marked(settings.quarantine_root / "actions")
    settings.event_log.parent.mkdir(parents=True)
    settings.event_log.write_text("")
    code = (
        "import io\nfrom slipstream.app.reset import reset as reset_command\n"
        "from slipstream.settings.config import load_settings\n"
        f"s = load_settings('mobile', {flags!r}, environ={{}})\n"
        "result = reset_command(s, outputs=True, yes=True, out=io.StringIO())"
    ).replace("PosixPath", "str")
    deleted = []
    with other(DELETIONS, code) as resetting:
        for pause in resetting.pauses():
            deleted.append(json.loads(pause.split(" ", 2)[2])[0])
            assert_taken(root)
        assert resetting.done == 0
    assert {str(out), str(quarantine), str(settings.event_log)} <= set(deleted)
    assert str(root / LOCK_FILE) == deleted[-1]  # the lock file last, still held
    assert not out.exists() and not quarantine.exists() and not root.exists()
    CheckpointLock(root).acquire().release()  # free again


def test_the_demo_deletes_its_state_under_the_lock(tmp_path: Path) -> None:
    """The mobile demo's fresh start (landing, quarantine, outputs, event log, checkpoint):
    every deletion under the checkpoint's lock, and nothing deleted while a run holds it."""
    state = tmp_path / "st"
    settings = load_settings("mobile", {"state_dir": state}, environ={})
    landing = state / "landing" / "mobile"
    quarantine = marked(settings.quarantine_root / "actions")
    (landing).mkdir(parents=True)
    (landing / "file1.json").write_text("{}\n")
    (settings.checkpoint_root / "counts" / "commits").mkdir(parents=True)
    (settings.checkpoint_root / LOCK_FILE).write_text("")
    with CheckpointLock(settings.checkpoint_root):  # a mobile run
        prepared = runner.prepare(settings, check_source=False)
        from slipstream.tools.demo import fresh_start

        with pytest.raises(CheckpointError) as refused:
            fresh_start(prepared, landing)
        assert refused.value.code == "CHECKPOINT_IN_USE"
        assert (landing / "file1.json").exists() and (quarantine / "part-0.json").exists()
    code = (
        "from slipstream.runtime import runner\n"
        "from slipstream.settings.config import load_settings\n"
        "from slipstream.tools.demo import fresh_start\nfrom pathlib import Path\n"
        f"s = load_settings('mobile', {{'state_dir': {str(state)!r}}}, environ={{}})\n"
        f"fresh_start(runner.prepare(s, check_source=False), Path({str(landing)!r}))"
    )
    deleted = []
    with other(DELETIONS, code) as demo:
        for pause in demo.pauses():
            deleted.append(json.loads(pause.split(" ", 2)[2])[0])
            assert_taken(settings.checkpoint_root)
    assert {str(landing), str(settings.quarantine_root)} <= set(deleted)
    assert not landing.exists() and not quarantine.exists()
    assert not settings.checkpoint_root.exists()


def test_reset_outputs_clears_outputs_the_command_is_not_given(tmp_path: Path) -> None:
    """trending's archive is off unless `--sink archive=parquet:DIR`: a run that wrote it
    records it in its checkpoint, and `reset --outputs` without that flag clears it too."""
    catalog = tmp_path / "articles.csv"
    catalog.write_text("article_id,title,section\n")
    archive = marked(tmp_path / "archive")
    base = {"state_dir": tmp_path / "st", "input": [str(tmp_path / "in"), f"catalog={catalog}"]}
    with_archive = load_settings(
        "trending", {**base, "sink": f"archive=parquet:{archive}"}, environ={}
    )
    prepared = runner.prepare(with_archive, check_source=False)
    assert "archive" in prepared.outputs
    with CheckpointLock(with_archive.checkpoint_root):  # what runner.start does
        record_outputs(prepared)
    plain = load_settings("trending", base, environ={})
    assert "archive" not in runner.prepare(plain, check_source=False).outputs
    shown = io.StringIO()
    assert reset_command(plain, outputs=True, yes=True, out=shown) == 0
    assert not archive.exists(), shown.getvalue()
    assert str(archive) in shown.getvalue()
