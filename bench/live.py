"""A live trending run: `slipstream run trending` in a subprocess, files landing at a fixed rate,
markers polled in the serving table. Shared by the sustained-rate and recovery scenarios, and
(`PeerLiveRun`: a peer program, its output file tailed) by the peers scenario's latency part.

Time line of a run (all on this process's monotonic clock):

    launch --(start-up)--> marker 0 visible --> pacing: file k lands at t0 + k s --> ...
                                              (file k's latency = first seen - landed)
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.core import median, percentile
from bench.procs import Proc, slipstream_command
from bench.workloads import (
    MarkerFilePoller,
    MarkerPoller,
    Pacer,
    TrendingInput,
    generate_trending,
)


@dataclass(frozen=True)
class Measured:
    """A live run's time line (monotonic seconds) and what it used."""

    startup: float  # launch -> file 0's marker visible
    began: float  # pacing began
    ended: float  # the last file landed
    drained_at: float
    cpu_cores: float  # the run's processes' CPU time / wall time while pacing
    backlog: int  # files landed and not yet visible when the last one landed
    drained: bool  # every file visible before the drain deadline


@dataclass
class LiveRun:
    work: Path
    data: TrendingInput
    interval: float = 1.0  # seconds between files (each file holds `rate` events)
    extra_args: tuple[str, ...] = ()  # e.g. ("--trigger", "1s")

    def __post_init__(self) -> None:
        self.landing = self.work / "landing"
        self.landing.mkdir(parents=True, exist_ok=True)
        self.state = self.work / "state"
        self.db = self.state / "trending.db"
        self.pacer = Pacer(self.data.files, self.landing, self.interval)
        self.poller: Any = self.make_poller()
        self.proc: Proc | None = None
        self.launches: list[float] = []

    @classmethod
    def prepare(
        cls, work: Path, rate: int, seconds: int, extra_args: tuple[str, ...] = (), **fields: Any
    ) -> LiveRun:
        """Generate `seconds` + 1 files of `rate` events each (file 0 is the warm-up file)."""
        data = generate_trending(work / "input", rate * (seconds + 1), float(rate), markers=True)
        return cls(work, data, extra_args=extra_args, **fields)

    def make_poller(self) -> Any:
        return MarkerPoller(self.db)

    def command(self) -> list[str]:
        return slipstream_command(
            "run",
            "trending",
            "--input",
            self.landing,
            "--input",
            f"catalog={self.data.catalog}",
            "--state-dir",
            self.state,
            "--sink",
            f"sqlite:{self.db}",
            *self.extra_args,
        )

    def launch(self) -> float:
        self.proc = Proc(self.command(), self.work / "run.log")
        self.launches.append(self.proc.launched)
        return self.proc.launched

    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def start(self, timeout: float = 300) -> float:
        """Land file 0, launch, wait until its marker is visible: returns the start-up time."""
        self.pacer.land(0)
        launched = self.launch()
        self.poller.start()
        if not self.poller.wait_for([0], timeout, self.alive):
            raise RuntimeError(self.failure("the first file's counts never became visible"))
        return self.poller.snapshot()[0] - launched

    def pace(self) -> float:
        """Start landing files 1, 2, ... one per interval; returns the time pacing began."""
        self.pacer.start(first=1)
        return self.pacer.started_at

    def wait_paced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not self.pacer.done and time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(self.failure("the run died while files were landing"))
            time.sleep(0.2)
        return self.pacer.done

    def drain(self, timeout: float) -> bool:
        """Until every landed file's marker is visible (bounded)."""
        return self.poller.wait_for(sorted(self.pacer.landed), timeout, self.alive)

    def stop(self) -> None:
        self.pacer.stop()
        if self.proc is not None:
            self.proc.stop()
        self.poller.stop()

    def failure(self, what: str) -> str:
        tail = self.proc.tail() if self.proc else ""
        return f"{what}; log {self.work / 'run.log'}:\n{tail}"

    # ------------------------------------------------------------ figures

    def latencies(self, first: int, last: int | None = None) -> dict[int, float]:
        seen = self.poller.snapshot()
        landed = dict(self.pacer.landed)
        end = max(landed) if last is None else last
        return {k: seen[k] - landed[k] for k in range(first, end + 1) if k in seen and k in landed}

    def backlog(self, at: float) -> int:
        """Files landed by `at` whose counts were not visible yet at `at`."""
        seen = self.poller.snapshot()
        return sum(1 for k, t in self.pacer.landed.items() if t <= at and seen.get(k, 1e18) > at)

    def events_landed(self, since: float, until: float) -> int:
        return sum(
            self.data.lines_per_file[k] for k, t in self.pacer.landed.items() if since <= t <= until
        )

    def measure(
        self, seconds: int, drain: float, log: Any, label: str, startup_timeout: float = 300
    ) -> Measured:
        """The whole live run: start, pace `seconds` files, drain, stop; its time line."""
        try:
            startup = self.start(timeout=startup_timeout)
            log(f"  {label}: first file visible after {startup:.1f} s; pacing {seconds} s")
            assert self.proc is not None
            began = self.pace()
            cpu_began = self.proc.cpu_seconds()
            self.wait_paced(seconds + 60)
            ended = time.monotonic()
            cpu = (self.proc.cpu_seconds() - cpu_began) / (ended - began)
            backlog = self.backlog(ended)
            drained = self.drain(drain)
            drained_at = time.monotonic()
        finally:
            self.stop()
        return Measured(startup, began, ended, drained_at, cpu, backlog, drained)

    def spark_rates(self, since: float, until: float) -> dict[str, Any]:
        """Spark's own figures for the results query's batches that ended in [since, until]."""
        assert self.proc is not None
        lines = [
            b
            for b in self.proc.batch_lines("trending.views")
            if since <= b.at - b.seconds and b.at <= until and b.rows
        ]
        rows = sum(b.rows for b in lines)
        busy = sum(b.seconds for b in lines)
        return {
            "batches": len(lines),
            "rows_per_batch": rows / len(lines) if lines else float("nan"),
            "batch_s_p50": median([b.seconds for b in lines]),
            "processing_rows_per_s": rows / busy if busy else float("nan"),
            "busy_share": busy / (until - since) if until > since else float("nan"),
        }


