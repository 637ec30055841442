"""Checkpoint locations, the one-run-per-checkpoint guard, and reset.

Layout: one root per pipeline run (`--checkpoint DIR`, default STATE_DIR/checkpoints/PIPELINE),
one sub-folder per query of the run (`results`, `quarantine`, `archive`, ...). Running the same
command again resumes every query where it stopped.

Two runs on one checkpoint corrupt it (both write the same offset and commit logs), so a run
holds an exclusive `flock` on ROOT/.slipstream.lock for its lifetime. The kernel releases it
when the process dies, even by SIGKILL, so a crash never leaves a stale lock behind."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO

from slipstream.errors import CheckpointError

LOCK_FILE = ".slipstream.lock"


class CheckpointLock:
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._handle: IO[str] | None = None

    def acquire(self) -> CheckpointLock:
        self.root.mkdir(parents=True, exist_ok=True)
        handle = open(self.root / LOCK_FILE, "a+")  # noqa: SIM115 - held for the run
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "{}"
            handle.close()
            try:
                who = json.loads(holder)
            except json.JSONDecodeError:
                who = {}
            raise CheckpointError(
                "CHECKPOINT_IN_USE",
                f"checkpoint {self.root} is in use by another run (pid {who.get('pid', '?')}, "
                f"since {who.get('since', '?')}); two runs on one checkpoint corrupt it",
                "wait for that run to finish or stop it (`slipstream stop PIPELINE`), or give "
                "this run its own --checkpoint DIR",
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "since": datetime.now(UTC).isoformat()}))
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None

    def __enter__(self) -> CheckpointLock:
        return self.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


def is_locked(root: Path) -> bool:
    """Whether a run holds the checkpoint at `root`. Looking neither creates the lock file nor
    writes to it (a probe must not leave slipstream's mark in a folder it only looked at)."""
    try:
        handle = open(Path(root) / LOCK_FILE)  # noqa: SIM115 - read-only, never creates
    except (FileNotFoundError, NotADirectoryError):
        return False
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        return False


def query_checkpoint(root: Path, query: str) -> Path:
    return Path(root) / query


def last_committed_batch(checkpoint: Path) -> int | None:
    """The highest batch id in a query checkpoint's commit log, or None."""
    commits = Path(checkpoint) / "commits"
    if not commits.is_dir():
        return None
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()]
    return max(ids) if ids else None


def last_planned_batch(checkpoint: Path) -> int | None:
    """The highest batch id in a query checkpoint's offset log (planned, maybe not committed)."""
    offsets = Path(checkpoint) / "offsets"
    if not offsets.is_dir():
        return None
    ids = [int(p.name) for p in offsets.iterdir() if p.name.isdigit()]
    return max(ids) if ids else None


def not_ours(path: Path | str, what: str) -> CheckpointError:
    return CheckpointError(
        "RESET_NOT_OURS",
        f"{what} {path} was not made by slipstream (it has no slipstream mark); nothing deleted",
        "check the path: reset deletes only what slipstream made. Delete it yourself if you "
        "mean to",
    )


def checkpoint_is_ours(root: Path) -> bool:
    """Absent, empty, or holding slipstream's lock file (taken by every run before any query
    writes into the root)."""
    root = Path(root)
    if not root.exists():
        return True
    return root.is_dir() and (not any(root.iterdir()) or (root / LOCK_FILE).is_file())


def delete_checkpoint(root: Path) -> bool:
    """Delete a run's checkpoint root, holding its lock the whole time; refuses while a run
    holds it, and refuses a folder slipstream did not make (every run takes the lock file in
    the root before any query writes there: the lock file is the mark)."""
    root = Path(root)
    if not root.exists():
        return False
    if not checkpoint_is_ours(root):
        raise not_ours(root, "checkpoint")
    lock = CheckpointLock(root).acquire()
    try:
        for child in root.iterdir():
            if child.name == LOCK_FILE:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        (root / LOCK_FILE).unlink()  # still held: a run starting now locks a new file
    finally:
        lock.release()
    with contextlib.suppress(OSError):  # not empty: a run started meanwhile; it keeps its root
        root.rmdir()
    return True
