"""The disk-full fault (drawn from a scenario's third stream, scenario.py; the load harness's
`FullDisk` case runs the same steps, tests/load/resources.py): the state dir (checkpoint,
quarantine, dead-letter, the SQLite file when the sink is SQLite) on a tmpfs
(tests/load/disks.py, as root) that the run outgrows.

What must follow, as slipstream documents it (errors.py, DISK_FULL): the run stops with exit 1
and `[DISK_FULL]`, naming the state dir and the fix, with no traceback and no line of Spark's
log, and every line that says the disk is full carries the code; once the disk has room the
same command completes exact, or, when the full disk damaged the checkpoint, is refused with
CHECKPOINT_DAMAGED and its way out (`reset --outputs`, the same command) ends exact."""

from __future__ import annotations

import re
from typing import Any

from tests.chaos.runner import Outcome, Runner, expect_clean, refused_code

#: what a full disk's run must say: the code (the CLI's `the query failed:` line or its last net)
DISK_FULL = re.compile(r"\[DISK_FULL\] no space left on the disk")
#: what a full disk makes a write say; every line that says it carries DISK_FULL
FULL_WORDS = re.compile(r"Errno 28|No space left|disk I/O error|SQLITE_FULL|SINK_WRITE_FAILED")
#: the room the disk is grown to once full: the fix
ROOM_KIB = 64 * 1024
#: what the campaign's report says of the stop and its way out
WAY_OUT = "DISK_FULL -> room on the disk, the same command"


def quiet(runner: Runner, outcome: Outcome, what: str) -> None:
    """The last run's terminal: no traceback, no line of Spark's log."""
    from tests.chaos.execute import NOISE

    noise = NOISE.search(runner.text())
    if noise:
        outcome.defect(f"{what}: {noise.group(0).strip()!r} on the terminal; see {runner.logs[-1]}")


def judge_full(runner: Runner, outcome: Outcome, code: int | None) -> None:
    """The run the full disk stopped: exit 1, DISK_FULL naming the state dir and the fix, every
    line that says so with the code, a quiet terminal."""
    text = runner.text()
    if code != 1 or not DISK_FULL.search(text):
        outcome.defect(f"the full disk: exit {code}, no DISK_FULL; see {runner.logs[-1]}")
    elif str(runner.state) not in text or "fix: free space" not in text:
        outcome.defect(f"DISK_FULL names no state dir or fix; see {runner.logs[-1]}")
    uncoded = [s for s in text.splitlines() if FULL_WORDS.search(s) and "[DISK_FULL]" not in s]
    if uncoded:
        outcome.defect(f"the full disk said without its code: {uncoded[0]!r}")
    quiet(runner, outcome, "the full disk's run")


def grow_and_finish(
    runner: Runner, outcome: Outcome, disk: Any, code: int | None, notes: list[str]
) -> bool:
    """After the run on the full disk (`code`; `disk`: a tests.load.disks.SmallDisk that holds
    the state dir): that run judged, the fix (the disk grown) and the same command, through
    CHECKPOINT_DAMAGED and `reset --outputs` when the full disk damaged the checkpoint. True
    when the last run ended clean (the caller compares the sink with the model)."""
    judge_full(runner, outcome, code)
    notes.append(f"DISK_FULL after {runner.last('commits') + 1} batches")
    outcome.refusals.append(WAY_OUT)
    if outcome.verdict == "exact":
        outcome.verdict = "refused-then-exact"
    disk.grow(ROOM_KIB)  # the fix: room on the state dir's disk
    code = runner.run()
    if code == 2 and refused_code(runner.text()) == "CHECKPOINT_DAMAGED":
        notes.append("the full disk damaged the checkpoint: refused, reset --outputs")
        outcome.refusals.append("CHECKPOINT_DAMAGED -> reset --outputs")
        reset = runner.run(("--outputs", "--yes"), verb="reset")
        runner.read_again()  # the rebuild reads every file as it is now
        if not expect_clean(runner, outcome, reset, "reset --outputs after the full disk"):
            return False
        code = runner.run()
    else:
        notes.append("the checkpoint was whole: the next run went on from it")
    return expect_clean(runner, outcome, code, "the run after the disk was grown")


def final_run(runner: Runner, outcome: Outcome, disk: Any, kib: int) -> bool:
    """The campaign's end with the fault: the rest of the files landed, the disk left `kib` KiB
    of room, the same command, then `grow_and_finish`. A final run that fits in the room is a
    fault not injected. True when the last run ended clean."""
    runner.land_rest()
    disk.leave(kib)
    code = runner.run()
    if code == 0:
        outcome.missed.append(f"disk-full (the final run fitted in {kib} KiB)")
        disk.grow(ROOM_KIB)
        return True
    outcome.injected.append(f"disk-full ({kib} KiB left)")
    return grow_and_finish(runner, outcome, disk, code, outcome.notes)
