"""One scenario run for real: `slipstream run` in subprocesses on one checkpoint, the faults of
the plan injected between and inside runs, then a run to completion and the verdict.

A verdict is `exact` (the sink equals the model over everything landed, the quarantine holds
each malformed line once, and the final run's summary reconciles), `refused-then-exact` (a run
was refused or stopped with a code, DISK_FULL among them, the documented way out was taken,
and the end was exact), or `defect`
(anything else, with the reasons and the one command that reproduces it)."""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.chaos import disk_full, input_faults, outputs
from tests.chaos.runner import (
    PROCESS_TIMEOUT_S,
    Outcome,
    Runner,
    Sink,
    committed,
    expect_clean,
    refused_code,
)
from tests.chaos.scenario import Fault, Scenario
from tests.chaos.workloads import OTHER_WINDOW, Model

SUMMARY = re.compile(
    r"summary (\S+): .*?([\d,]+) records? read = ([\d,]+) valid \+ ([\d,]+) quarantined"
    r" \+ ([\d,]+) late(?: \([^)]*\))?(?: \+ ([\d,]+) duplicates)?"
)
#: what a run's terminal should never show: a traceback, Spark's log lines, its progress bar
NOISE = re.compile(r"Traceback|^(?:\S+ ){0,2}(?:ERROR|WARN) |\[Stage \d+:", re.M)
#: the documented way out of each refusal a fault may provoke (errors.py's fix lines)
WAY_OUT = {"CHECKPOINT_DAMAGED": "reset --outputs", "STATE_INCOMPATIBLE": "revert the change"}


# --- faults --------------------------------------------------------------------------------------


def kill_random(runner: Runner, fault: Fault, outcome: Outcome) -> None:
    before = runner.last("offsets")
    proc = runner.start()
    started = runner.until(proc, lambda: runner.last("offsets") > before)
    if started:
        time.sleep(fault.delay_s)  # the experiment: where in the batch the kill lands
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        offsets, commits = runner.last("offsets"), runner.last("commits")
        where = "inside a batch" if offsets > commits else "between batches"
        outcome.injected.append(f"kill-random ({where})")
        return
    if expect_clean(runner, outcome, proc.returncode, "kill-random's run"):
        outcome.missed.append("kill-random (the run ended first)")


def kill_at_point(runner: Runner, fault: Fault, outcome: Outcome) -> None:
    point = "before-commit" if fault.kind == "kill-in-sink" else "after-write"
    batch = runner.last("commits") + 1 + fault.ahead
    code = runner.wait(runner.start(fault=f"{point}@{batch}"))
    if code == -signal.SIGKILL:
        if batch <= runner.last("commits"):
            outcome.defect(f"{fault.kind}: batch {batch} committed in the checkpoint")
        outcome.injected.append(fault.kind)
    elif expect_clean(runner, outcome, code, f"{fault.kind}'s run"):
        outcome.missed.append(f"{fault.kind} (batch {batch} not reached)")


def sigint(runner: Runner, fault: Fault, outcome: Outcome) -> None:
    before = runner.last("commits")
    proc = runner.start()
    if runner.until(proc, lambda: runner.last("commits") > before) and proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        code = runner.wait(proc)
        if code == 130:
            outcome.injected.append("sigint")
            return
        if code != 0:
            outcome.defect(f"Ctrl-C: exit {code}, not 130; see {runner.logs[-1]}")
            return
    elif not expect_clean(runner, outcome, runner.wait(proc), "sigint's run"):
        return
    outcome.missed.append("sigint (the run ended first)")


def damage(runner: Runner, fault: Fault, outcome: Outcome) -> None:
    if not committed(runner, outcome):
        return
    target = damaged_file(runner.output, fault.target)
    if target is None:
        outcome.missed.append(f"damage {fault.target} (no such file yet)")
        return
    cut(target, fault.how)
    outcome.injected.append(f"damage ({fault.target} {fault.how})")
    code = runner.run()
    if code == 0:
        outcome.notes.append(f"damaged {fault.target} ({fault.how}) accepted")
        return  # the final comparison judges whether accepting it was right
    if refused(runner, outcome, code, "CHECKPOINT_DAMAGED"):
        # the way out its fix line gives: start over from the landed files
        reset = runner.run(("--outputs", "--yes"), verb="reset")
        runner.read_again()  # the rebuild reads every file as it is now
        if expect_clean(runner, outcome, reset, "reset --outputs"):
            expect_clean(runner, outcome, runner.run(), "the run after reset")


def change_window(runner: Runner, fault: Fault, outcome: Outcome) -> None:
    if not committed(runner, outcome):
        return
    outcome.injected.append("window")
    code = runner.run(("--window", OTHER_WINDOW))
    if code == 0:
        outcome.defect(f"--window {OTHER_WINDOW} ran on another window's checkpoint; see "
                       f"{runner.logs[-1]}")  # fmt: skip
    else:
        refused(runner, outcome, code, "STATE_INCOMPATIBLE")  # way out: revert (the next run)


def refused(runner: Runner, outcome: Outcome, code: int | None, want: str) -> bool:
    said = refused_code(runner.text())
    if code == 2 and said == want:
        outcome.refusals.append(f"{want} -> {WAY_OUT[want]}")
        if outcome.verdict == "exact":
            outcome.verdict = "refused-then-exact"
        return True
    outcome.defect(f"expected {want} (exit 2), got exit {code} ({said}); see {runner.logs[-1]}")
    return False


