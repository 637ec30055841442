"""One scenario run for real: `slipstream run` in subprocesses on one checkpoint, the faults of
the plan injected between and inside runs, then a run to completion and the verdict.

A verdict is `exact` (the sink equals the model over everything landed, the quarantine holds
each malformed line once, and the final run's summary reconciles), `refused-then-exact` (a run
was refused with a code, the documented way out was taken, and the end was exact), or `defect`
(anything else, with the reasons and the one command that reproduces it)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slipstream.core.files import write_atomically
from tests.chaos import outputs
from tests.chaos.scenario import Fault, Scenario
from tests.chaos.workloads import OTHER_WINDOW, WORKLOADS, Model, Workload
from tests.helpers import REPO, cli_env

PROCESS_TIMEOUT_S = 300
SPARK_ARGS = ["--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2"]
REFUSED = re.compile(r"slipstream: (?:refused|failed) \[([A-Z][A-Z_]+)\]")
SUMMARY = re.compile(
    r"summary (\S+): .*?([\d,]+) records? read = ([\d,]+) valid \+ ([\d,]+) quarantined"
    r" \+ ([\d,]+) late(?: \([^)]*\))?(?: \+ ([\d,]+) duplicates)?"
)
#: what a run's terminal should never show: a traceback, Spark's log lines, its progress bar
NOISE = re.compile(r"Traceback|^(?:\S+ ){0,2}(?:ERROR|WARN) |\[Stage \d+:", re.M)
#: the documented way out of each refusal a fault may provoke (errors.py's fix lines)
WAY_OUT = {"CHECKPOINT_DAMAGED": "reset --outputs", "STATE_INCOMPATIBLE": "revert the change"}


def reproduce(seed: int) -> str:
    return f"cd {REPO} && {sys.executable} -m tests.chaos --seed {seed}"


@dataclass
class Outcome:
    scenario: Scenario
    verdict: str = "exact"
    injected: list[str] = field(default_factory=list)  # fault kinds that happened
    missed: list[str] = field(default_factory=list)  # planned, did not happen (and why)
    refusals: list[str] = field(default_factory=list)  # codes, each followed by its way out
    defects: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    runs: int = 0
    seconds: float = 0.0
    model: Counter[str] = field(default_factory=Counter)  # records landed, malformed, late

    def defect(self, text: str) -> None:
        self.defects.append(text)
        self.verdict = "defect"

    def line(self) -> str:
        parts = [f"{self.verdict}: {self.scenario.describe()}"]
        parts.append(f"{self.runs} runs, {self.seconds:.0f}s")
        if self.injected:
            parts.append("injected " + ", ".join(self.injected))
        if self.missed:
            parts.append("not injected " + ", ".join(self.missed))
        if self.refusals:
            parts.append("refused " + ", ".join(self.refusals))
        text = "; ".join(parts)
        for defect in self.defects:
            text += f"\n  DEFECT {defect}"
        if self.defects:
            text += f"\n  reproduce: {reproduce(self.scenario.seed)}"
        return text


@dataclass
class Sink:
    """Where a scenario writes, the flags that say so, and how to read it back."""

    args: list[str]
    read: Callable[[], Any]
    final_only: bool  # append mode: the windows the watermark closed
    secret: str | None = None


class Runner:
    """`slipstream run` over and over on one checkpoint (the crash suite's Chain, with faults
    of every kind)."""

    def __init__(
        self, scenario: Scenario, workdir: Path, sink: Sink, disk: Path | None = None
    ) -> None:
        """`disk`: where the run writes (checkpoint, state dir); `workdir` unless given (the
        load harness's small or slow file systems)."""
        self.scenario, self.workdir, self.sink = scenario, workdir, sink
        self.workload: Workload = WORKLOADS[scenario.pipeline]
        self.input = workdir / "input"
        self.input.mkdir(parents=True, exist_ok=True)
        self.checkpoint = (disk or workdir) / "checkpoint"
        self.state = (disk or workdir) / "state"
        self.env: dict[str, str] = {}  # the environment of every run (beside cli_env's)
        self.args: list[str] = []  # flags of every run (beside the workload's and the sink's)
        self.output = self.checkpoint / "counts"  # both pipelines' output is `counts`
        staged = workdir / "generated"
        self.staged = self.workload.generate(staged, scenario.files, scenario.data_seed)
        self.landed: list[Path] = []
        self.logs: list[Path] = []
        self.stamp = 0.0

    # --- input -----------------------------------------------------------------------------

    def land(self, count: int) -> None:
        """The next `count` generated files, each with a later modification time (Spark takes
        new files in that order)."""
        for source in self.staged[len(self.landed) : len(self.landed) + count]:
            self.stamp = max(time.time(), self.stamp + 1)
            lines = source.read_text().splitlines()
            self.landed.append(write_atomically(self.input, source.name, lines, mtime=self.stamp))

    def land_rest(self) -> None:
        self.land(len(self.staged) - len(self.landed))

    # --- runs ------------------------------------------------------------------------------

    def command(self, verb: str = "run", extra: tuple[str, ...] = ()) -> list[str]:
        return [
            sys.executable, "-m", "slipstream", verb, self.scenario.pipeline,
            "--input", str(self.input), "--checkpoint", str(self.checkpoint),
            "--state-dir", str(self.state), "--trigger", "available-now",
            "--max-files-per-trigger", "1", *SPARK_ARGS, *self.workload.args, *self.sink.args,
            *self.args, *extra,
        ]  # fmt: skip

    def start(self, fault: str = "", extra: tuple[str, ...] = (), verb: str = "run") -> Any:
        env = cli_env(**self.env, **({"SLIPSTREAM_FAULT": fault} if fault else {}))
        log = self.workdir / f"run-{len(self.logs) + 1:02d}-{verb}.log"
        self.logs.append(log)
        with open(log, "w") as out:
            return subprocess.Popen(
                self.command(verb, extra), stdout=out, stderr=subprocess.STDOUT, env=env,
                stdin=subprocess.DEVNULL, cwd=self.workdir,
            )  # fmt: skip

    def wait(self, proc: Any) -> int | None:
        """The exit code, or None when the run hung past the bound (it is killed)."""
        try:
            return int(proc.wait(timeout=PROCESS_TIMEOUT_S))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None

    def run(self, extra: tuple[str, ...] = (), verb: str = "run") -> int | None:
        return self.wait(self.start(extra=extra, verb=verb))

    def text(self, index: int = -1) -> str:
        return self.logs[index].read_text(errors="replace")

    def last(self, log: str) -> int:
        folder = self.output / log
        ids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
        return max(ids, default=-1)

    def until(self, proc: Any, condition: Callable[[], bool]) -> bool:
        """Bounded poll on the checkpoint while the run lives: True once `condition` holds,
        False if the run ended first."""
        deadline = time.monotonic() + PROCESS_TIMEOUT_S
        while not condition():
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


# --- faults --------------------------------------------------------------------------------------


def refused_code(text: str) -> str | None:
    found = REFUSED.search(text)
    return found.group(1) if found else None


def expect_clean(runner: Runner, outcome: Outcome, code: int | None, what: str) -> bool:
    """A run that should have finished: exit 0, else a defect (a refusal is not expected)."""
    if code == 0:
        return True
    said = refused_code(runner.text()) or "no code"
    outcome.defect(f"{what}: exit {code} ({said}); see {runner.logs[-1]}")
    return False


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


def committed(runner: Runner, outcome: Outcome) -> bool:
    """A checkpoint that has committed a batch, for the faults that need one: when a kill
    before landed inside the first batch, a run to completion first."""
    if runner.last("commits") >= 0:
        return True
    return expect_clean(runner, outcome, runner.run(), "the run before the fault")


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
    model: Model = runner.workload.model(runner.landed)
    outcome.model = Counter(lines=model.lines, malformed=model.quarantined, late=model.late)
    frame = runner.sink.read()
    got = runner.workload.rows(frame)
    want = model.final if runner.sink.final_only else model.table
    if len(frame) != len(got):
        outcome.defect(f"the sink holds {len(frame) - len(got)} keys twice")
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


def execute(scenario: Scenario, workdir: Path, sink: Sink) -> Outcome:
    started = time.monotonic()
    outcome = Outcome(scenario)
    runner = Runner(scenario, workdir, sink)
    try:
        for fault in scenario.faults:
            runner.land(fault.land)
            FAULT_RUNS[fault.kind](runner, fault, outcome)
            if outcome.defects:
                break
        else:
            judge(runner, outcome)
    finally:
        outcome.runs = len(runner.logs)
        outcome.seconds = time.monotonic() - started
    return outcome
