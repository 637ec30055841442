"""A progress bar for `--trigger available-now` backfills over the files source.

Spark's progress reports rows, not files, and the file source reports no backlog
(`sources[].metrics` is empty for it, measured on 4.3). The file source's own log in the
checkpoint (`QUERY/sources/0/BATCH`, one JSON line per file read, `v1` header; every tenth batch
compacted into `BATCH.compact`) says which files were read. So: the files pending at start are
the landing directory minus that log, and after each batch the bar advances to the pending files
the log now holds."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import TextIO
from urllib.parse import unquote, urlsplit

from slipstream.monitor.listener import Record
from slipstream.monitor.progressbar import ProgressBar


def source_log(query_checkpoint: Path, source: int = 0) -> Path:
    return Path(query_checkpoint) / "sources" / str(source)


def files_read(log_dir: Path, up_to: int | None = None) -> set[Path]:
    """The files the file source's log lists (empty before the first batch); with `up_to`,
    only those of its log batches up to that one (the source's `endOffset.logOffset`: Spark
    writes a batch's entries when it plans the batch, before it runs it)."""
    seen: set[Path] = set()
    if not Path(log_dir).is_dir():
        return seen
    for entry in Path(log_dir).iterdir():
        if entry.name.startswith(".") or not entry.name.split(".")[0].isdigit():
            continue
        try:
            lines = entry.read_text().splitlines()
        except FileNotFoundError:  # replaced by a compact file meanwhile
            continue
        for line in lines[1:]:  # the first line is the log's version, "v1"
            try:
                entry = json.loads(line)
                uri, batch = entry["path"], entry.get("batchId", -1)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            if up_to is None or batch <= up_to:
                seen.add(Path(unquote(urlsplit(uri).path)))
    return seen


def pending_files(input_dir: Path, log_dir: Path) -> set[Path]:
    """Files in `input_dir` the source has not read yet (Spark skips names starting . or _)."""
    directory = Path(os.path.abspath(input_dir))  # as Spark qualifies it: symlinks kept
    if not directory.is_dir():
        return set()
    listed = {p for p in directory.iterdir() if p.is_file() and not p.name.startswith((".", "_"))}
    return listed - files_read(log_dir)


def end_log_offset(record: Record) -> int | None:
    """`sources[0].endOffset.logOffset` of a progress record: the file source's last log batch
    that this query batch read (Spark gives the offset as an object or as JSON text)."""
    try:
        offset = record["progress"]["sources"][0]["endOffset"]
        if isinstance(offset, str):
            offset = json.loads(offset)
        return int(offset["logOffset"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


class BackfillBar:
    """A listener handler drawing `backfill QUERY [####----] 3/5 files` as batches commit."""

    def __init__(
        self,
        query: str,
        log_dir: Path,
        pending: set[Path],
        stream: TextIO,
        enabled: bool | None = None,
    ) -> None:
        self.query = query
        self.log_dir = Path(log_dir)
        self.pending = pending
        self.bar = ProgressBar(len(pending), f"backfill {query} (files)", stream, enabled)
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return self.bar.enabled

    def __call__(self, record: Record) -> None:
        if record.get("query") != self.query:
            return
        with self._lock:
            if record["event"] == "started":
                self.bar.update(0)  # draw 0/N while the first batch runs
            elif record["event"] == "progress":
                done = len(files_read(self.log_dir, end_log_offset(record)) & self.pending)
                self.bar.update(max(done - self.bar.done, 0))
            elif record["event"] == "terminated":
                self.bar.close(interrupted=bool(record.get("exception")))

    def close(self) -> None:
        with self._lock:
            self.bar.close()
