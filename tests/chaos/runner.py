"""A scenario's runs and its input: `slipstream run` over and over on one checkpoint, the
generated files landed in a folder or produced to a Kafka topic, and what each run did
(`Outcome`). The faults are execute.py's and input_faults.py's."""

from __future__ import annotations

import functools
import os
import re
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
from tests.chaos.scenario import Scenario
from tests.chaos.workloads import WORKLOADS, Workload
from tests.helpers import REPO, SHORT_LIVED_JVM, cli_env

PROCESS_TIMEOUT_S = 300
#: a Delta sink's run: each micro-batch is a MERGE and a commit of Delta's log, 25-60 s a batch
#: of 40 rows on 2 cores beside two other scenarios (a final run of 10 batches outlived 300 s)
DELTA_TIMEOUT_S = 900
SPARK_ARGS = ["--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2"]
REFUSED = re.compile(r"slipstream: (?:refused|failed) \[([A-Z][A-Z_]+)\]")
#: a Kafka input's batch: about one generated file (a mobile file holds 30-45 records)
KAFKA_BATCH = 40
#: every process of a run carries this variable (the run's log), so that what outlives a
#: killed run can be waited for: a SIGKILLed driver's JVM goes on for a moment (it commits the
#: batch its driver finished and may plan the next, seed 386), and a checkpoint read before it
#: is gone is read too early
RUN_TAG = "CHAOS_RUN"
#: the longest the campaign waits for a killed run's JVM to go (it goes as it sees its driver
#: gone, within a second or so)
LEFT_BEHIND_S = 60


def alive_with(tag: str) -> bool:
    """Whether a live process carries RUN_TAG=`tag` in its environment."""
    wanted = f"{RUN_TAG}={tag}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as environ:
                if wanted in environ.read().split(b"\0"):
                    return True
        except OSError:  # gone meanwhile, or not ours to read
            continue
    return False


