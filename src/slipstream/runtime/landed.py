"""After each batch, the files it read, judged against the folder: what Spark does not say.

Spark's file source reads a path once and records it in the checkpoint's source log
(`sources/0/N`: the path and the modification time it listed). Three fates it keeps quiet:

- a file that cannot be opened (permission denied): `ignoreMissingFiles` takes it for a
  deleted one, skips it and records it as read. Here it is FILE_UNREADABLE: the run stops with
  that code, naming the file; the way out is to make it readable and land it again under a new
  name (Spark never reads a recorded path twice).
- a file deleted between the listing and the read: skipped (it was taken back); a warning
  (FILE_DELETED) names it.
- a file whose modification time is not the one listed (lines appended, or rewritten in
  place, after Spark listed it): what changed after the read is never read. A warning
  (FILE_CHANGED) names it: files must land whole (write elsewhere, then rename in).

Each problem file is reported once per run (every query of a run reads the same files); a
healthy file costs one open and one stat per query and batch and is not remembered."""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slipstream.checkpoint.logs import LoggedFile, batch_file_entries, logged_files
from slipstream.core.files import local_path
from slipstream.errors import SlipstreamError

if TYPE_CHECKING:
    from slipstream.runtime.bound import Prepared

log = logging.getLogger(__name__)


def judge(entry: LoggedFile) -> SlipstreamError | None:
    """The problem with one file a batch read, or None when it was read whole."""
    path = local_path(entry.path)
    if path is None:
        return None
    if not os.path.lexists(path):
        return SlipstreamError(
            "FILE_DELETED",
            f"{path} was listed, then deleted before it was read: its records were skipped",
            "land files whole and leave them in place (the source reads each path once)",
        )
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError as exc:
        return SlipstreamError(
            "FILE_UNREADABLE",
            f"{path} could not be read ({exc.strerror}); Spark recorded it as read without "
            "its records",
            f"make it readable (chmod a+r), then land it again under a new name (e.g. mv "
            f"{path.name} {path.name}.again): the source never reads a recorded path twice",
        )
    try:
        mtime_ms = os.fstat(descriptor).st_mtime_ns // 1_000_000
    finally:
        os.close(descriptor)
    if entry.mtime_ms and mtime_ms != entry.mtime_ms:
        return SlipstreamError(
            "FILE_CHANGED",
            f"{path} changed after it was listed (modified {mtime_ms - entry.mtime_ms} ms "
            "later): lines appended or rewritten after its batch are never read",
            "land files whole (write elsewhere, then rename in); put new lines in a new file",
        )
    return None


class LandedFilesCheck:
    """A listener handler: after each executed batch of a query, judge the files it read.
    `failure` holds the first FILE_UNREADABLE (Run.wait stops the run and raises it)."""

    def __init__(self, prepared: Prepared) -> None:
        self.checkpoints = {
            out.ctx.query_name: Path(out.ctx.checkpoint) for out in prepared.outputs.values()
        }
        self.failure: SlipstreamError | None = None
        # files another checkpoint read (--from-checkpoint): listed here, never opened
        start = prepared.start_from
        self.skipped: frozenset[str] = frozenset()
        if start is not None:
            self.skipped = frozenset().union(*(start.skips(n) for n in start.inputs))
        self.reported: dict[str, SlipstreamError] = {}  # problem files only
        self._lock = threading.Lock()

    def check_read_files(self) -> None:
        """At a run's start: every file the checkpoints recorded as read, judged again, so a
        file that grew since its batch is said once per run (the cost: one open and stat per
        file read before; the `status` command does not do it)."""
        for checkpoint in self.checkpoints.values():
            try:
                entries = list(logged_files(checkpoint))
            except (OSError, ValueError, KeyError):
                continue  # a damaged log: refused by the checkpoint check before a query starts
            for entry in entries:
                if entry.path not in self.reported:
                    problem = judge(entry)
                    # only growth: a file deleted or made unreadable after it was read (a
                    # folder cleaned up, the user's way out above) lost nothing
                    if problem is not None and problem.code == "FILE_CHANGED":
                        self._report(entry.path, problem)

    def handle(self, record: dict[str, Any]) -> None:
        if record.get("event") != "progress":
            return
        checkpoint = self.checkpoints.get(str(record.get("query")))
        batch = (record.get("progress") or {}).get("batchId")
        if checkpoint is None or batch is None:
            return
        try:
            entries = batch_file_entries(checkpoint, int(batch))
        except (OSError, ValueError, KeyError, IndexError):
            return  # no file source, or a log being compacted: nothing to judge
        for entry in entries:
            self._report(entry.path, judge(entry))

    def _report(self, path: str, problem: SlipstreamError | None) -> None:
        if problem is None or path in self.skipped:
            return
        with self._lock:
            if path in self.reported:
                return
            self.reported[path] = problem
            if problem.code == "FILE_UNREADABLE" and self.failure is None:
                self.failure = problem
        log.warning("%s", problem.render())
