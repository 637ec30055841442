"""Atomic file writes: Spark's file source must never see a half-written file."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def write_atomically(directory: Path, name: str, lines: Iterable[str]) -> Path:
    """Write lines to a hidden temporary name in `directory`, fsync, then rename into place.

    The temporary name starts with '.', which Spark's file source ignores."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / name
    temp = directory / f".{name}.tmp-{os.getpid()}"
    with open(temp, "w") as handle:
        for line in lines:
            handle.write(line.rstrip("\n") + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temp, final)
    return final
