"""The append-only event log: ``<state_dir>/events/<pipeline>.jsonl``, one JSON object a line.

``EventLog`` is the writer (the listener owns one per pipeline run). ``read_events`` reads a
log with its rotated backups, oldest first. ``EventLogFollower`` reads only what was appended
since its last poll, for processes that watch a running pipeline (the dashboard).

One writer process per file is assumed (the one-run-per-checkpoint guard gives that); inside
that process any number of threads may append.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from slipstream.core.closing import Closing
from slipstream.monitor.events import Event, EventFormatError, parse_event

logger = logging.getLogger(__name__)

EVENTS_DIR = "events"
SUFFIX = ".jsonl"


def event_log_path(state_dir: Path | str, pipeline: str) -> Path:
    """Where the event log of ``pipeline`` lives under ``state_dir``."""
    if not pipeline or "/" in pipeline or pipeline.startswith("."):
        raise ValueError(f"pipeline name must be a plain file name; got {pipeline!r}")
    return Path(state_dir) / EVENTS_DIR / f"{pipeline}{SUFFIX}"


def pipelines_in(state_dir: Path | str) -> list[str]:
    """Names of the pipelines that have an event log under ``state_dir``, sorted."""
    events_dir = Path(state_dir) / EVENTS_DIR
    if not events_dir.is_dir():
        return []
    return sorted(p.name[: -len(SUFFIX)] for p in events_dir.glob(f"*{SUFFIX}") if p.is_file())


def json_safe(value: Any) -> Any:
    """Replace NaN and infinities (which JSON cannot carry) with null and paths with their
    text, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def encode_record(record: Mapping[str, Any] | Event) -> bytes:
    """One event as a single newline-terminated line of UTF-8 JSON."""
    data = record.to_dict() if hasattr(record, "to_dict") else record
    line = json.dumps(json_safe(data), separators=(",", ":"), allow_nan=False, default=str)
    return line.encode("utf-8") + b"\n"


class EventLog(Closing):
    """Append writer with size-based rotation.

    Each record is encoded first and written with one ``write(2)`` on an ``O_APPEND`` file under
    a lock, so a reader never sees two records interleaved. When the next line would push the
    file past ``max_bytes`` it is renamed to ``<name>.1`` (``.1`` to ``.2`` and so on, keeping
    ``backups`` files), so the log never holds much more than ``(backups + 1) * max_bytes``.
    """

    def __init__(self, path: Path | str, max_bytes: int = 5_000_000, backups: int = 2) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be positive; got max_bytes={max_bytes}")
        if backups < 0:
            raise ValueError(f"backups must be zero or more; got backups={backups}")
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = self._open()

    def _open(self) -> int:
        return os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def append(self, record: Mapping[str, Any] | Event) -> None:
        line = encode_record(record)
        with self._lock:
            if self._fd is None:
                raise ValueError(f"event log {self.path} is closed")
            size = os.fstat(self._fd).st_size
            if size > 0 and size + len(line) > self.max_bytes:
                self._rotate()
            os.write(self._fd, line)

    def _rotate(self) -> None:
        assert self._fd is not None
        os.close(self._fd)
        self._fd = None
        if self.backups == 0:
            self.path.unlink(missing_ok=True)
        else:
            for n in range(self.backups - 1, 0, -1):
                older = _backup(self.path, n)
                if older.exists():
                    os.replace(older, _backup(self.path, n + 1))
            os.replace(self.path, _backup(self.path, 1))
        self._fd = self._open()

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


def _backup(path: Path, n: int) -> Path:
    return path.with_name(f"{path.name}.{n}")


def log_files(path: Path | str) -> list[Path]:
    """The log and its rotated backups, oldest first."""
    path = Path(path)
    pattern = re.compile(re.escape(path.name) + r"\.(\d+)$")
    backups: list[tuple[int, Path]] = []
    if path.parent.is_dir():
        for candidate in path.parent.iterdir():
            match = pattern.match(candidate.name)
            if match:
                backups.append((int(match.group(1)), candidate))
    ordered = [p for _, p in sorted(backups, reverse=True)]
    if path.exists():
        ordered.append(path)
    return ordered


def parse_lines(lines: Iterable[bytes | str], source: str = "<lines>") -> Iterator[Event]:
    """Events from raw lines; blank, corrupt and non-event lines are skipped (and logged)."""
    skipped = 0
    for raw in lines:
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        text = text.strip()
        if not text:
            continue
        try:
            yield parse_event(json.loads(text))
        except (json.JSONDecodeError, EventFormatError) as exc:
            skipped += 1
            logger.debug("skipping line in %s: %s", source, exc)
    if skipped:
        logger.warning("skipped %d unreadable line(s) in %s", skipped, source)


def read_events(path: Path | str) -> list[Event]:
    """All events of one log, rotated backups first, in file order; corrupt lines skipped."""
    events: list[Event] = []
    for file in log_files(path):
        try:
            with open(file, "rb") as handle:
                events.extend(parse_lines(handle, str(file)))
        except FileNotFoundError:  # rotated away between listing and opening
            continue
    return events


class EventLogFollower:
    """Reads a growing, rotating log incrementally: each ``poll()`` returns the new events.

    The first poll returns the backups and the current file. Later polls read on from the
    open file; when the writer rotates, the rest of the old file is read through the still
    open handle and then the new file from its start. A partial last line (a write in flight)
    is held back until its newline arrives.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._handle: IO[bytes] | None = None
        self._pending = b""
        self._started = False

    def poll(self) -> list[Event]:
        events: list[Event] = []
        if not self._started:
            self._started = True
            for backup in log_files(self.path)[:-1] if self.path.exists() else log_files(self.path):
                try:
                    events.extend(parse_lines(backup.read_bytes().splitlines(), str(backup)))
                except FileNotFoundError:
                    continue
        if self._handle is None:
            self._handle = self._open_current()
            if self._handle is None:
                return events
        events.extend(self._drain())
        if self._rotated():
            self._handle.close()
            self._pending = b""
            self._handle = self._open_current()
            if self._handle is not None:
                events.extend(self._drain())
        return events

    def _open_current(self) -> IO[bytes] | None:
        try:
            return open(self.path, "rb")
        except FileNotFoundError:
            return None

    def _drain(self) -> list[Event]:
        assert self._handle is not None
        chunk = self._pending + self._handle.read()
        complete, _, self._pending = chunk.rpartition(b"\n")
        if not complete:
            return []
        return list(parse_lines(complete.split(b"\n"), str(self.path)))

    def _rotated(self) -> bool:
        assert self._handle is not None
        try:
            current = os.stat(self.path)
        except FileNotFoundError:
            return False
        mine = os.fstat(self._handle.fileno())
        return (current.st_ino, current.st_dev) != (mine.st_ino, mine.st_dev)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None
