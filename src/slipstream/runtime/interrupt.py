"""Ctrl-C and SIGTERM for a run (`run`, the demos): the first stops like `slipstream stop`, a
second at once. The one signal handler of a run (runtime/launch.py attaches it).

PySpark's SparkContext installs its own SIGINT handler, which calls `cancelAllJobs()` through
the Py4J gateway from inside the handler. The main thread is nearly always inside a Py4J call
itself (`awaitTermination`), so that second call fails (`RuntimeError: reentrant call`), the
KeyboardInterrupt it raises breaks the first call's socket read (`Py4JNetworkError`), and each
ends as a traceback before the summary. `CtrlC` replaces that handler and never calls into
Spark from inside it:

- during start-up (before the run is attached): one line, and the process ends at once
  (exit 130). The JVM ends with us (PySpark's gateway exits when its standard input closes),
  the checkpoint lock is the process's own and goes with it, and a query that had started is
  where a SIGKILL would have left it: its batch is replayed at the next start;
- the first Ctrl-C of a running run asks it to stop at the next batch boundary, exactly as
  `slipstream stop` does (the summary follows, the command exits 130);
- a second Ctrl-C ends the process at once, with one line saying what that means.

SIGTERM (`kill PID`) takes the same path: during start-up it ends the process (exit 143, as
without a handler); once the run is attached it stops it at the next batch boundary, with the
reason "SIGTERM received". Only a Ctrl-C makes a run `interrupted` (its command exits 130).

Install it before Spark starts and again after the session is built (`install()`): PySpark
replaces it while it builds the context."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TextIO

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended
REASON = "interrupted (Ctrl-C)"


class CtrlC:
    """The SIGINT and SIGTERM handler of one command; `count` signals seen so far."""

    def __init__(self, err: TextIO | None = None, exit_: Callable[[int], object] = os._exit):
        self.err = err if err is not None else sys.stderr
        self.count = 0
        self.ctrl_c = 0  # of which Ctrl-Cs
        self._request: Callable[[str], None] | None = None
        self._exit = exit_

    @property
    def interrupted(self) -> bool:
        """A Ctrl-C was pressed (SIGTERM stops a run without making it interrupted)."""
        return self.ctrl_c > 0

    def attach(self, request_stop: Callable[[str], None]) -> None:
        """From now on the first Ctrl-C calls `request_stop(reason)` (a started run's)."""
        self._request = request_stop
        if self.count:  # pressed while the run was being attached: stop it now
            request_stop(REASON if self.ctrl_c else "SIGTERM received")

    def install(self) -> None:
        """Make this the SIGINT and SIGTERM handler (again: PySpark installs its own SIGINT
        handler in SparkContext)."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self)
            signal.signal(signal.SIGTERM, self)

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        self.ctrl_c += signum == signal.SIGINT
        what = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
        if self._request is None:
            self._end(
                f"interrupted during start-up ({what}): stopped before the run began",
                128 + signum,
            )
        elif self.count == 1:
            self._say(
                f"{what}: stopping at the next batch boundary, as `slipstream stop` does "
                "(Ctrl-C again to stop at once)"
            )
            self._request(REASON if what == "Ctrl-C" else f"{what} received")
        else:
            self._end(
                f"second {what}: stopped at once; a batch in progress was not committed and "
                "is replayed at the next start"
            )

    def _say(self, line: str) -> None:
        # os.write, not print: the main thread may be inside a write to the same stream, and
        # a buffered stream refuses a reentrant call
        data = f"\nslipstream: {line}\n".encode()
        try:
            os.write(self.err.fileno(), data)
        except (OSError, ValueError, AttributeError):
            with contextlib.suppress(Exception):
                self.err.write(data.decode())

    def _end(self, line: str, code: int = EXIT_INTERRUPTED) -> None:
        self._say(line)
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        self._exit(code)


@contextlib.contextmanager
def ctrl_c(err: TextIO | None = None) -> Iterator[CtrlC]:
    """`CtrlC` as the SIGINT and SIGTERM handler for the block (main thread only; elsewhere it
    is inert, as a signal handler can only be set from the main thread)."""
    handler = CtrlC(err)
    if threading.current_thread() is not threading.main_thread():
        yield handler
        return
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    handler.install()
    try:
        yield handler
    finally:
        for sig, was in previous.items():
            signal.signal(sig, was)
