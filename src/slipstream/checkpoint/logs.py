"""What Spark's checkpoint of one streaming query says, read as files, without Spark.

A query checkpoint holds `metadata` (the query id), `offsets/N` (batch N's plan: its time, the
watermark it carries and each source's offset), `commits/N` (batch N done) and, for a file
source I, `sources/I/K` (the files of the source's log offset K, or `K.compact` holding every
entry up to K). The late-row dead-letter reads which files a committed batch read from these
(runtime/deadletter.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def _log_lines(path: Path) -> list[str]:
    """A metadata log file of Spark's: a version line, then one entry a line."""
    return path.read_text(encoding="utf-8").splitlines()[1:]


@dataclass(frozen=True)
class BatchOffsets:
    watermark_ms: int  # batchWatermarkMs
    timestamp_ms: int  # batchTimestampMs
    sources: tuple[Any, ...]  # each source's offset (JSON), None where it has none


def batch_offsets(checkpoint: Path, batch: int) -> BatchOffsets:
    path = Path(checkpoint) / "offsets" / str(batch)
    lines = _log_lines(path)
    if not lines:
        raise ValueError(f"{path} is incomplete: no batch line after its version line")
    meta = json.loads(lines[0])
    sources = tuple(None if s.strip() == "-" else json.loads(s) for s in lines[1:])
    return BatchOffsets(
        int(meta.get("batchWatermarkMs", 0)), int(meta["batchTimestampMs"]), sources
    )


def _entries(folder: Path, log_offset: int) -> Iterator[dict[str, Any]]:
    """The file source's log entries of one of its log offsets (its own file, or a compacted
    file holding every entry up to its number), read a line at a time."""
    plain = folder / str(log_offset)
    if plain.is_file():
        for line in _log_lines(plain):
            yield json.loads(line)
        return
    compacted = sorted(
        (int(p.name.split(".")[0]), p) for p in folder.glob("*.compact") if p.name[0].isdigit()
    )
    path = next((p for n, p in compacted if n >= log_offset), None)
    if path is None:
        raise FileNotFoundError(f"{plain}: no log entry for the file source's batch {log_offset}")
    with path.open(encoding="utf-8") as handle:
        next(handle, None)  # the version line
        for line in handle:
            entry = json.loads(line)
            if entry.get("batchId") == log_offset:
                yield entry


@dataclass(frozen=True)
class LoggedFile:
    path: str  # as Spark recorded it (file:///...)
    mtime_ms: int  # the modification time Spark listed (its source log's `timestamp`)


def batch_files(checkpoint: Path, batch: int) -> list[str]:
    """Every file batch `batch` read from the query's file sources (other sources: none)."""
    return [f.path for f in batch_file_entries(checkpoint, batch)]


def batch_file_entries(checkpoint: Path, batch: int) -> list[LoggedFile]:
    """batch_files, with the modification time Spark listed for each."""
    now = batch_offsets(checkpoint, batch).sources
    before = batch_offsets(checkpoint, batch - 1).sources if batch > 0 else ()
    files: list[LoggedFile] = []
    for index, offset in enumerate(now):
        if not (isinstance(offset, dict) and "logOffset" in offset):
            continue
        previous = before[index] if index < len(before) else None
        start = previous["logOffset"] if isinstance(previous, dict) else -1
        folder = Path(checkpoint) / "sources" / str(index)
        for log_offset in range(int(start) + 1, int(offset["logOffset"]) + 1):
            files += [
                LoggedFile(str(e["path"]), int(e.get("timestamp", 0)))
                for e in _entries(folder, log_offset)
            ]
    return files


def query_id(checkpoint: Path) -> str | None:
    """The query id of a checkpoint that started once; None for a new (or reset) one."""
    try:
        return str(json.loads((Path(checkpoint) / "metadata").read_text())["id"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def committed(checkpoint: Path) -> list[int]:
    folder = Path(checkpoint) / "commits"
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


def _source_entries(folder: Path) -> Iterator[dict[str, Any]]:
    """Every entry of one file source's log: the newest compacted file (it holds every entry
    up to its number) and the files after it."""
    numbered = [p for p in folder.iterdir() if p.name.split(".")[0].isdigit()]
    compacts = [p for p in numbered if p.name.endswith(".compact")]
    newest = max((int(p.name.split(".")[0]) for p in compacts), default=-1)
    for path in sorted(numbered, key=lambda p: int(p.name.split(".")[0])):
        number = int(path.name.split(".")[0])
        if number < newest or (number == newest and not path.name.endswith(".compact")):
            continue
        if "." in path.name and not path.name.endswith(".compact"):
            continue  # .crc and temp files
        for line in _log_lines(path):
            yield json.loads(line)


def logged_files(checkpoint: Path) -> Iterator[LoggedFile]:
    """Every file the query's file sources recorded as read, from each source's log."""
    for folder in sorted((Path(checkpoint) / "sources").glob("*")):
        for entry in _source_entries(folder):
            yield LoggedFile(str(entry["path"]), int(entry.get("timestamp", 0)))


def files_read_by(checkpoint: Path, batch: int) -> list[str]:
    """Every file the query's file sources read in batches 0 to `batch` (entries a later,
    uncommitted batch logged are left out: a restart reads them again)."""
    files: list[str] = []
    for index, offset in enumerate(batch_offsets(checkpoint, batch).sources):
        if not (isinstance(offset, dict) and "logOffset" in offset):
            continue
        folder = Path(checkpoint) / "sources" / str(index)
        last = int(offset["logOffset"])
        files += [str(e["path"]) for e in _source_entries(folder) if int(e["batchId"]) <= last]
    return files


def kafka_positions(checkpoint: Path, batch: int) -> dict[str, dict[str, int]]:
    """Where the query's Kafka sources stand after batch `batch`: topic -> partition -> the
    next offset to read (Spark logs a batch's end offsets, exclusive)."""
    found: dict[str, dict[str, int]] = {}
    for offset in batch_offsets(checkpoint, batch).sources:
        if not isinstance(offset, dict) or "logOffset" in offset:
            continue
        for topic, partitions in offset.items():
            if isinstance(partitions, dict):
                mine = found.setdefault(str(topic), {})
                for partition, next_offset in partitions.items():
                    mine[str(partition)] = max(int(next_offset), mine.get(str(partition), 0))
    return found


PARTITIONS = "spark.sql.shuffle.partitions"


def recorded_partitions(checkpoint: Path) -> int | None:
    """The shuffle partitions Spark fixed into a query's checkpoint at its first batch (the
    `conf` of its latest offsets entry; Spark restores it on every restart, whatever the
    session says). None for a checkpoint without batches or without the entry."""
    value = recorded_conf(checkpoint, PARTITIONS) or ""
    return int(value) if value.isdigit() and int(value) > 0 else None


def recorded_conf(checkpoint: Path, key: str) -> str | None:
    """A setting Spark fixed into a query's checkpoint at its first batch (the shuffle
    partitions, the state store's provider: the `conf` of its latest offsets entry), or None
    for a checkpoint without batches or without the entry."""
    folder = Path(checkpoint) / "offsets"
    try:
        batches = [int(p.name) for p in folder.iterdir() if p.name.isdigit()]
    except OSError:
        return None
    if not batches:
        return None
    try:
        meta = json.loads(_log_lines(folder / str(max(batches)))[0])
        value = meta.get("conf", {}).get(key)
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return str(value) if value else None
