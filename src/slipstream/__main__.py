"""`python -m slipstream`: the `slipstream` command (app/cli.py). A Ctrl-C before `entry` runs
is held until it does (SIGINT blocked, then unblocked inside it): one line and exit 130, never
a traceback, whenever it comes."""

import signal

if hasattr(signal, "pthread_sigmask"):
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})

from slipstream.app.cli import entry  # noqa: E402 - after SIGINT is held

raise SystemExit(entry())
