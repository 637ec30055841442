"""Cases of memory and disk pressure (issue 45 item 2): mobile into SQLite, the fault campaign's
workload and model (tests/chaos/), with the driver heap at Spark's floor, or its state dir
(checkpoints, SQLite file, quarantine, event log) on a tmpfs that fills during the run or on a
throttled disk. Each completes exact, or stops with a coded error and its fix, and completes
exact once the fix is taken.

- `SmallHeap`: `spark.driver.memory` under Spark's floor is refused before the JVM; 450m under
  the serial collector (which keeps a survivor space back) is refused by the JVM, said with a
  code; 450m under the JVM's own collector completes exact.
- `FullDisk`: a tmpfs smaller than the run needs: DISK_FULL (the state dir, the fix), no
  traceback and no line of Spark's log; the tmpfs grown (the space freed), the same command
  completes exact. A checkpoint the full disk damaged must be refused (CHECKPOINT_DAMAGED) and
  its way out (reset --outputs) must end exact.
- `SlowDisk`: the state dir on a loop device throttled to 1 MiB/s and 100 IO/s each way:
  exact."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.chaos import execute as chaos_execute
from tests.chaos import outputs
from tests.chaos.disk_full import grow_and_finish, quiet
from tests.chaos.execute import Outcome, Runner, Sink, compare, refused_code
from tests.chaos.scenario import Scenario
from tests.helpers import SHORT_LIVED_JVM
from tests.load import disks
from tests.load.base import RUN_TIMEOUT_S, Case, Result

#: the smallest heap Spark accepts under the JVM's default collector (settings/driver_memory.py)
SMALLEST_HEAP = "450m"


def sqlite_runner(scenario: Scenario, workdir: Path, disk: Path | None = None) -> Runner:
    """mobile into SQLite, the SQLite file beside the checkpoint (on `disk` when given)."""
    db = (disk or workdir) / "results.db"
    args = ["--sink", f"sqlite:{db}", "--table", scenario.pipeline, "--mode", "update"]
    sink = Sink(args, lambda: outputs.read_sqlite(db, scenario.pipeline), final_only=False)
    # the campaign's bound on a run is for a machine that is not held busy
    return Runner(scenario, workdir, sink, disk=disk, timeout_s=RUN_TIMEOUT_S)


def refused_disk(name: str, exc: disks.DiskRefused, started: float) -> Result:
    """A case whose file system the system refused: failed, saying what refused (mounting
    needs root, as CI runs)."""
    result = Result(name, seconds=time.monotonic() - started)
    result.fail(f"its file system could not be made (this case needs root): {exc}")
    return result


def verdict(name: str, outcome: Outcome, notes: list[str], started: float) -> Result:
    result = Result(name, outcome.verdict != "defect", time.monotonic() - started)
    result.notes += outcome.defects
    result.notes += notes + outcome.notes
    return result


def expect_refusal(runner: Runner, outcome: Outcome, code: int | None, what: str) -> None:
    """The last run refused before anything ran: exit 2, CONFIG_BAD_VALUE naming the heap."""
    text = runner.text()
    if code != 2 or refused_code(text) != "CONFIG_BAD_VALUE" or "spark.driver.memory" not in text:
        outcome.defect(f"{what}: exit {code} ({refused_code(text)}); see {runner.logs[-1]}")
    quiet(runner, outcome, what)


@dataclass
class SmallHeap(Case):
    seed: int = 45
    files: int = 8

    @property
    def name(self) -> str:  # type: ignore[override]
        return "mobile into sqlite, the smallest heap"

    def run(self, workdir: Path, postgres: Any, kafka: Any = None) -> Result:
        started = time.monotonic()
        scenario = Scenario(self.seed, "mobile", "sqlite", self.files, data_seed=self.seed)
        runner = sqlite_runner(scenario, workdir)
        outcome = Outcome(scenario)
        runner.land_rest()
        code = runner.run(("--conf", "spark.driver.memory=400m"))
        expect_refusal(runner, outcome, code, "400m")
        runner.env = {"SPARK_SUBMIT_OPTS": SHORT_LIVED_JVM}  # the serial collector
        code = runner.run(("--conf", f"spark.driver.memory={SMALLEST_HEAP}"))
        expect_refusal(runner, outcome, code, f"{SMALLEST_HEAP} under the serial collector")
        runner.env = {"SPARK_SUBMIT_OPTS": ""}  # the JVM's own collector (G1 here)
        runner.args = ["--conf", f"spark.driver.memory={SMALLEST_HEAP}"]
        code = runner.run()
        if chaos_execute.expect_clean(runner, outcome, code, f"{SMALLEST_HEAP}, G1"):
            compare(runner, outcome)
        return verdict(self.name, outcome, [f"{len(runner.logs)} runs"], started)


@dataclass
class FullDisk(Case):
    """`kib`: the tmpfs's size, less than the run needs (mobile's 8 files: more than 600 KiB,
    full after 6 of its batches on 400)."""

    seed: int = 45
    files: int = 8
    kib: int = 400

    @property
    def name(self) -> str:  # type: ignore[override]
        return "mobile into sqlite, a full disk"

    def run(self, workdir: Path, postgres: Any, kafka: Any = None) -> Result:
        started = time.monotonic()
        scenario = Scenario(self.seed, "mobile", "sqlite", self.files, data_seed=self.seed)
        try:
            return self.fill_then_grow(scenario, workdir, started)
        except disks.DiskRefused as exc:
            return refused_disk(self.name, exc, started)

    def fill_then_grow(self, scenario: Scenario, workdir: Path, started: float) -> Result:
        notes: list[str] = []
        with disks.SmallDisk(workdir / "disk", self.kib) as disk:
            runner = sqlite_runner(scenario, workdir, disk.path)
            outcome = Outcome(scenario)
            runner.land_rest()
            if grow_and_finish(runner, outcome, disk, runner.run(), notes):
                compare(runner, outcome)
        return verdict(self.name, outcome, notes, started)


@dataclass
class SlowDisk(Case):
    seed: int = 45
    files: int = 8

    @property
    def name(self) -> str:  # type: ignore[override]
        return "mobile into sqlite, a slow disk"

    def run(self, workdir: Path, postgres: Any, kafka: Any = None) -> Result:
        started = time.monotonic()
        scenario = Scenario(self.seed, "mobile", "sqlite", self.files, data_seed=self.seed)
        try:
            with disks.SlowDisk(workdir / "disk", workdir / "disk.img") as disk:
                runner = sqlite_runner(scenario, workdir, disk.path)
                outcome = Outcome(scenario)
                chaos_execute.judge(runner, outcome)  # a line of Spark's log: a note
        except disks.DiskRefused as exc:
            return refused_disk(self.name, exc, started)
        return verdict(self.name, outcome, [disk.how, disk.served], started)


#: the cases of memory and disk pressure, beside cases.py's (`make stress` runs them all)
RESOURCE_CASES: dict[str, Case] = {c.name: c for c in (SmallHeap(), FullDisk(), SlowDisk())}
