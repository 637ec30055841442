"""A command run in a real pseudo-terminal, as a person at a keyboard runs it: Ctrl-C is the
byte 0x03 typed at the terminal, which the terminal's line discipline turns into SIGINT for the
foreground process group (the command, and whatever it started in that group)."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from tests.helpers import cli_env


class Terminal:
    """`python -m slipstream ARGS` in a pseudo-terminal; everything it wrote is `text`."""

    def __init__(self, *args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
        environ = env or cli_env()
        environ["COLUMNS"], environ["LINES"] = "200", "50"
        argv = [sys.executable, "-m", "slipstream", *args]
        pid, fd = pty.fork()
        if pid == 0:  # pragma: no cover - the child
            os.chdir(cwd)
            os.execve(argv[0], argv, environ)
        self.pid, self.fd = pid, fd
        self.text = ""
        self.status: int | None = None

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # the child closed the terminal
            return False
        if not data:
            return False
        self.text += data.decode(errors="replace").replace("\r\n", "\n")
        return True

    def read_until(self, marker: str, timeout: float = 240) -> str:
        """Read until `marker` appears (fails after `timeout` s, showing what came)."""
        deadline = time.monotonic() + timeout
        while marker not in self.text:
            left = deadline - time.monotonic()
            if left <= 0 or not self._read(min(left, 1.0)):
                break
        assert marker in self.text, f"{marker!r} not seen; the terminal showed:\n{self.text}"
        return self.text

    def read_while(self, waiting: Callable[[], bool], timeout: float = 240) -> str:
        """Read while `waiting()` holds, a condition on anything (a checkpoint's file); fails
        after `timeout` s, showing what came."""
        deadline = time.monotonic() + timeout
        while waiting() and time.monotonic() < deadline and self._read(0.01):
            pass
        assert not waiting(), f"still waiting after {timeout} s; the terminal showed:\n{self.text}"
        return self.text

    def ctrl_c(self) -> None:
        os.write(self.fd, b"\x03")

    def wait(self, timeout: float = 240) -> int:
        """The exit code (128 + N for a signal N), reading the terminal until the end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # every process on the terminal closed it: the command is exiting, so wait for it
            open_ = self._read(0.5)
            done, status = os.waitpid(self.pid, 0 if not open_ else os.WNOHANG)
            if done:
                while select.select([self.fd], [], [], 0)[0] and self._read(0):
                    pass
                code = os.waitstatus_to_exitcode(status)
                self.status = 128 - code if code < 0 else code
                return self.status
        self.kill()
        raise AssertionError(f"still running after {timeout} s; the terminal showed:\n{self.text}")

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)

    def close(self) -> None:
        if self.status is None:
            self.kill()
        os.close(self.fd)