@dataclass
class BareLiveRun(LiveRun):
    """The same live run for the bare PySpark query of trending's shape (bench/bare_trending.py,
    the engine's own cost): the same files, the same table and poller."""

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "bench.bare_trending", str(self.landing),
            str(self.data.catalog), str(self.db),
        ]  # fmt: skip

    def spark_rates(self, since: float, until: float) -> dict[str, Any]:
        nan = float("nan")  # no batch lines on its terminal
        keys = ("batches", "rows_per_batch", "batch_s_p50", "processing_rows_per_s", "busy_share")
        return dict.fromkeys(keys, nan)


@dataclass
class PeerLiveRun(LiveRun):
    """The same live run for a peer program (scenario peers): `python SCRIPT LANDING CATALOG
    OUT --live` in the peer's own environment, reading the growing landing folder and appending
    every row it emits to OUT (one line a row, flushed per update); the poller tails OUT."""

    python: Path = Path()
    script: Path = Path()

    def make_poller(self) -> Any:
        self.out = self.work / "live-rows.csv"
        return MarkerFilePoller(self.out)

    def command(self) -> list[str]:
        return [
            str(self.python),
            str(self.script),
            str(self.landing),
            str(self.data.catalog),
            str(self.out),
            "--live",
            *self.extra_args,
        ]

    def spark_rates(self, since: float, until: float) -> dict[str, Any]:
        return {}


def latency_summary(latencies: dict[int, float]) -> dict[str, float]:
    values = [latencies[k] for k in sorted(latencies)]
    third = max(1, len(values) // 3)
    return {
        "files": len(values),
        "p50_s": percentile(values, 50),
        "p95_s": percentile(values, 95),
        "p99_s": percentile(values, 99),
        "max_s": max(values) if values else float("nan"),
        "first_third_p50_s": median(values[:third]),
        "last_third_p50_s": median(values[-third:]),
    }


def keeps_up(summary: dict[str, float], drained: bool) -> bool:
    """Every landed file's counts became visible, and the last third's latency p50 is at most
    1 s (or 10%) above the first third's: latency steady, not growing with the input."""
    first, last = summary["first_third_p50_s"], summary["last_third_p50_s"]
    return drained and last <= max(first + 1.0, 1.1 * first)


def latency_row(live: LiveRun, run: Measured, settle: int, log: Any, label: str) -> dict[str, Any]:
    """A live run's latency columns (the first `settle` files after file 0 left out), its
    start-up, backlog and whether it kept up: the part of a row every live table shares."""
    lat = latency_summary(live.latencies(first=1 + settle))
    steady = keeps_up(lat, run.drained)
    log(
        f"  {label}: p50 {lat['p50_s']:.2f} s, p99 {lat['p99_s']:.2f} s, "
        f"backlog {run.backlog} files, keeps up: {steady}"
    )
    return {
        "latency_p50_s": lat["p50_s"],
        "latency_p95_s": lat["p95_s"],
        "latency_p99_s": lat["p99_s"],
        "latency_max_s": lat["max_s"],
        "drift": f"{lat['first_third_p50_s']:.2f} -> {lat['last_third_p50_s']:.2f}",
        "backlog_files_at_end": run.backlog,
        "drained": run.drained,
        "keeps_up": steady,
        "startup_s": run.startup,
        "files_measured": lat["files"],
    }
