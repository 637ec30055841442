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
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TextIO

import slipstream
from slipstream.core.files import prune_older_than
from slipstream.core.specs import parse_duration
from slipstream.core.words import count
from slipstream.errors import ConfigError
from slipstream.monitor.accounts import output_account
from slipstream.monitor.first_batch import FirstBatchNotice
from slipstream.monitor.listener import Handler, Record
from slipstream.monitor.serve import MonitorHandles
from slipstream.runtime.bind import prepare
from slipstream.runtime.bound import Prepared
from slipstream.runtime.explain import explain
from slipstream.runtime.interrupt import EXIT_INTERRUPTED, CtrlC, ctrl_c
from slipstream.runtime.launch import launch
from slipstream.runtime.run import Run
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


@dataclass(frozen=True)
class _Places:
    """Where the demo keeps its input, catalog and generator files, under the state dir."""

    landing: Path
    catalog: Path
    report: Path
    log: Path

    @classmethod
    def under(cls, state_dir: Path) -> _Places:
        return cls(
            state_dir / "landing" / PIPELINE,
            state_dir / "catalog" / "articles.csv",
            state_dir / "generator" / "trending-report.json",
            state_dir / "generator" / "trending.log",
        )


class _Generator:
    """The demo's generator child: started once the servers are up (`launch`'s `ready`)."""

    def __init__(
        self, places: _Places, rate: float, seed: int, send_to: str | None, view: TopView
    ) -> None:
        self.places, self.rate, self.seed, self.send_to, self.view = (
            places, rate, seed, send_to, view,
        )  # fmt: skip
        self.child: subprocess.Popen[bytes] | None = None

    def start(self, monitoring: MonitorHandles) -> None:
        self.view.dashboard_url = monitoring.dashboard.url if monitoring.dashboard else None
        self.view.since = datetime.now(UTC)  # the generator's event time starts at now
        p = self.places
        self.child = start_generator(
            p.landing, p.catalog, p.report, p.log, self.rate, self.seed, to=self.send_to
        )

    def failed(self) -> bool:
        return self.child is not None and self.child.poll() not in (None, 0)

    def failure(self) -> ConfigError | None:
        if not self.failed():
            return None
        assert self.child is not None
        log = self.places.log
        return ConfigError(
            "SOURCE_NOT_AVAILABLE",
            f"the demo's generator stopped (exit {self.child.returncode}); its log: {log}",
            f"read {log}",
        )

    def stop(self) -> None:
        if self.child is not None:
            stop_generator(self.child)


def _limit(duration: str | timedelta | None) -> timedelta | None:
    try:
        return parse_duration(duration) if duration is not None else None
    except ValueError as exc:
        raise ConfigError(
            "CONFIG_BAD_VALUE", f"--duration has value {duration!r}; allowed: {exc}", ""
        ) from None


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
    limit = _limit(duration)
    places = _Places.under(state_dir)
    places.landing.mkdir(parents=True, exist_ok=True)
    places.catalog.parent.mkdir(parents=True, exist_ok=True)
    write_catalog(places.catalog, TrendingSpec(rate=rate, seed=seed))
    broker = topic = send_to = None
    if source == "kafka":
        broker, topic, send_to = start_broker(state_dir, out)
    settings = load_settings(
        PIPELINE,
        {
            "input": [topic or str(places.landing), f"catalog={places.catalog}"],
            "state_dir": state_dir,
            "dashboard": dashboard,
        },
    )
    try:  # a refusal before the run's own cleanup takes the broker down with it
        prepared = prepare(settings)  # every check that needs no plan, before Spark
        fresh_start(prepared, places.landing)
    except BaseException:
        if broker is not None:
            broker.destroy()
        raise
    places.landing.mkdir(parents=True, exist_ok=True)
    print(explain(prepared), file=out)
    print(
        f"\ngenerator: {rate:,.0f} events/s into {topic or places.landing}; starting Spark: the "
        "first top 10 follows the first batch (16 s on an idle 2-core machine, a minute or more "
        "on a busy one)...",
        file=out,
        flush=True,
    )
    view = TopView(prepared.settings.default_database, out, top, rate)
    generator = _Generator(places, rate, seed, send_to, view)
    waiting = FirstBatchNotice(out, {RESULTS_QUERY})  # until the first top 10 replaces it
    handlers: list[Handler] = [waiting, view]
    if broker is None:
        handlers.append(LandingJanitor(places.landing))
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
            ready=generator.start,
            app_name="slipstream-demo",
            starting=None,
        ) as launched:
            run_ = launched.run
            run_.stop_requested = lambda: (
                generator.failed() or (max_batches is not None and view.batches >= max_batches)
            )
            run_.wait(limit)
            failure = generator.failure()
    except Exception as exc:  # noqa: BLE001 - reported below, after the cleanup
        failure = exc
    finally:
        waiting.close()
        generator.stop()
        if broker is not None:
            broker.destroy()
    _report(out, view, run_, prepared, places, topic, bool(interrupt.count))
    if failure is not None:
        print(f"slipstream: the demo failed: {str(failure).splitlines()[0]}", file=sys.stderr)
        return 1
    return EXIT_INTERRUPTED if interrupt.count else 0


def _report(
    out: TextIO,
    view: TopView,
    run_: Run | None,
    prepared: Prepared,
    places: _Places,
    topic: str | None,
    stopped: bool,
) -> None:
    """The demo's last lines: how fast it went and where everything is."""
    t = view.throughput()
    print("", file=out)
    if stopped:  # Ctrl-C or SIGTERM
        print("stopped by Ctrl-C at a batch boundary.", file=out)
    if view.first_batch_at is not None:
        print(f"first top 10 after {view.first_batch_at:.1f} s", file=out)
    print(
        f"sustained: {count(t['events'], 'event')} in {count(t['batches'], 'batch')}, "
        f"{t['events_per_s']:,.0f} events/s of processing time "
        f"(mean batch {t['mean_batch_rps']:,.0f} rows/s; generator {view.rate:,.0f}/s)",
        file=out,
    )
    if run_ is not None and RESULTS_QUERY in run_.totals.by_query:
        print(output_account(RESULTS_QUERY, run_.accounts()[RESULTS_QUERY]), file=out)
    db_path = prepared.settings.default_database
    print(
        "outputs:\n"
        f"  results     {db_path} table article_views  (sqlite3 {db_path} "
        '"SELECT * FROM article_views ORDER BY window_start DESC, views DESC LIMIT 10")\n'
        f"  quarantine  {prepared.settings.quarantine_root}\n"
        f"  checkpoint  {prepared.settings.checkpoint_root}\n"
        f"  input       {topic or places.landing} (catalog {places.catalog})\n"
        f"  generator   report {places.report}, log {places.log}",
        file=out,
        flush=True,
    )
