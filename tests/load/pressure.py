"""`CpuPressure(factor)`: `factor` x the cores busy-looping processes for as long as the `with`
block lasts, each also bounded by `limit_s` on its own (a harness that dies leaves nothing
spinning for long). The 1-minute load average is sampled while they run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from slipstream.core.closing import StartStop

#: a hog: spin until its deadline (it never sleeps: that is the point)
HOG = "import time\nend = time.monotonic() + {limit}\nwhile time.monotonic() < end:\n    pass\n"


class CpuPressure(StartStop):
    def __init__(self, factor: int, limit_s: float = 1800.0) -> None:
        self.factor = factor
        self.hogs = factor * (os.cpu_count() or 1)
        self.limit_s = limit_s
        self._procs: list[subprocess.Popen[bytes]] = []
        self._stop = threading.Event()
        self.loads: list[float] = []  # the 1-minute load, every 5 s

    def _sample(self) -> None:
        while not self._stop.wait(5.0):
            self.loads.append(os.getloadavg()[0])

    def start(self) -> CpuPressure:
        code = HOG.format(limit=self.limit_s)
        for _ in range(self.hogs):
            self._procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", code],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        threading.Thread(target=self._sample, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for proc in self._procs:
            proc.kill()
        for proc in self._procs:
            proc.wait()

    def describe(self) -> str:
        if not self.loads:
            return f"{self.factor}x ({self.hogs} hogs)"
        return (
            f"{self.factor}x ({self.hogs} hogs; 1-min load {min(self.loads):.0f}-"
            f"{max(self.loads):.0f})"
        )
