"""What a CLI run shows on its terminal: what it will run (runtime/explain.py), then while it
runs a line per batch (monitor/listener.py), or for a finite run over one files input a
progress bar (monitor/backfill.py), and a notice until the first batch lands
(monitor/first_batch.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from slipstream.monitor.backfill import BackfillBar, pending_files, source_log
from slipstream.monitor.first_batch import FirstBatchNotice
from slipstream.monitor.listener import ConsoleReporter, Handler
from slipstream.runtime.bound import Prepared
from slipstream.runtime.explain import explain
from slipstream.runtime.writers import micro_batch_queries


@dataclass
class Reporting:
    """The handlers a run's listener calls, the bar to close at the end, and the notice to
    enter around the run (it prints on a terminal only)."""

    waiting: FirstBatchNotice
    bar: BackfillBar | None = None
    handlers: list[Handler] = field(default_factory=list)
    closed: bool = False

    def close(self) -> None:
        """The bar drawn for the last time and the notice silent (before the summary)."""
        if not self.closed:
            self.closed = True
            if self.bar is not None:
                self.bar.close()
            self.waiting.close()


def reporting(prepared: Prepared, out: TextIO) -> Reporting:
    """A run's terminal output: nothing with `--quiet`; the header printed now, then the bar
    instead of one line per batch unless `--verbose` asks for both."""
    s = prepared.settings
    queries = micro_batch_queries(prepared)
    landing = _backfill_landing(prepared)
    if not s.quiet:
        print(explain(prepared), file=out, flush=True)
        print("", file=out, flush=True)
    bar = None
    if landing is not None:
        log_dir = source_log(prepared.ctx.checkpoint)
        shown = BackfillBar(prepared.ctx.query_name, log_dir, pending_files(landing, log_dir), out)
        bar = shown if shown.enabled else None
    handlers: list[Handler] = [] if s.quiet else [ConsoleReporter(out, verbose=s.verbose)]
    if bar is not None and not s.verbose:
        handlers = [bar]
    # the bar shows its own elapsed time
    waiting = FirstBatchNotice(out, queries, enabled=False if s.quiet or bar is not None else None)
    return Reporting(waiting, bar, [waiting, *handlers])


def _backfill_landing(prepared: Prepared) -> Path | None:
    """The folder a finite run reads, when it reads one files input (the bar counts its
    files); None otherwise."""
    s = prepared.settings
    streams = [b for b in prepared.inputs.values() if b.source is not None]
    source = streams[0].source if len(streams) == 1 else None
    if not s.trigger.finite or s.quiet or source is None or not source.reads_files:
        return None
    landing = streams[0].binding.path
    assert landing is not None
    return landing
