"""A run's whole lifecycle, the one every entry point uses: `slipstream run`, the demos and
the test harness (slipstream.testing).

    bind       runtime/bind.py       settings + pipeline -> Prepared, no Spark (the caller)
    refuse     runtime/refuse.py     what refuses a start, before Spark and again under the lock
    monitor    monitor/serve.py      the metrics and dashboard servers, before Spark
    session    settings/session.py   the one SparkSession (or the caller's)
    start      runtime/start.py      lock, build, check, verdicts, guards, the queries started
    supervise  runtime/run.py        the caller waits or drives batches; Ctrl-C and SIGTERM stop
                                     it at a batch boundary (runtime/interrupt.py)
    summarise  runtime/summary.py    a line per query, then everything stopped

`launch` is a context manager: the caller binds, then drives the started `Run` inside the
block; leaving it stops the run, the servers and a session it started."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TextIO

from pyspark.sql import SparkSession

from slipstream.errors import query_failure
from slipstream.monitor.listener import Handler
from slipstream.monitor.serve import MonitorHandles, ResultsProvider, start_monitoring
from slipstream.runtime import partitions
from slipstream.runtime.bound import Prepared, jdbc_drivers, uses_delta, uses_kafka
from slipstream.runtime.interrupt import CtrlC
from slipstream.runtime.refuse import refuse_before_start
from slipstream.runtime.reporting import reporting
from slipstream.runtime.run import Run
from slipstream.runtime.start import start
from slipstream.runtime.summary import summary
from slipstream.settings.session import SessionOptions, session_for


@dataclass
class Launched:
    """A started run and what came up with it."""

    run: Run
    spark: SparkSession
    monitoring: MonitorHandles


@contextlib.contextmanager
def launch(
    prepared: Prepared,
    out: TextIO,
    *,
    origin: str,
    interrupt: CtrlC | None = None,
    handlers: Sequence[Handler] = (),
    results: ResultsProvider | None = None,
    ready: Callable[[MonitorHandles], None] | None = None,
    spark: SparkSession | None = None,
    app_name: str | None = None,
    starting: str | None = "starting Spark (Ctrl-C stops)...",
    summarise: bool = False,
    console: bool = False,
) -> Iterator[Launched]:
    """Refuse, monitor, start a session and the run; yield it; then summarise and stop.

    `interrupt`: the command's signal handler (`runtime.interrupt.ctrl_c`), installed again
    once PySpark has set its own, and attached to the run. `results`: the dashboard's results
    view; given, the servers the settings ask for start before Spark (a taken port fails
    fast) and `ready` is called with them. `spark`: the caller's session (a test's), kept;
    otherwise one is built here and stopped at the end. `starting`: the line printed before
    Spark starts (None: quiet). `summarise`: print the run's summary before stopping.
    `console`: the terminal's reporting (runtime/reporting.py): the header once nothing
    refused, then a line per batch or a bar, and a notice until the first batch."""
    s = prepared.settings
    refuse_before_start(prepared)  # not after ~10 s of Spark start-up; again under the lock
    wanted = session_options(prepared, app_name)
    shown = reporting(prepared, out) if console else None
    handlers = [*(shown.handlers if shown is not None else ()), *handlers]
    monitoring = start_monitoring(s, results) if results is not None else MonitorHandles()
    try:
        monitoring.announce(out)
        if ready is not None:
            ready(monitoring)
        if starting is not None:
            print(starting, file=out, flush=True)
        session, ours = session_for(spark, wanted)
        try:
            if interrupt is not None:
                interrupt.install()  # PySpark's SparkContext installed its own SIGINT handler
            # metrics first: once a batch line is printed, /metrics shows that batch
            run = start(session, prepared, [*monitoring.handlers, *handlers], origin=origin)
            run.quiet_stop = ours and not s.verbose
            if shown is not None:
                shown.waiting.follow(run.batch_status)
            try:
                if interrupt is not None:
                    interrupt.attach(run.request_stop)
                yield Launched(run, session, monitoring)
            finally:
                if shown is not None:
                    shown.close()
                with contextlib.suppress(Exception):
                    run.stop()
                monitoring.close()
                if summarise:
                    summary(run, out)
        finally:
            # Stop Spark before the interpreter exits: its listener bus may still be delivering
            # a progress event to the Python listener, which fails with a Py4J stack trace once
            # the callback server is gone. Only a session started here: a caller's stays.
            if ours:
                session.stop()
    finally:
        monitoring.close()
        if shown is not None:
            shown.close()


def session_options(prepared: Prepared, app_name: str | None = None) -> SessionOptions:
    """What the run's SparkSession is built with (settings/session.py's `build_session`):
    the master, the conf with the shuffle partitions chosen for the run, and the packages its
    inputs and outputs need."""
    s = prepared.settings
    return SessionOptions(
        master=s.master,
        conf={**s.conf, **partitions.choose(prepared).conf()},
        app_name=app_name or f"slipstream-{s.pipeline}",
        log_level="WARN" if s.verbose else "ERROR",
        remote=s.remote,
        connect_wait=s.connect_wait.total_seconds(),
        kafka=uses_kafka(prepared),
        delta=uses_delta(prepared),
        jdbc=jdbc_drivers(prepared),
    )


def failure_line(failure: BaseException, launched: Launched) -> str:
    """A failed query in one line: a full disk, a sink's own error wrapped by Spark's
    foreachBatch, or memory that ran out, by its code; otherwise the first line Spark gave."""
    s = launched.run.prepared.settings
    text = str(failure)
    where = s.remote or str(launched.spark.sparkContext.master)
    ours = query_failure(text, where, s.state_dir)
    return ours.render() if ours else (text.splitlines() or [type(failure).__name__])[0]
