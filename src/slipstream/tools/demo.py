"""The mobile demo: seed 003's files land one by one and the counts update after each batch.

Runs the real pipeline (files source, event-time windows, watermark, SQLite sink with its
ledger) on the bundled sample files, in a fresh state directory."""

from __future__ import annotations

import shutil
import sys
import time
from functools import partial
from pathlib import Path
from typing import TextIO

from slipstream.checkpoint.lifecycle import clearing
from slipstream.core.files import write_atomically
from slipstream.core.words import count
from slipstream.errors import ConfigError
from slipstream.monitor.console import render, table
from slipstream.monitor.eventlog import log_files
from slipstream.pipelines import get_pipeline, pipelines
from slipstream.runtime.bind import prepare
from slipstream.runtime.bound import Prepared
from slipstream.runtime.interrupt import EXIT_INTERRUPTED, CtrlC, ctrl_c
from slipstream.runtime.late_folder import reset_late
from slipstream.runtime.launch import launch
from slipstream.settings.config import DEFAULT_DASHBOARD_PORT, load_settings
from slipstream.sinks.sqlite import read_table
from slipstream.tools.views import results_view


def copy_samples(out: Path, pipeline: str = "mobile") -> list[Path]:
    """Land a pipeline's bundled sample files in `out`, atomically and with increasing
    modification times (the file source takes new files in modification-time order)."""
    files = get_pipeline(pipeline).sample_files()
    if not files:
        with_samples = sorted(n for n, p in pipelines().items() if p.sample_files())
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"pipeline {pipeline} bundles no sample files",
            f"pipelines with samples: {', '.join(with_samples)}",
        )
    copied = []
    Path(out).mkdir(parents=True, exist_ok=True)
    now = time.time()
    for i, source in enumerate(files):
        lines = source.read_text().splitlines()
        stamp = now - len(files) + i  # set before the file appears, for a query already running
        copied.append(write_atomically(Path(out), source.name, lines, mtime=stamp))
    return copied


def format_table(rows: list[dict[str, object]], columns: list[str]) -> str:
    """Rows as a framed plain-text table (rich)."""
    return render(table(columns, [[r[c] for c in columns] for r in rows], framed=True))


def fresh_start(prepared: Prepared, landing: Path) -> None:
    """A fresh start for this pipeline only (other demos share the state dir and database):
    its landing folder, quarantine, late rows, outputs, event log and checkpoint go, all under the
    checkpoint's lock (CHECKPOINT_IN_USE while a run holds it, and nothing is deleted)."""
    with clearing(prepared.settings.checkpoint_root):
        shutil.rmtree(landing, ignore_errors=True)
        shutil.rmtree(prepared.settings.quarantine_root, ignore_errors=True)
        reset_late(prepared.settings.late_root)
        for out in prepared.outputs.values():
            if out.is_output:
                out.sink.reset(out.ctx)
        for log in log_files(prepared.settings.event_log):  # a fresh run: fresh charts
            log.unlink()


def demo(
    state_dir: Path,
    out: TextIO,
    dashboard: int | None = DEFAULT_DASHBOARD_PORT,
    linger: bool | None = None,
) -> int:
    """Land the sample files one by one and show the table after each batch. `dashboard` is
    its port (0: any free port, None: no dashboard). With `linger` (default: when standard input
    is a terminal) the run and its dashboard stay up until Ctrl-C or `slipstream stop mobile`,
    so more files dropped into the landing folder show up live. Ctrl-C stops it at a batch
    boundary (exit 130), a second one at once (runtime.interrupt)."""
    with ctrl_c() as interrupt:
        return _demo(state_dir, out, dashboard, linger, interrupt)


def _demo(
    state_dir: Path, out: TextIO, dashboard: int | None, linger: bool | None, interrupt: CtrlC
) -> int:

    state_dir = Path(state_dir).resolve()
    landing = state_dir / "landing" / "mobile"
    settings = load_settings(
        "mobile", {"input": str(landing), "state_dir": state_dir, "dashboard": dashboard}
    )
    prepared = prepare(settings, check_source=False)
    fresh_start(prepared, landing)
    landing.mkdir(parents=True)
    prepared = prepare(settings)
    db = prepared.sink.path  # type: ignore[attr-defined]
    columns = ["window_start", "window_end", "action", "count"]
    with launch(
        prepared,
        out,
        origin="demo",
        interrupt=interrupt,
        results=partial(results_view, prepared),
        app_name="slipstream-demo",
        starting="\nstarting Spark (Ctrl-C stops)...",
        console=True,
    ) as launched:
        run, monitoring = launched.run, launched.monitoring
        for source in get_pipeline("mobile").sample_files():
            if interrupt.interrupted:
                break
            name, lines = source.name, source.read_text().splitlines()
            write_atomically(landing, name, lines)
            print(f"\n>>> {name} landed ({count(len(lines), 'event')})", file=out, flush=True)
            run.process_all_available()
            rows = read_table(db, prepared.ctx.table, order_by="window_start, action")
            print(format_table(rows, columns), file=out, flush=True)
        lingers = sys.stdin.isatty() if linger is None else linger
        if monitoring.dashboard is not None and lingers and not interrupt.interrupted:
            print(
                f"\nthe run and its dashboard ({monitoring.dashboard.url}) stay up: drop more "
                f"JSON lines files into {landing}\nCtrl-C (or `slipstream stop mobile "
                f"--state-dir {state_dir}`) to finish",
                file=out,
                flush=True,
            )
            run.wait()
    print(f"\nresults: table {prepared.ctx.table} in {db}", file=out)
    print(
        f"checkpoint: {settings.checkpoint_root}  quarantine: {settings.quarantine_root}", file=out
    )
    print(f"try: sqlite3 {db} 'select * from {prepared.ctx.table}'", file=out)
    if interrupt.interrupted:
        print("stopped by Ctrl-C at a batch boundary.", file=out, flush=True)
        return EXIT_INTERRUPTED
    return 0
