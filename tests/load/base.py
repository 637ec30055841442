"""What every case shares: its `Result`, the `Case` it runs, and `slipstream run` in a
subprocess with the summary it prints read back."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.chaos.execute import SUMMARY
from tests.helpers import cli_env

#: a run under 8x pressure takes several times its quiet time: the bound on one run
RUN_TIMEOUT_S = 1800
#: cases run together create their PostgreSQL databases (and the app's role) one at a time
DATABASES = threading.Lock()
#: the Spark of a case's run: two cores, two shuffle partitions (the crash suite's)
SPARK_ARGS = ["--master", "local[2]", "--conf", "spark.sql.shuffle.partitions=2"]


@dataclass
class Result:
    case: str
    exact: bool = True
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)
    log: str = ""

    def fail(self, text: str) -> None:
        self.exact = False
        self.notes.append(text)


class Case:
    name: str
    #: the case reads a topic: `python -m tests.load` starts a broker and passes it as `kafka`
    kafka = False

    def run(self, workdir: Path, postgres: Any, kafka: Any = None) -> Result:
        raise NotImplementedError


@dataclass
class IntoSink(Case):
    """A pipeline into one sink (sqlite, postgresql, parquet)."""

    pipeline: str
    sink: str

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.pipeline} into {self.sink}"


def run_slipstream(result: Result, args: list[str], **env: str) -> bool:
    """`slipstream run ARGS` to its end, timed and logged into `result` (with how often a query
    started again); False, and the result failed, when it did not exit 0."""
    command = [sys.executable, "-m", "slipstream", "run", *args]
    started = time.monotonic()
    try:
        done = subprocess.run(
            command, env=cli_env(**env), capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as late:  # killed: a failed case, not a failed harness
        result.seconds = time.monotonic() - started
        result.log = _text(late.stdout) + _text(late.stderr)
        result.fail(f"still running after {RUN_TIMEOUT_S} s: stopped")
        return False
    result.seconds = time.monotonic() - started
    result.log = done.stdout + done.stderr
    again = result.log.count("starting again from the checkpoint")
    if again:
        result.notes.append(f"a query started again {again} times (a slow Python worker)")
    if done.returncode != 0:
        result.fail(f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return done.returncode == 0


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def summaries(log: str) -> dict[str, dict[str, int]]:
    """Each query's summary line: records read, quarantined, late, duplicates."""
    found = {}
    for match in SUMMARY.finditer(log):
        read, _, quarantined, late, duplicates = (
            int((g or "0").replace(",", "")) for g in match.groups()[1:]
        )
        found[match.group(1)] = {"rows": read, "quarantined": quarantined, "late": late,
                                 "duplicates": duplicates}  # fmt: skip
    return found