@functools.cache
def jvm_options(python: str) -> str:
    """The JVM options of the runs on `python`'s Spark line: tests/class_archive.py's, with its
    class-data-sharing archive (made once per machine and line, here when it is missing; a
    run's JVM then starts on about three quarters of the CPU), or the plain ones when it cannot
    be made."""
    code = "from tests import class_archive as a; a.make(); print(a.jvm_options())"
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{REPO / 'src'}"}
    made = subprocess.run(
        [python, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
        check=False,
    )  # fmt: skip
    lines = made.stdout.strip().splitlines()
    return lines[-1] if made.returncode == 0 and lines else SHORT_LIVED_JVM


def sink_is_delta(scenario: Scenario) -> bool:
    return scenario.sink == "delta"


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
        self,
        scenario: Scenario,
        workdir: Path,
        sink: Sink,
        broker: Any = None,
        disk: Path | None = None,
        timeout_s: float = PROCESS_TIMEOUT_S,
    ) -> None:
        """`disk`: where the run writes (checkpoint, state dir); `workdir` unless given (the
        load harness's small or slow file systems). `timeout_s`: the bound on one run (the
        load harness's is longer: its machine is held busy)."""
        self.scenario, self.workdir, self.sink = scenario, workdir, sink
        self.timeout_s = max(timeout_s, DELTA_TIMEOUT_S) if sink_is_delta(scenario) else timeout_s
        self.workload: Workload = WORKLOADS[scenario.pipeline]
        self.input = workdir / "input"
        self.input.mkdir(parents=True, exist_ok=True)
        self.checkpoint = (disk or workdir) / "checkpoint"
        self.state = (disk or workdir) / "state"
        self.env: dict[str, str] = {}  # the environment of every run (beside cli_env's)
        self.args: list[str] = []  # flags of every run (beside the workload's and the sink's)
        self.output = self.checkpoint / "counts"  # both pipelines' output is `counts`
        staged = workdir / "generated"
        self.pending = self.workload.generate(staged, scenario.files, scenario.data_seed)
        self.landed: list[Path] = []
        #: each landed file as its batch read it: (the order Spark reads it in, its lines)
        self.read_as: dict[Path, tuple[float, list[str]]] = {}
        self.held: Path | None = None  # late-file: landed once `hold_for` more files landed
        self.hold_for = 0
        self.logs: list[Path] = []
        self.running: list[tuple[str, Any]] = []  # each run's tag and process, until it is gone
        self.stamp = 0.0
        self.broker = broker
        self.topic = ""
        if scenario.input == "kafka":
            self.topic = broker.create_topic(f"chaos-{scenario.seed}-{time.time_ns()}", 1)

    # --- input -----------------------------------------------------------------------------

    def land(self, count: int) -> None:
        """The next `count` generated files, each with a later modification time (Spark takes
        new files in that order), or their records produced to the topic; a file held back
        lands once `hold_for` files landed after it."""
        for _ in range(min(count, len(self.pending))):
            self.land_one(self.pending.pop(0))
            self.hold_for -= 1
            if self.held is not None and self.hold_for <= 0:
                self.land_one(self.held)
                self.held = None

    def land_one(self, source: Path) -> None:
        self.stamp = max(time.time(), self.stamp + 1)
        lines = source.read_text().splitlines()
        if self.topic:
            from tests.services import produce

            produce(self.broker.bootstrap, self.topic, lines)
            self.landed.append(source)
        else:
            self.landed.append(write_atomically(self.input, source.name, lines, mtime=self.stamp))
        self.read_as[self.landed[-1]] = (self.stamp, lines)

    def append_to(self, path: Path, lines: list[str]) -> None:
        """Lines appended to a landed file, its modification time moved on past every file's
        (the model keeps what its batch read: `read_as` is not touched)."""
        with open(path, "a") as out:
            out.write("".join(f"{line}\n" for line in lines))
        self.stamp += 1
        os.utime(path, (self.stamp, self.stamp))

    def land_rest(self) -> None:
        self.land(len(self.pending))
        if self.held is not None:
            self.land_one(self.held)
            self.held = None

    def batches(self) -> list[list[str]]:
        """What the model counts: every landed file's lines as its batch read them, in the
        order Spark read them (modification time; a topic's: production)."""
        return [lines for _, lines in sorted(self.read_as.values(), key=lambda e: e[0])]

    def read_again(self) -> None:
        """After `reset --outputs`, the rebuild reads every file as it is now, in the order of
        its modification time now (an appended file whole, where its append put it)."""
        if not self.topic:
            for path in self.read_as:
                self.read_as[path] = (path.stat().st_mtime, path.read_text().splitlines())

    # --- runs ------------------------------------------------------------------------------

    def command(self, verb: str = "run", extra: tuple[str, ...] = ()) -> list[str]:
        source = ["--input", str(self.input), "--max-files-per-trigger", "1"]
        if self.topic:
            url = f"kafka://{self.broker.bootstrap}/{self.topic}?startingOffsets=earliest"
            source = ["--input", f"{url}&maxOffsetsPerTrigger={KAFKA_BATCH}"]
        return [
            self.python(), "-m", "slipstream", verb, self.scenario.pipeline, *source,
            "--checkpoint", str(self.checkpoint), "--state-dir", str(self.state),
            "--trigger", "available-now", *SPARK_ARGS, *self.workload.args, *self.sink.args,
            *self.args, *extra,
        ]  # fmt: skip

    def python(self) -> str:
        """The interpreter of the runs: the Spark 4.2 line's for a Delta sink, else this one."""
        return outputs.delta_python() if sink_is_delta(self.scenario) else sys.executable

    def start(self, fault: str = "", extra: tuple[str, ...] = (), verb: str = "run") -> Any:
        # the class-data-sharing archive of the runs' Spark line, unless self.env says otherwise
        jvm = {"SPARK_SUBMIT_OPTS": jvm_options(self.python())}
        env = cli_env(**{**jvm, **self.env, **({"SLIPSTREAM_FAULT": fault} if fault else {})})
        # the Kafka connector the campaign resolved (tests.services.kafka_connector); cli_env
        # leaves out the SLIPSTREAM_ variables of this process
        if os.environ.get("SLIPSTREAM_KAFKA_CONNECTOR"):
            env["SLIPSTREAM_KAFKA_CONNECTOR"] = os.environ["SLIPSTREAM_KAFKA_CONNECTOR"]
        log = self.workdir / f"run-{len(self.logs) + 1:02d}-{verb}.log"
        self.logs.append(log)
        env[RUN_TAG] = str(log)
        with open(log, "w") as out:
            proc = subprocess.Popen(
                self.command(verb, extra), stdout=out, stderr=subprocess.STDOUT, env=env,
                stdin=subprocess.DEVNULL, cwd=self.workdir,
            )  # fmt: skip
        self.running.append((str(log), proc))
        return proc

    def settle(self) -> None:
        """Wait until nothing is left of the runs that ended (a killed driver's JVM), within
        LEFT_BEHIND_S; a run still going is not waited for."""
        for tag, proc in list(self.running):
            if proc.poll() is None:
                continue
            deadline = time.monotonic() + LEFT_BEHIND_S
            while alive_with(tag) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.running.remove((tag, proc))

    def wait(self, proc: Any) -> int | None:
        """The exit code, or None when the run hung past the bound (it is killed)."""
        try:
            return int(proc.wait(timeout=self.timeout_s))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return None

    def run(self, extra: tuple[str, ...] = (), verb: str = "run") -> int | None:
        return self.wait(self.start(extra=extra, verb=verb))

    def text(self, index: int = -1) -> str:
        return self.logs[index].read_text(errors="replace")

    def last(self, log: str) -> int:
        """The last batch id in the output's `log` (offsets, commits), once what is left of
        the runs that ended is gone."""
        self.settle()
        folder = self.output / log
        ids = [int(p.name) for p in folder.iterdir() if p.name.isdigit()] if folder.is_dir() else []
        return max(ids, default=-1)

    def until(self, proc: Any, condition: Callable[[], bool]) -> bool:
        """Bounded poll on the checkpoint while the run lives: True once `condition` holds,
        False if the run ended first."""
        deadline = time.monotonic() + self.timeout_s
        while not condition():
            if proc.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


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


def committed(runner: Runner, outcome: Outcome) -> bool:
    """A checkpoint that has committed a batch, for the faults that need one: when a kill
    before landed inside the first batch, a run to completion first."""
    if runner.last("commits") >= 0:
        return True
    return expect_clean(runner, outcome, runner.run(), "the run before the fault")
