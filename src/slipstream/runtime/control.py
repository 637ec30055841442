"""Asking a running pipeline to stop, from another process.

`slipstream stop PIPELINE` writes a stop request beside the checkpoint lock of the run it
targets (`ROOT/.slipstream.stop`, JSON naming the pid that holds the lock). The run polls it
through `Run.stop_requested` (`StopControl`), stops its queries between two micro-batches,
records `run_stopped` with the reason, deletes the request and releases the lock; `stop`
returns when the lock is free.

A request names the pid it is for, so a request left behind (the run ended on its own first)
never stops a later run. Signals (SIGTERM) reach the same path through `StopControl.request`.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from slipstream.checkpoint.lifecycle import LOCK_FILE, is_locked
from slipstream.errors import SlipstreamError
from slipstream.monitor.health import pid_alive

REQUEST_FILE = ".slipstream.stop"


@dataclass(frozen=True)
class StopRequest:
    pid: int  # the run this request is for (the holder of the checkpoint lock)
    reason: str
    requested_at: str
    requested_by: int


def lock_holder(root: Path, settle: float = 5.0) -> dict[str, Any] | None:
    """`{"pid", "since"}` of the run holding the checkpoint at `root`, or None if none does.

    A run takes the lock, then writes its pid over the previous run's: read in between, the
    file is empty or names a process that is gone. That is retried for up to `settle` seconds
    (polling another process's file: nothing to wait on), then refused, never taken for an
    answer: a stop request for the wrong pid would be ignored, and `stop` would report success
    while the run goes on."""

    deadline = time.monotonic() + settle
    while True:
        if not is_locked(root):
            return None
        try:
            holder = json.loads((Path(root) / LOCK_FILE).read_text() or "{}")
        except (OSError, json.JSONDecodeError):
            holder = {}
        holder = holder if isinstance(holder, dict) else {}
        pid = holder.get("pid")
        if isinstance(pid, int) and pid_alive(pid):
            return holder
        if time.monotonic() >= deadline:
            raise SlipstreamError(
                "LOCK_HOLDER_UNKNOWN",
                f"{root} is locked, but its lock file names no running process "
                f"({json.dumps(holder) if holder else 'empty'})",
                "a run may be starting: try again in a few seconds; if it persists, find the "
                f"process holding {Path(root) / LOCK_FILE} with `fuser` and stop it",
            )
        time.sleep(0.05)


def request_stop(root: Path, reason: str | None = None, settle: float = 5.0) -> StopRequest | None:
    """Ask the run holding `root` to stop; None when no run holds it."""
    holder = lock_holder(root, settle)
    if holder is None:
        return None
    pid = int(holder["pid"])
    request = StopRequest(
        pid=pid,
        reason=reason or f"stop requested by `slipstream stop` (pid {os.getpid()})",
        requested_at=datetime.now(UTC).isoformat().replace("+00:00", "Z"),
        requested_by=os.getpid(),
    )
    path = Path(root) / REQUEST_FILE
    tmp = path.with_name(f".{REQUEST_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(request)))
    os.replace(tmp, path)  # the run never reads half a request
    return request


def read_request(root: Path) -> StopRequest | None:
    try:
        data = json.loads((Path(root) / REQUEST_FILE).read_text())
        return StopRequest(**data)
    except (OSError, ValueError, TypeError):
        return None


def wait_released(
    root: Path,
    pid: int,
    timeout: float,
    alive: Callable[[int], bool],
    poll: float = 0.2,
) -> bool:
    """Block until the run `pid` has released the checkpoint (or died); False on timeout."""
    deadline = time.monotonic() + timeout
    while is_locked(root) and alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)  # another process: nothing to wait on but the lock itself
    return True


class StopControl:
    """`Run.stop_requested` for the run holding `root`: true once a request for this process
    arrived (a file from `slipstream stop`, or `request()` from a signal handler)."""

    def __init__(self, root: Path, pid: int | None = None) -> None:
        self.root = Path(root)
        self.pid = os.getpid() if pid is None else pid
        self.reason: str | None = None
        self._local = threading.Event()
        request = read_request(self.root)
        if request is not None and request.pid != self.pid:
            self.clear()  # left behind by an earlier run

    def request(self, reason: str) -> None:
        """Ask this run to stop (safe from a signal handler)."""
        self.reason = self.reason or reason
        self._local.set()

    def __call__(self) -> bool:
        if self._local.is_set():
            return True
        request = read_request(self.root)
        if request is not None and request.pid == self.pid:
            self.reason = request.reason
            return True
        return False

    def clear(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.root / REQUEST_FILE).unlink()
