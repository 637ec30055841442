"""Checkpoint locations, the one-run-per-checkpoint guard, and reset.

Layout: one root per pipeline run (`--checkpoint DIR`, default STATE_DIR/checkpoints/PIPELINE),
one sub-folder per query of the run (`results`, `quarantine`, `archive`, ...). Running the same
command again resumes every query where it stopped.

Two runs on one checkpoint corrupt it (both write the same offset and commit logs), so a run
holds an exclusive lock on ROOT/.slipstream.lock for its lifetime: an open-file-description
lock (Linux `F_OFD_SETLK`), which the kernel releases when the process dies, even by SIGKILL,
so a crash never leaves a stale lock behind. Unlike `flock`, such a lock can be *tested*
(`F_OFD_GETLK`) without being taken: looking at a lock (`is_locked`, `status`, `stop`) never
makes a run that starts at that moment find it taken.

Whatever deletes state of a checkpoint (reset, the demos' fresh start) does it inside
`clearing(root)`: the lock is held while the outputs and then the checkpoint are deleted, and
the lock file goes last, still held."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import struct
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

from slipstream.core.closing import StartStop
from slipstream.errors import CheckpointError, ConfigError

LOCK_FILE = ".slipstream.lock"
#: written in a checkpoint root before a reset deletes anything; the last file deleted but the
#: lock: a reset killed part-way leaves it behind (mark_reset)
RESET_MARK = ".slipstream-resetting"

# struct flock on 64-bit Linux: l_type, l_whence (short), l_start, l_len (off_t), l_pid (pid_t)
_FLOCK = struct.Struct("hhqqi4x")


def ofd_lock(fd: int, kind: int) -> bool:
    """Take (F_WRLCK) or drop (F_UNLCK) the whole-file lock of this open file; False when
    another open file holds a conflicting one."""
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _FLOCK.pack(kind, os.SEEK_SET, 0, 0, 0))
    except (BlockingIOError, PermissionError):  # EAGAIN / EACCES: held elsewhere
        return False
    return True


def _ofd_held(fd: int) -> bool:
    """Whether another open file holds a write lock: tested, nothing taken."""
    answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _FLOCK.pack(fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0))
    return bool(_FLOCK.unpack(answer)[0] != fcntl.F_UNLCK)


def in_use(root: Path, holder: str) -> CheckpointError:
    try:
        who = json.loads(holder or "{}")
    except json.JSONDecodeError:
        who = {}
    who = who if isinstance(who, dict) else {}
    return CheckpointError(
        "CHECKPOINT_IN_USE",
        f"checkpoint {root} is in use by another run (pid {who.get('pid', '?')}, "
        f"since {who.get('since', '?')}); two runs on one checkpoint corrupt it",
        "wait for that run to finish or stop it (`slipstream stop PIPELINE`), or give "
        "this run its own --checkpoint DIR",
    )


class CheckpointLock(StartStop):
    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._handle: IO[str] | None = None

    def acquire(self) -> CheckpointLock:
        self.root.mkdir(parents=True, exist_ok=True)
        handle = open(self.root / LOCK_FILE, "a+")  # noqa: SIM115 - held for the run
        if not ofd_lock(handle.fileno(), fcntl.F_WRLCK):
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise in_use(self.root, holder)
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "since": datetime.now(UTC).isoformat()}))
        handle.flush()
        self._handle = handle
        return self

    def release(self) -> None:
        if self._handle is not None:
            ofd_lock(self._handle.fileno(), fcntl.F_UNLCK)
            self._handle.close()
            self._handle = None

    # `with CheckpointLock(root):` holds the lock for the block
    start, stop = acquire, release


def is_locked(root: Path) -> bool:
    """Whether a run holds the checkpoint at `root`. Looking neither creates the lock file,
    nor writes to it, nor takes the lock even for an instant (`F_OFD_GETLK` only tests it), so
    a run starting at the same moment is never refused because of a look."""
    try:
        handle = open(Path(root) / LOCK_FILE)  # noqa: SIM115 - read-only, never creates
    except (FileNotFoundError, NotADirectoryError):
        return False
    with handle:
        return _ofd_held(handle.fileno())


def require_writable(folder: Path, flag: str) -> None:
    """CONFIG_BAD_VALUE, before Spark starts, when `folder` cannot be created or written (a
    read-only mount, a folder of another user, a file in the way): what the run would hit
    later as a PermissionError from the lock, after Spark's ~10 s of start-up."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".slipstream-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"{flag} {folder} cannot be written: {exc.strerror or exc}",
            f"pass a {flag} folder this user can create and write, or fix its permissions "
            f"(e.g. chown or chmod u+rwx on {exc.filename or folder})",
        ) from None


def refuse_in_use(root: Path) -> None:
    """CHECKPOINT_IN_USE when a run holds `root`; looks without taking the lock (a run's
    early check, before Spark starts; `runtime.start` takes the lock for real)."""
    if is_locked(root):
        try:
            holder = (Path(root) / LOCK_FILE).read_text()
        except OSError:
            holder = ""
        raise in_use(Path(root), holder)


