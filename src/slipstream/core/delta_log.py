"""What a Delta table's folder holds, read from its log without Spark: the sink and the source
ask it before they treat a folder as a table."""

from __future__ import annotations

from pathlib import Path


def has_commit(table: Path) -> bool:
    """Whether `table` is a Delta table: its log holds a commit (a version's JSON, or a
    checkpoint). A `_delta_log` folder alone is not one: a first write that failed before its
    commit (a full disk, a kill) leaves the folder (Delta 4 makes `_staged_commits` in it
    first) and Delta answers DELTA_TABLE_NOT_FOUND for it: the sink writes its first batch
    again, the source refuses it before Spark starts."""
    log_dir = table / "_delta_log"
    if not log_dir.is_dir():
        return False
    return any(log_dir.glob("[0-9]*.json")) or any(log_dir.glob("[0-9]*.checkpoint*.parquet"))
