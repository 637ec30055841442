"""A state dir whose disk fills during a run (issue 45 item 2): mobile into SQLite, its
checkpoints, SQLite file, quarantine and event log on a 280 KiB tmpfs that 4 files outgrow
(the run needs 300-400 KiB: it filled after 3 of its 6 batches here).
The run stops with DISK_FULL (the state dir, the room left, the fix), no traceback and no line
of Spark's log; with the tmpfs grown, the same command completes and the table equals the fault
campaign's independent model: no record lost or doubled (tests/load/resources.py's FullDisk,
which `make stress` runs with 8 files). Mounting needs root, as CI runs: a refused mount fails
the test, saying so, rather than skip it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.load.resources import FullDisk

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_full_state_disk_stops_with_disk_full_then_the_same_command_completes_exact(
    tmp_path: Path,
) -> None:
    # a refused mount is a failed result that says what refused (tests/load/resources.py)
    result = FullDisk(files=4, kib=280).run(tmp_path, None)
    print(result.notes)
    assert result.exact, result.notes
    # the disk filled during the run: after a batch or more had committed
    full = next(note for note in result.notes if note.startswith("DISK_FULL after"))
    assert int(full.split()[2]) >= 1, result.notes
