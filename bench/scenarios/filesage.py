"""16b. What reading files of any age costs: Spark's `maxFileAge` at its default against
slipstream's (issue 29 item 1).

Spark's file source remembers each file it has read (path and modification time) so that it
never reads one twice, and forgets those older than `maxFileAge` (default 7 days) before the
newest file it has seen; a file landed later with an older mtime (`cp -p`, `rsync -a`, `tar x`)
is then skipped without a word. slipstream sets `maxFileAge` to 365000 days
(`sources/files.py`), so nothing is forgotten and nothing skipped. The price is that memory:
this scenario measures it. For each setting, on the same session:

1. 10 files with today's mtime, one batch (the query's newest file is now);
2. N files whose mtimes lie 8-60 days back (a backfill), one batch: how many were read;
3. the driver's heap after a full GC, against the heap after step 1: the files remembered;
4. one more new file, one batch: the batch time with the remembered files (each listed file is
   looked up in that map), and the source log's bytes on disk.

Heap is the driver JVM's used heap after `System.gc()` (local mode: the driver is the only
JVM); bytes per file = heap growth / files read."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from bench import inproc
from bench.core import Context, Result, median

NAME = "filesage"
TITLE = "files of any age: maxFileAge 7d (Spark's default) vs 365000d (slipstream), a backfill"
DAY = 86_400
SETTINGS = {"spark default (7d)": "7d", "slipstream (365000d)": "365000d"}


def land(folder: Path, first: int, count: int, mtime_of: Any) -> None:
    for index in range(first, first + count):
        path = folder / f"f{index:07d}.json"
        path.write_text(f'{{"i": {index}}}\n')
        stamp = mtime_of(index)
        os.utime(path, (stamp, stamp))


def heap_after_gc(spark: Any) -> float:
    """Used heap (MiB) after full GCs, the median of three (a GC may leave a little behind)."""
    return median([inproc.jvm_memory(spark, gc=True)["heap_mib"] for _ in range(3)])


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def measure(ctx: Context, label: str, max_age: str, files: int) -> dict[str, Any]:
    spark = inproc.session()
    root = ctx.scratch("filesage") / f"{max_age}-{inproc.unique()}"
    landing, checkpoint = root / "in", root / "ck"
    landing.mkdir(parents=True)
    now = int(time.time())
    land(landing, 0, 10, lambda i: now)
    frame = spark.readStream.option("maxFileAge", max_age).text(str(landing))
    query = inproc.start_noop(frame, f"bench-filesage-{inproc.unique()}", checkpoint, "append")
    try:
        query.processAllAvailable()
        before = heap_after_gc(spark)
        land(landing, 10, files, lambda i: now - 8 * DAY - (i % (52 * DAY)))
        query.processAllAvailable()
        read = sum(int(p["numInputRows"]) for p in query.recentProgress) - 10
        after = heap_after_gc(spark)
        land(landing, 10 + files, 1, lambda i: now + 1)
        query.processAllAvailable()
        last = query.lastProgress
        next_ms = float(last["durationMs"]["triggerExecution"])
    finally:
        query.stop()
    grown = after - before
    return {
        "setting": label,
        "files_landed_old": files,
        "files_read": read,
        "heap_growth_mib": round(grown, 1),
        "bytes_per_file_read": round(grown * 2**20 / read) if read >= files // 2 else None,
        "next_batch_ms": round(next_ms),
        "source_log_kib": round(folder_bytes(checkpoint / "sources") / 1024),
    }


def run(ctx: Context) -> Result:
    result = Result(NAME, TITLE)
    files = ctx.param("files", 20_000, 100_000)
    reps = ctx.param("reps", 1, 2)
    for rep in range(reps):
        for label, max_age in SETTINGS.items():
            row = measure(ctx, label, max_age, files)
            result.add(rep=rep + 1, **row)
    result.notes.append(
        "files_read < files_landed_old is the loss issue 29 found (the backfill skipped); "
        "heap_growth is what remembering every file costs, for as long as the query runs"
    )
    return result
