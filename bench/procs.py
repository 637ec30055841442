"""Pipelines run as the user runs them: `slipstream run ...` in a subprocess of its own.

Each subprocess gets its own process group, so the recovery scenario can SIGKILL the Python
driver and its JVM together (as a crash of the machine or container would), and the benchmark
never signals anything it did not start. Standard output is read by a thread that keeps a log
and parses slipstream's one line per micro-batch:

    trending.views         batch   12 |    2,001 rows |      2,950 rows/s |   0.68 s | ...
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.stage import require_flag

BATCH_LINE = re.compile(
    r"^(?P<query>\S+)\s+batch\s+(?P<batch>\d+)\s+\|\s+(?P<rows>[\d,]+) rows\s+\|\s+"
    r"(?P<rps>[\d,]+) rows/s\s+\|\s+(?P<seconds>[\d.]+) s"
)


@dataclass(frozen=True)
class BatchLine:
    at: float  # monotonic time the line was read
    query: str
    batch: int
    rows: int
    rows_per_s: float
    seconds: float


def _pinned(cores: set[int] | None) -> Callable[[], None] | None:
    """What the child runs before its program: keep to `cores` (see split_cores)."""
    if cores is None:
        return None
    chosen = set(cores)
    return lambda: os.sched_setaffinity(0, chosen)


def slipstream_command(*args: str | Path) -> list[str]:
    """`python -m slipstream ARGS`; a `run` must name the ingest stage (bench/stage.py)."""
    if args and str(args[0]) == "run":
        require_flag(args, f"slipstream run {args[1] if len(args) > 1 else ''}".strip())
    return [sys.executable, "-m", "slipstream", *map(str, args)]


#: the cores the processes a Proc starts may run on (None: any); `split_cores` sets it
ENGINE_CORES: set[int] | None = None


@contextlib.contextmanager
def split_cores(engine: set[int]) -> Iterator[set[int]]:
    """The engine under test on `engine` (every Proc started inside), this process on the other
    cores, with what it starts itself (a broker, a database server) and the threads it makes
    (a load generator, a poller): the engine's CPU is then its own. Yields the other cores."""
    global ENGINE_CORES
    mine = os.sched_getaffinity(0)
    others = mine - engine
    if not engine <= mine or not others:
        raise ValueError(f"cannot split cores {sorted(mine)} into {sorted(engine)} and the rest")
    os.sched_setaffinity(0, others)
    ENGINE_CORES = set(engine)
    try:
        yield others
    finally:
        ENGINE_CORES = None
        os.sched_setaffinity(0, mine)


class Proc:
    """A subprocess in its own process group, its output logged and batch lines parsed."""

    def __init__(self, argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.log_path = log
        self.batches: list[BatchLine] = []
        self.launched = time.monotonic()
        self._lock = threading.Lock()
        log.parent.mkdir(parents=True, exist_ok=True)
        self._log = log.open("a", encoding="utf-8")
        self._log.write(f"$ {' '.join(argv)}\n")
        self._log.flush()
        self.popen = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            preexec_fn=_pinned(ENGINE_CORES),
        )
        self._reader = threading.Thread(target=self._read, name="bench-proc-out", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            self._log.write(line)
            self._log.flush()
            match = BATCH_LINE.match(line.strip())
            if match:
                parsed = BatchLine(
                    at=time.monotonic(),
                    query=match["query"],
                    batch=int(match["batch"]),
                    rows=int(match["rows"].replace(",", "")),
                    rows_per_s=float(match["rps"].replace(",", "")),
                    seconds=float(match["seconds"]),
                )
                with self._lock:
                    self.batches.append(parsed)

    def batch_lines(self, query: str | None = None) -> list[BatchLine]:
        with self._lock:
            return [b for b in self.batches if query is None or b.query == query]

    def alive(self) -> bool:
        return self.popen.poll() is None

    def kill(self) -> float:
        """SIGKILL the whole process group (driver and JVM at once); returns when it was sent."""
        at = time.monotonic()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()
        self._finish()
        return at

    def stop(self, timeout: float = 90) -> int:
        """Ask the driver to stop (SIGTERM to the Python process only); SIGKILL the group if it
        has not ended after `timeout` seconds, and reap whatever of the group is left (the JVM
        exits on its own once the driver is gone, this only makes sure of it)."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait()
        self._finish()
        return self.popen.returncode

    def wait(self, timeout: float | None = None) -> int:
        try:
            code = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._finish()
        return code

    def _finish(self) -> None:
        self._reader.join(timeout=10)
        if not self._log.closed:
            self._log.close()

    def cpu_seconds(self) -> float:
        """CPU time (user + system) used so far by the live processes of the group."""
        return group_cpu_seconds(self.popen.pid)

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def group_stat_fields(pgid: int) -> Iterator[list[str]]:
    """The /proc/PID/stat fields (from field 3, state, on) of each live process of group
    `pgid`: fields[2] is the group, [11] and [12] utime and stime, [21] the RSS in pages."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat_fields(text)
        if int(fields[2]) == pgid:  # field 5 of stat: the process group
            yield fields


def stat_fields(text: str) -> list[str]:
    """A /proc stat line's fields from field 3 (state) on: after "pid (comm) "."""
    return text[text.rindex(")") + 2 :].split()


def cpu_seconds_of(fields: list[str]) -> float:
    """utime + stime of a process's or thread's `stat_fields`, in seconds."""
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def group_cpu_seconds(pgid: int) -> float:
    """Sum of utime + stime over the processes of process group `pgid`, from /proc."""
    return sum(cpu_seconds_of(f) for f in group_stat_fields(pgid))
