"""The trending demo (`slipstream demo`, `make demo`): a live news site and its top 10.

1. writes an article catalog and starts the event generator as a child process, writing one
   file per second at `--rate` events/s (default 2,000) into `STATE/landing/trending`, with
   the generator's default dirt: out-of-order, late, duplicate and malformed events;
2. runs the `trending` pipeline on embedded defaults (local Spark, files source, SQLite sink
   with its batch ledger, quarantine) against that directory;
3. after every micro-batch, redraws the top 10 of the current window from the SQLite table
   (the same `slipstream.tools.serving.top_articles` query the dashboard uses), with the batch's
   figures (rows, rows/s, watermark, late, duplicates, quarantined);
4. stops on Ctrl-C or after `--duration`, stops the generator (also when the demo dies: the
   child gets SIGTERM when its parent goes), and says where the outputs are and what rate the
   pipeline sustained.

Each run starts fresh: the demo removes its own previous landing files, checkpoint, quarantine
and `article_views` table (nothing else under the state directory).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import TextIO

import slipstream
from slipstream.core.files import prune_older_than
from slipstream.core.specs import parse_duration
from slipstream.core.words import count
from slipstream.errors import ConfigError
from slipstream.monitor.accounts import output_account
from slipstream.monitor.listener import Handler, Record
from slipstream.monitor.serve import MonitorHandles
from slipstream.runtime.bind import prepare
from slipstream.runtime.explain import explain
from slipstream.runtime.interrupt import EXIT_INTERRUPTED, CtrlC, ctrl_c
from slipstream.runtime.launch import launch
from slipstream.settings.config import DEFAULT_DASHBOARD_PORT, load_settings
from slipstream.tools.demo import fresh_start
from slipstream.tools.demo_kafka import start_broker
from slipstream.tools.demo_view import RESULTS_QUERY, TopView
from slipstream.tools.generators.trending import TrendingSpec, write_catalog
from slipstream.tools.views import results_view

PIPELINE = "trending"
DEMO_SEED = 2  # seed 002: the news site
# Landing files older than this are deleted (once a minute): Spark lists the whole folder on
# every trigger, and a folder that only grows made every batch slower (run K in
# docs/benchmarks.md). Three watermarks: every query has read such a file long before.
LANDING_KEEP_S = 30 * 60


class LandingJanitor:
    """A listener handler: at most once a minute, after a batch of the results query, delete
    the landing files older than `keep_s` (the demo feeds and owns that folder)."""

    def __init__(self, landing: Path, keep_s: float = LANDING_KEEP_S, every_s: float = 60) -> None:
        self.landing, self.keep_s, self.every_s = landing, keep_s, every_s
        self.removed = 0
        self._last = time.monotonic()

    def __call__(self, record: Record) -> None:
        if record["event"] != "progress" or record["query"] != RESULTS_QUERY:
            return
        if time.monotonic() - self._last >= self.every_s:
            self._last = time.monotonic()
            self.removed += prune_older_than(self.landing, self.keep_s, time.time())


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: SIGTERM the generator when the demo process dies (even by SIGKILL)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def start_generator(
    landing: Path,
    catalog: Path,
    report: Path,
    log: Path,
    rate: float,
    seed: int,
    to: str | None = None,
) -> subprocess.Popen[bytes]:
    """The generator as a child process in its own session (Ctrl-C reaches only the demo, which
    then stops it in order); `to`: a kafka:// topic instead of the landing folder."""
    env = dict(os.environ)
    src = str(Path(slipstream.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    command = [
        sys.executable, "-m", "slipstream", "generate", "trending",
        *(["--to", to] if to else ["--out", str(landing)]),
        "--catalog", str(catalog), "--report", str(report),
        "--rate", f"{rate:g}", "--seed", str(seed), "--pace", "live", "--start", "now", "--quiet",
    ]  # fmt: skip
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as sink:
        return subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # called before Spark starts threads
        )


def stop_generator(child: subprocess.Popen[bytes], timeout: float = 10.0) -> int | None:
    """SIGINT (the generator finishes its current file and writes its report), then SIGKILL."""
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    return child.returncode


def demo(
    state_dir: Path,
    out: TextIO,
    *,
    duration: str | timedelta | None = None,
    rate: float = 2000.0,
    seed: int = DEMO_SEED,
    top: int = 10,
    max_batches: int | None = None,
    dashboard: int | None = DEFAULT_DASHBOARD_PORT,
    source: str = "files",
) -> int:
    """Run the demo; `max_batches` stops it after that many batches with data (smoke tests).
    `dashboard` is the live dashboard's port (0: any free one; None: none). `source` kafka:
    a local broker (demo_kafka.py) carries the events instead of landing files. Ctrl-C stops it
    at a batch boundary (exit 130), a second one at once (runtime.interrupt)."""
    with ctrl_c() as interrupt:
        return _demo(
            state_dir, out, interrupt, duration, rate, seed, top, max_batches, dashboard, source
        )


def _demo(
    state_dir: Path,
    out: TextIO,
    interrupt: CtrlC,
    duration: str | timedelta | None,
    rate: float,
    seed: int,
    top: int,
    max_batches: int | None,
    dashboard: int | None,
    source: str,
) -> int:

    state_dir = Path(state_dir).resolve()
    try:
        limit = parse_duration(duration) if duration is not None else None
    except ValueError as exc:
        raise ConfigError(
            "CONFIG_BAD_VALUE", f"--duration has value {duration!r}; allowed: {exc}", ""
        ) from None
    landing = state_dir / "landing" / PIPELINE
    catalog = state_dir / "catalog" / "articles.csv"
    report = state_dir / "generator" / "trending-report.json"
    log = state_dir / "generator" / "trending.log"
    spec = TrendingSpec(rate=rate, seed=seed)
    landing.mkdir(parents=True, exist_ok=True)
    catalog.parent.mkdir(parents=True, exist_ok=True)
    write_catalog(catalog, spec)
    broker = topic = send_to = None
    if source == "kafka":
        broker, topic, send_to = start_broker(state_dir, out)
    settings = load_settings(
        PIPELINE,
        {
            "input": [topic or str(landing), f"catalog={catalog}"],
            "state_dir": state_dir,
            "dashboard": dashboard,
            # the quarantine's parse every 10 s, not beside every batch: the top ten comes
            # 0.65x sooner at 1,000 events/s (docs/benchmarks.md, run O)
            "quarantine_trigger": "10s",
        },
    )
    try:  # a refusal before the run's own cleanup takes the broker down with it
        prepared = prepare(settings)  # every check that needs no plan, before Spark
        fresh_start(prepared, landing)
    except BaseException:
        if broker is not None:
            broker.destroy()
        raise
    landing.mkdir(parents=True, exist_ok=True)
    db_path = prepared.settings.default_database
    print(explain(prepared), file=out)
    print(
        f"\ngenerator: {rate:,.0f} events/s into {topic or landing}; starting Spark: the first "
        "top 10 follows the first batch (16 s on an idle 2-core machine, a minute or more on a "
        "busy one)...",
        file=out,
        flush=True,
    )
    view = TopView(db_path, out, top, rate)
    child: subprocess.Popen[bytes] | None = None

    def ready(monitoring: MonitorHandles) -> None:  # the servers are up: the generator starts
        nonlocal child
        view.dashboard_url = monitoring.dashboard.url if monitoring.dashboard else None
        child = start_generator(landing, catalog, report, log, rate, seed, to=send_to)

    def generator_failed() -> bool:
        return child is not None and child.poll() not in (None, 0)

    handlers: list[Handler] = [view] if broker is not None else [view, LandingJanitor(landing)]
    run_ = None
    failure: Exception | None = None
    try:
        with launch(
            prepared,
            out,
            origin="demo",
            interrupt=interrupt,
            handlers=handlers,
            results=partial(results_view, prepared),
            ready=ready,
            app_name="slipstream-demo",
            starting=None,
        ) as launched:
            run_ = launched.run

            def stop_when() -> bool:
                if generator_failed():  # nothing more comes
                    return True
                return max_batches is not None and view.batches >= max_batches

            run_.stop_requested = stop_when
            run_.wait(limit)
            if generator_failed():
                assert child is not None
                failure = ConfigError(
                    "SOURCE_NOT_AVAILABLE",
                    f"the demo's generator stopped (exit {child.returncode}); its log: {log}",
                    f"read {log}",
                )
    except Exception as exc:  # noqa: BLE001 - reported below, after the cleanup
        failure = exc
    finally:
        if child is not None:
            stop_generator(child)
        if broker is not None:
            broker.destroy()
    t = view.throughput()
    print("", file=out)
    if interrupt.count:  # Ctrl-C or SIGTERM
        print("stopped by Ctrl-C at a batch boundary.", file=out)
    if view.first_batch_at is not None:
        print(f"first top 10 after {view.first_batch_at:.1f} s", file=out)
    print(
        f"sustained: {count(t['events'], 'event')} in {count(t['batches'], 'batch')}, "
        f"{t['events_per_s']:,.0f} events/s of processing time "
        f"(mean batch {t['mean_batch_rps']:,.0f} rows/s; generator {rate:,.0f}/s)",
        file=out,
    )
    if run_ is not None and RESULTS_QUERY in run_.totals.by_query:
        print(output_account(RESULTS_QUERY, run_.accounts()[RESULTS_QUERY]), file=out)
    print(
        "outputs:\n"
        f"  results     {db_path} table article_views  (sqlite3 {db_path} "
        '"SELECT * FROM article_views ORDER BY window_start DESC, views DESC LIMIT 10")\n'
        f"  quarantine  {prepared.settings.quarantine_root}\n"
        f"  checkpoint  {prepared.settings.checkpoint_root}\n"
        f"  input       {topic or landing} (catalog {catalog})\n"
        f"  generator   report {report}, log {log}",
        file=out,
        flush=True,
    )
    if failure is not None:
        print(f"slipstream: the demo failed: {str(failure).splitlines()[0]}", file=sys.stderr)
        return 1
    return EXIT_INTERRUPTED if interrupt.count else 0