FAULT_RUNS: dict[str, Callable[[Runner, Fault, Outcome], None]] = {
    "kill-random": kill_random,
    "kill-in-sink": kill_at_point,
    "kill-after-write": kill_at_point,
    "sigint": sigint,
    "damage": damage,
    "window": change_window,
    "append": input_faults.append,
    "late-file": input_faults.late_file,
    "broker": input_faults.broker_restart,
}


def damaged_file(checkpoint: Path, target: str) -> Path | None:
    if target == "build-record":
        path = checkpoint / "slipstream-build.json"
        return path if path.is_file() else None
    folder = checkpoint / {"sources": "sources/0"}.get(target, target)
    if not folder.is_dir():
        return None
    logs = [p for p in folder.iterdir() if p.name.split(".")[0].isdigit()]
    return max(logs, key=lambda p: int(p.name.split(".")[0]), default=None)


def cut(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "empty":
        path.write_bytes(b"")
    elif how == "header-only":
        path.write_bytes(data.split(b"\n", 1)[0] + b"\n")
    else:  # garbled: the middle third overwritten
        third = max(1, len(data) // 3)
        path.write_bytes(data[:third] + b"\x00#garbled#" * (third // 10 + 1) + data[2 * third :])


# --- the end -------------------------------------------------------------------------------------


def judge(runner: Runner, outcome: Outcome) -> None:
    """The run to completion, then the sink, the quarantine and the summary against the model."""
    runner.land_rest()
    if expect_clean(runner, outcome, runner.run(), "the final run"):
        compare(runner, outcome)


def compare(runner: Runner, outcome: Outcome) -> None:
    """After the final run: the sink, the quarantine and the summary against the model."""
    model: Model = runner.workload.model(runner.batches())
    outcome.model = Counter(lines=model.lines, malformed=model.quarantined, late=model.late)
    frame = runner.sink.read()
    got = runner.workload.rows(frame)
    want = model.final if runner.sink.final_only else model.table
    if len(frame) != len(got):
        outcome.defect(f"the sink holds {len(frame) - len(got)} keys twice")
    if frame.attrs.get("records", 0) > len(frame):  # a Kafka topic: at-least-once, allowed
        outcome.notes.append("keys written more than once to the Kafka topic (at-least-once)")
    if got != want:
        lost = {k: v - got.get(k, 0) for k, v in want.items() if got.get(k, 0) < v}
        extra = {k: v - want.get(k, 0) for k, v in got.items() if want.get(k, 0) < v}
        outcome.defect(
            f"sink != model: {sum(lost.values())} lost in {len(lost)} keys, "
            f"{sum(extra.values())} extra in {len(extra)} keys (e.g. {list(lost or extra)[:3]})"
        )
    quarantine = runner.workload.quarantine
    if quarantine:
        folder = runner.state / "quarantine" / runner.scenario.pipeline / quarantine
        held = outputs.quarantined_lines(folder)
        if held != model.quarantined:
            outcome.defect(f"quarantine holds {held} lines, the model {model.quarantined}")
    if runner.workload.dead_letter:  # late rows are kept, each once (runtime/deadletter.py)
        # STATE_DIR/late/NAME for a `--checkpoint .../NAME` (settings/config.py, late_root)
        folder = runner.state / "late" / runner.checkpoint.name / "counts"
        late = outputs.dead_letter_lines(folder)
        if late != model.late:
            outcome.defect(f"the dead-letter holds {late} late records, the model {model.late}")
    check_summary(runner, outcome)
    logs = "\n".join(log.read_text(errors="replace") for log in runner.logs)
    if runner.sink.secret and runner.sink.secret in logs:
        outcome.defect("the database password is in a run's output")
    for log in runner.logs:  # quiet runs (issue 43, item 3): noted, for the report
        noise = NOISE.search(log.read_text(errors="replace"))
        if noise:
            outcome.notes.append(f"{noise.group(0).strip()!r} on a run's terminal")


def check_summary(runner: Runner, outcome: Outcome) -> None:
    """The final run's summary of the output: records read = valid + quarantined + late +
    duplicates, every term a count."""
    name = f"{runner.scenario.pipeline}.counts"
    lines = [m for m in SUMMARY.finditer(runner.text()) if m.group(1) == name]
    if not lines:
        outcome.defect(f"the final run printed no summary of {name}")
        return
    read, *terms = (int((g or "0").replace(",", "")) for g in lines[-1].groups()[1:])
    if read != sum(terms):
        outcome.defect(f"summary: {read} records read != {' + '.join(map(str, terms))}")


def execute(
    scenario: Scenario,
    workdir: Path,
    sink: Sink,
    broker: object = None,
    disk: Any = None,
    timeout_s: float = PROCESS_TIMEOUT_S,
) -> Outcome:
    """`broker`: a started slipstream.tools.kafka_broker.KafkaBroker, for a Kafka input or sink;
    `disk`: a mounted tests.load.disks.SmallDisk that holds the state dir, for the disk-full
    fault (disk_full.py), which ends the scenario; `timeout_s`: the bound on each run."""
    started = time.monotonic()
    outcome = Outcome(scenario)
    disk_path = disk.path if disk else None
    runner = Runner(scenario, workdir, sink, broker, disk=disk_path, timeout_s=timeout_s)
    try:
        for fault in scenario.faults:
            runner.land(fault.land)
            FAULT_RUNS[fault.kind](runner, fault, outcome)
            if outcome.defects:
                break
        else:
            if disk is None:
                judge(runner, outcome)
            elif disk_full.final_run(runner, outcome, disk, scenario.disk_full_kib):
                compare(runner, outcome)
    finally:
        outcome.runs = len(runner.logs)
        outcome.seconds = time.monotonic() - started
    return outcome
