"""Running one trending implementation as a process and judging its output (scenario peers).

A run is a `Proc` (its own process group) watched by a sampler thread that reads /proc every
0.2 s: the resident memory of every process of the group, summed (peak = the highest sum), and
their CPU time. Wall time is launch to exit; "processing" excludes start-up where the program
says when it starts reading (`PEER-MARK reading <epoch s>`, bench/peers/peer_common.py) or,
for slipstream, as the span of its micro-batches, every `trending.*` query's: from the start of
the first to the end of the last (with the ingest stage the ingest query's batch runs first and
the outputs' after it; without, the results and quarantine queries' batches run together).
Before issue 26 (run L) it was the sum of the results query's batches alone.

Output rows are compared as sets of (window_start, window_end, article_id, title, section,
views, in_catalog), an empty title or section read as NULL."""

from __future__ import annotations

import csv
import os
import resource
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.procs import Proc, group_cpu_seconds, group_stat_fields

PAGE = os.sysconf("SC_PAGE_SIZE")
Row = tuple[Any, ...]


def group_rss_bytes(pgid: int) -> int:
    """Sum of the resident set sizes of the processes of process group `pgid`, from /proc."""
    return sum(int(f[21]) for f in group_stat_fields(pgid)) * PAGE


@dataclass
class Sampler:
    pgid: int
    every: float = 0.2
    peak_rss: int = 0
    cpu: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.peak_rss = max(self.peak_rss, group_rss_bytes(self.pgid))
            self.cpu = max(self.cpu, group_cpu_seconds(self.pgid))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def marks(log: Path) -> dict[str, float]:
    """The `PEER-MARK label epoch` lines of a run's log."""
    out: dict[str, float] = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("PEER-MARK "):
            _, label, at = line.split()
            out[label] = float(at)
    return out


def measure(argv: list[str], log: Path, events: int, timeout: float) -> dict[str, Any]:
    """Run `argv` to its end; wall and processing time, events/s, peak RSS, CPU seconds."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    launched = time.time()
    proc = Proc(argv, log)
    sampler = Sampler(proc.popen.pid)
    try:
        code = proc.wait(timeout)
    finally:
        sampler.stop()
    ended = time.time()
    if code != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} failed ({code}):\n{proc.tail(25)}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (after.ru_utime + after.ru_stime) - (children.ru_utime + children.ru_stime)
    seen = marks(log)
    batches = [b for b in proc.batch_lines() if b.query.startswith("trending.")]
    if "reading" in seen:
        processing = seen.get("done", ended) - seen["reading"]
    elif batches:
        processing = max(b.at for b in batches) - min(b.at - b.seconds for b in batches)
    else:
        processing = float("nan")
    wall = ended - launched
    cpu = max(sampler.cpu, reaped)
    return {
        "wall_s": wall,
        "events_per_s": events / wall,
        "processing_s": processing,
        "events_per_s_processing": events / processing if processing else float("nan"),
        "startup_s": wall - processing,
        "cpu_s": cpu,
        "events_per_cpu_s": events / cpu if cpu else float("nan"),
        "peak_rss_mib": sampler.peak_rss / 2**20,
    }


def csv_rows(path: Path) -> set[Row]:
    with path.open(encoding="utf-8", newline="") as handle:
        return {
            (
                r["window_start"],
                r["window_end"],
                r["article_id"],
                r["title"] or None,
                r["section"] or None,
                int(r["views"]),
                r["in_catalog"] == "True",
            )
            for r in csv.DictReader(handle)
        }


def compare(mine: set[Row], other: set[Row]) -> dict[str, Any]:
    """Equal or not, and how far apart: rows on one side only, views on one side only."""
    only_mine, only_other = mine - other, other - mine
    return {
        "equal": mine == other,
        "rows_only_here": len(only_mine),
        "rows_only_there": len(only_other),
        "views_diff": sum(r[5] for r in mine) - sum(r[5] for r in other),
    }
