"""The late-row dead-letter's folder (runtime/deadletter.py writes into it): private to the
user (0700 folders, 0600 files written whole), marked as slipstream's, and removed only when it
is (`reset --outputs`, the demos' fresh start; RESET_NOT_OURS otherwise)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from slipstream.checkpoint.lifecycle import not_ours

MARK = ".slipstream-late"  # the folder is slipstream's: `reset --outputs` may delete it


def private_dir(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)


def write_private(path: Path, lines: Iterator[str]) -> int:
    """Write `lines` to `path` whole (a temporary file, then rename), 0600; the line count
    (no lines: no file)."""
    with PrivateFiles() as files:
        for line in lines:
            files.write(path, line)
    return files.lines


class PrivateFiles:
    """Files written whole, 0600: each a temporary file until the block ends without an
    error, then renamed into place (removed on an error); lines may come for the files in any
    order. `lines`: how many were written (a file that got none is not made)."""

    def __init__(self) -> None:
        self.lines = 0
        self._open: dict[Path, tuple[Path, TextIO]] = {}

    def write(self, path: Path, line: str) -> None:
        if path not in self._open:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            self._open[path] = (tmp, os.fdopen(fd, "w", encoding="utf-8"))
        self._open[path][1].write(line + "\n")
        self.lines += 1

    def __enter__(self) -> PrivateFiles:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        for path, (tmp, handle) in self._open.items():
            handle.close()
            if kind is None:
                os.replace(tmp, path)
            else:
                tmp.unlink(missing_ok=True)


def late_is_ours(root: Path) -> bool:
    """Absent, empty, or holding the dead-letter's mark."""
    root = Path(root)
    if not root.exists():
        return True
    return root.is_dir() and (not any(root.iterdir()) or (root / MARK).is_file())


def reset_late(root: Path) -> list[str]:
    """Delete a pipeline's dead-letter (`reset --outputs`, the demos' fresh start), if it is
    slipstream's (RESET_NOT_OURS otherwise)."""

    root = Path(root)
    if not root.exists():
        return []
    if not late_is_ours(root):
        raise not_ours(root, "late-row dead-letter")
    shutil.rmtree(root)
    return [str(root)]
