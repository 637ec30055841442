"""The faults of the input (drawn from a scenario's second stream, scenario.py): lines appended to
a file a committed batch read, a file landed late, and the Kafka broker stopped and started
again between or during runs.

What each must lead to, as slipstream documents it: an appended file's new lines are never read
(runtime/landed.py), and the next run names the file with FILE_CHANGED; a late file's records,
older than the watermark, are dropped as late (the model's lateness rule counts them, the
summary's equation and the dead-letter hold them); a broker that comes back lets the same
command resume, a run that outlived the client's timeouts stopping with KAFKA_UNREACHABLE."""

from __future__ import annotations

import json
import re
import signal
import time

from tests.chaos.runner import Outcome, Runner, committed, expect_clean
from tests.chaos.scenario import LATE_AFTER, Fault

#: how many lines the append fault adds
APPENDED = 5
#: a query stopped by the broker's absence (sources/kafka_faults.py)
UNREACHABLE = re.compile(r"slipstream: the query failed.*\[KAFKA_UNREACHABLE\]")


def appended_lines(pipeline: str, batches: list[list[str]]) -> list[str]:
    """Valid records that would count if they were read: mobile actions at the newest event
    time landed (never late), words no generator writes."""
    if pipeline != "mobile":
        return [f"appended{i} never read" for i in range(APPENDED)]
    stamps = []
    for line in (line for batch in batches for line in batch):
        try:
            stamps.append(str(json.loads(line)["ts"]))
        except (ValueError, KeyError, TypeError):
            continue
    newest = max(stamps)
    return [
        json.dumps({"id": f"appended{i}", "action": "open", "ts": newest}, separators=(",", ":"))
        for i in range(APPENDED)
    ]


def append(runner: Runner, fault: Fault, outcome: Outcome) -> None:
    """Lines appended to the first landed file (batch 0 read it and committed), its
    modification time moved on; the next run must say FILE_CHANGED naming it, and the model
    keeps the file as it was read."""
    if not committed(runner, outcome):
        return
    path = runner.landed[0]
    runner.append_to(path, appended_lines(runner.scenario.pipeline, runner.batches()))
    outcome.injected.append("append")
    if not expect_clean(runner, outcome, runner.run(), "the run after the append"):
        return
    said = [line for line in runner.text().splitlines() if "FILE_CHANGED" in line]
    if not any(str(path) in line for line in said):
        outcome.defect(f"the run after lines were appended to {path.name} did not name it "
                       f"with FILE_CHANGED; see {runner.logs[-1]}")  # fmt: skip


def late_file(runner: Runner, fault: Fault, outcome: Outcome) -> None:
    """The next file held back until LATE_AFTER later ones landed (or the end), then a run."""
    if not runner.pending:
        outcome.missed.append("late-file (no file left)")
        return
    runner.held, runner.hold_for = runner.pending.pop(0), LATE_AFTER
    outcome.injected.append("late-file")
    expect_clean(runner, outcome, runner.run(), "the run with a file held back")


def broker_restart(runner: Runner, fault: Fault, outcome: Outcome) -> None:
    broker = runner.broker
    if fault.how == "between":
        broker.stop()
        broker.start()
        outcome.injected.append("broker (between runs)")
        expect_clean(runner, outcome, runner.run(), "the run after the broker's restart")
        return
    before = runner.last("offsets")
    proc = runner.start()
    if not runner.until(proc, lambda: runner.last("offsets") > before) or proc.poll() is not None:
        if expect_clean(runner, outcome, runner.wait(proc), "the broker fault's run"):
            outcome.missed.append(f"broker {fault.how} (the run ended first)")
        return
    broker.stop(kill=True)  # a crash of the broker, inside a batch
    if fault.how == "kill":
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        broker.start()
        outcome.injected.append("broker (run killed while it was down)")
        return
    time.sleep(fault.delay_s)  # the experiment: how long the broker stays away
    broker.start()
    outcome.injected.append("broker (down during a run)")
    code = runner.wait(proc)
    if code == 0:
        return
    if code == 1 and UNREACHABLE.search(runner.text()):
        outcome.refusals.append("KAFKA_UNREACHABLE -> run the same command")
        if outcome.verdict == "exact":
            outcome.verdict = "refused-then-exact"
        expect_clean(runner, outcome, runner.run(), "the run after KAFKA_UNREACHABLE")
        return
    outcome.defect(f"the run the broker left: exit {code}, not 0 nor KAFKA_UNREACHABLE; "
                   f"see {runner.logs[-1]}")  # fmt: skip
