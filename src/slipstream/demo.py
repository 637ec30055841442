"""The mobile demo: seed 003's files land one by one and the counts update after each batch.

Runs the real pipeline (files source, event-time windows, watermark, SQLite sink with its
ledger) on the bundled sample files, in a fresh state directory."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from importlib import resources
from pathlib import Path
from typing import TextIO

from slipstream import runner
from slipstream.config import DEFAULT_DASHBOARD_PORT, load_settings
from slipstream.generators.files import write_atomically
from slipstream.monitor.eventlog import log_files
from slipstream.monitor.listener import ConsoleReporter
from slipstream.monitor.serve import start_monitoring
from slipstream.sinks.sqlite import read_table

SAMPLE_FILES = ("file1.json", "file2.json", "file3.json", "file4.json")


def sample_dir() -> Path:
    return Path(str(resources.files("slipstream") / "data" / "mobile"))


def copy_samples(out: Path) -> list[Path]:
    """Land seed 003's files in `out`, atomically and with increasing modification times (the
    file source takes new files in modification-time order)."""
    copied = []
    Path(out).mkdir(parents=True, exist_ok=True)
    for i, name in enumerate(SAMPLE_FILES):
        target = write_atomically(Path(out), name, (sample_dir() / name).read_text().splitlines())
        stamp = target.stat().st_mtime - len(SAMPLE_FILES) + i
        os.utime(target, (stamp, stamp))
        copied.append(target)
    return copied


def format_table(rows: list[dict[str, object]], columns: list[str]) -> str:
    widths = [max([len(c)] + [len(str(r[c])) for r in rows]) for c in columns]
    line = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [
        line,
        "| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |",
        line,
    ]
    out += [
        "| " + " | ".join(str(r[c]).ljust(w) for c, w in zip(columns, widths, strict=True)) + " |"
        for r in rows
    ]
    out.append(line)
    return "\n".join(out)


def demo(
    state_dir: Path,
    out: TextIO,
    dashboard: int | None = DEFAULT_DASHBOARD_PORT,
    linger: bool | None = None,
) -> int:
    """Land the sample files one by one and show the table after each batch. `dashboard` is
    its port (0: any free port, None: no dashboard). With `linger` (default: when standard input
    is a terminal) the run and its dashboard stay up until Ctrl-C or `slipstream stop mobile`,
    so more files dropped into the landing folder show up live."""
    from slipstream.session import build_session

    state_dir = Path(state_dir).resolve()
    landing = state_dir / "landing" / "mobile"
    # A fresh start for this pipeline only: other demos share the state dir and database.
    for stale in (
        landing,
        state_dir / "checkpoints" / "mobile",
        state_dir / "quarantine" / "mobile",
    ):
        shutil.rmtree(stale, ignore_errors=True)
    landing.mkdir(parents=True)
    settings = load_settings(
        "mobile", {"input": landing, "state_dir": state_dir, "dashboard": dashboard}
    )
    for log in log_files(settings.event_log):  # a fresh run: fresh charts
        log.unlink()
    prepared = runner.prepare(settings)
    prepared.sink.reset(prepared.ctx)
    print(prepared.explain(), file=out)
    monitoring = start_monitoring(prepared.settings, prepared.pipeline)
    print("", file=out)
    monitoring.announce(out)
    print("\nstarting Spark (about 10 s)...", file=out, flush=True)
    spark = build_session(
        settings.master, settings.conf, app_name="slipstream-demo", log_level="ERROR"
    )
    run = runner.start(spark, prepared, [*monitoring.handlers, ConsoleReporter(out)], origin="demo")
    db = prepared.sink.path  # type: ignore[attr-defined]
    columns = ["window_start", "window_end", "action", "count"]
    try:
        for name in SAMPLE_FILES:
            lines = (sample_dir() / name).read_text().splitlines()
            write_atomically(landing, name, lines)
            print(f"\n>>> {name} landed ({len(lines)} events)", file=out, flush=True)
            run.process_all_available()
            rows = read_table(db, prepared.ctx.table, order_by="window_start, action")
            print(format_table(rows, columns), file=out, flush=True)
        if monitoring.dashboard is not None and (sys.stdin.isatty() if linger is None else linger):
            print(
                f"\nthe run and its dashboard ({monitoring.dashboard.url}) stay up: drop more "
                f"JSON lines files into {landing}\nCtrl-C (or `slipstream stop mobile "
                f"--state-dir {state_dir}`) to finish",
                file=out,
                flush=True,
            )
            with contextlib.suppress(KeyboardInterrupt):
                run.wait()
    finally:
        run.stop()
        monitoring.close()
        spark.stop()
    print(f"\nresults: table {prepared.ctx.table} in {db}", file=out)
    print(
        f"checkpoint: {settings.checkpoint_root}  quarantine: {settings.quarantine_dir}", file=out
    )
    print(f"try: sqlite3 {db} 'select * from {prepared.ctx.table}'", file=out)
    return 0