def query_checkpoint(root: Path, query: str) -> Path:
    return Path(root) / query


def _last_batch(checkpoint: Path, log: str) -> int | None:
    folder = Path(checkpoint) / log
    if not folder.is_dir():
        return None
    ids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
    return max(ids) if ids else None


def last_committed_batch(checkpoint: Path) -> int | None:
    """The highest batch id in a query checkpoint's commit log, or None."""
    return _last_batch(checkpoint, "commits")


def last_planned_batch(checkpoint: Path) -> int | None:
    """The highest batch id in a query checkpoint's offset log (planned, maybe not committed)."""
    return _last_batch(checkpoint, "offsets")


def sweep_interrupted_writes(checkpoint: Path) -> list[Path]:
    """Delete what a killed writer left in a query checkpoint's offset and commit logs: Spark
    writes `N` as a hidden temp file (`.N.UUID.tmp`, and its `.crc`) and renames it into place,
    so a SIGKILL inside that write leaves the temp file. Harmless after batch 0, but at batch 0
    Spark refuses to start on an offset log that is not empty
    (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY), which would strand the checkpoint for good.
    Call it holding the checkpoint lock: then no writer is alive. Returns what it deleted."""
    swept = []
    for log in ("offsets", "commits"):
        folder = Path(checkpoint) / log
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            name = path.name
            if name.startswith(".") and name.endswith((".tmp", ".tmp.crc")) and path.is_file():
                path.unlink(missing_ok=True)
                swept.append(path)
    return swept


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


@contextlib.contextmanager
def clearing(root: Path) -> Iterator[bool]:
    """Hold `root`'s lock while the caller deletes what belongs to this checkpoint (its
    outputs, quarantines), then delete the checkpoint itself, the lock file last and still
    held: no run can start in between. Yields whether a checkpoint was there. Refused while a
    run holds it (CHECKPOINT_IN_USE), and for a folder slipstream did not make (every run takes
    the lock file in the root before any query writes there: the lock file is the mark)."""
    root = Path(root)
    if not checkpoint_is_ours(root):
        raise not_ours(root, "checkpoint")
    existed = root.is_dir() and any(p.name != LOCK_FILE for p in root.iterdir())
    made = [p for p in (root, *root.parents) if not p.exists()]  # the lock makes them: undone
    lock = CheckpointLock(root).acquire()
    try:
        yield existed
        for child in root.iterdir():
            if child.name in (LOCK_FILE, RESET_MARK):
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        (root / RESET_MARK).unlink(missing_ok=True)  # everything else is gone: reset done
        (root / LOCK_FILE).unlink()  # still held: a run starting now locks a new file
    finally:
        lock.release()
    with contextlib.suppress(OSError):  # not empty: a run started meanwhile; it keeps its root
        root.rmdir()
    for folder in made[1:]:  # `reset` in an empty folder leaves it empty
        with contextlib.suppress(OSError):
            folder.rmdir()


def mark_reset(root: Path, outputs: bool) -> None:
    """Record, before the first delete, that a reset of `root` (with its outputs or not) is
    under way: a reset killed part-way leaves this behind, so the next run is refused
    (`refuse_interrupted_reset`) instead of resuming a checkpoint whose outputs are gone."""
    since = datetime.now(UTC).isoformat()
    text = json.dumps({"outputs": outputs, "pid": os.getpid(), "since": since})
    temporary = Path(root) / f"{RESET_MARK}.{os.getpid()}.tmp"
    temporary.write_text(text)
    os.replace(temporary, Path(root) / RESET_MARK)


def interrupted_reset(root: Path) -> dict[str, object] | None:
    """What an interrupted reset of `root` was doing ({"outputs": bool, ...}), or None."""
    try:
        found = json.loads((Path(root) / RESET_MARK).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"outputs": True}  # a mark cut by the kill: assume the larger reset
    return found if isinstance(found, dict) else {"outputs": True}


def refuse_interrupted_reset(root: Path, pipeline: str) -> None:
    found = interrupted_reset(root)
    if found is not None:
        flag = " --outputs" if found.get("outputs") else ""
        raise CheckpointError(
            "RESET_INTERRUPTED",
            f"a reset{flag} of checkpoint {root} was interrupted (since {found.get('since', '?')}):"
            " some of what it was deleting is gone, so this checkpoint cannot be resumed",
            f"finish it: slipstream reset {pipeline}{flag} (then run again)",
        )


@contextlib.contextmanager
def clearing_query(root: Path, query: str) -> Iterator[bool]:
    """Like `clearing`, for one output's query checkpoint (`root/query`) only: the root's lock
    held while the caller deletes that output's results, then the query checkpoint. The other
    outputs keep their checkpoints. Yields whether the query checkpoint was there."""
    root = Path(root)
    if not checkpoint_is_ours(root):
        raise not_ours(root, "checkpoint")
    folder = query_checkpoint(root, query)
    existed = folder.is_dir()
    root.mkdir(parents=True, exist_ok=True)
    lock = CheckpointLock(root).acquire()
    try:
        yield existed
        if existed:
            shutil.rmtree(folder)
    finally:
        lock.release()
