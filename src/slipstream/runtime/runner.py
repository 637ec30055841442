"""A run, step by step: the names `slipstream run`, `check`, the demos and the harness use.

prepare   runtime/bind.py     no Spark: inputs, parameters and outputs bound; the checks that
                              need no plan
refuse    runtime/refuse.py   what refuses a start: before Spark, and again under the lock
build     runtime/build.py    Spark, nothing started: each query's frame and analyzed plan
check     runtime/checks.py   every rule on every plan; the restart verdicts
start     runtime/start.py    lock, refuse, build, check, record, guard, start the queries
Run       runtime/run.py      wait until the queries finish, --duration, --stop-when-idle
                              (runtime/idle.py), Ctrl-C or a stop
launch    runtime/launch.py   the whole lifecycle for a command, a demo or the harness"""

from __future__ import annotations

from slipstream.runtime.bind import prepare
from slipstream.runtime.bound import Prepared
from slipstream.runtime.build import Query, build
from slipstream.runtime.checks import check, restart_verdicts
from slipstream.runtime.launch import Launched, launch
from slipstream.runtime.refuse import checkpoints_of, refuse_before_start
from slipstream.runtime.run import Run, batch_boundaries
from slipstream.runtime.start import start

__all__ = [
    "Launched",
    "Prepared",
    "Query",
    "Run",
    "batch_boundaries",
    "build",
    "check",
    "checkpoints_of",
    "launch",
    "prepare",
    "refuse_before_start",
    "restart_verdicts",
    "start",
]
