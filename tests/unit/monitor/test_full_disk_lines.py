"""What the terminal says when the state dir's disk fills (issue 45 item 2): a handler that
cannot write (the event log) says so once, with DISK_FULL, not once per event; a query that
failed on the full disk says DISK_FULL on its FAILED line, not Py4J's first line."""

from __future__ import annotations

import errno
import io
from typing import Any

import pytest

from slipstream.monitor.listener import ConsoleReporter, RunListener


def test_a_handler_on_a_full_disk_says_disk_full_once(capsys: pytest.CaptureFixture[str]) -> None:
    def event_log(_: dict[str, Any]) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    listener = RunListener("mobile", [event_log])
    for _ in range(3):
        listener._emit({"event": "progress"})
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "slipstream: monitor handler failed: [DISK_FULL] no space left on the disk: "
        "[Errno 28] No space left on device"
    ]


def test_a_query_failed_on_a_full_disk_says_so_by_its_code() -> None:
    out = io.StringIO()
    reporter = ConsoleReporter(out)
    python_proxy = (
        "py4j.Py4JException: An exception was raised by the Python Proxy. Return Message: "
        'Traceback (most recent call last):\n  File "x.py", line 1\nOSError: [Errno 28] No '
        "space left on device\n"
    )
    reporter({"event": "terminated", "query": "mobile.counts", "exception": python_proxy})
    reporter({"event": "terminated", "query": "mobile.other", "exception": "[X] boom\n\tat y"})
    assert out.getvalue().splitlines() == [
        "mobile.counts: FAILED: [DISK_FULL] no space left on the disk: [Errno 28] No space left "
        "on device",
        "mobile.other: FAILED: [X] boom",
    ]
