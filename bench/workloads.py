"""Inputs for the scenarios: mobile-action files, trending files with latency markers, a pacer
that lands files at a fixed rate, and a poller that sees markers appear in the serving table.

Latency markers. Every trending file gets one extra, valid event whose `article_id` is unique to
that file (`a9` + 8 digits: outside the catalog, so the pipeline counts it with in_catalog =
false) and whose `ts` is the newest event time of the file (never late, never in the future).
The file's counts are visible in the serving table when a row for its marker article is; the
latency of a file is (first seen) - (landed), measured on one monotonic clock in this process.
Each marker is one event, so every row of a marker article must say views = 1: a replayed batch
that was counted twice would show 2 (the exactly-once check of the recovery scenario)."""

from __future__ import annotations

import json
import os
import random
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

MOBILE_ACTIONS = ("open", "close", "click", "scroll", "purchase", "share")
MARKER_PREFIX = "a9"
MARKER_DIGITS = 8
MARKER_LENGTH = len(MARKER_PREFIX) + MARKER_DIGITS


# ---------------------------------------------------------------- mobile (scenarios 2 and 7)


def write_mobile_files(
    directory: Path, files: int, lines_per_file: int, bad_share: float = 0.005, seed: int = 7
) -> int:
    """`files` JSON-lines files of mobile actions, event time 1 ms apart; a small share of lines
    is malformed (not JSON, or no `ts`) so the quarantine has work. Returns the line count."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    n = 0
    for f in range(files):
        lines = []
        for _ in range(lines_per_file):
            ts = (start + timedelta(milliseconds=n)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
            action = MOBILE_ACTIONS[rng.randrange(len(MOBILE_ACTIONS))]
            device = f"phone{rng.randrange(10_000)}"
            roll = rng.random()
            if roll < bad_share / 2:
                lines.append(f'{{"id": "{device}", "action": "{action}", "ts": ')
            elif roll < bad_share:
                lines.append(json.dumps({"id": device, "action": action}))
            else:
                lines.append(json.dumps({"id": device, "action": action, "ts": ts}))
            n += 1
        tmp = directory / f".part-{f:05d}.json.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, directory / f"part-{f:05d}.json")
    return n


# ---------------------------------------------------------------- trending with markers


def marker_article(index: int) -> str:
    return f"{MARKER_PREFIX}{index:0{MARKER_DIGITS}d}"


def marker_index(article_id: str) -> int:
    return int(article_id[len(MARKER_PREFIX) :])


@dataclass(frozen=True)
class TrendingInput:
    staging: Path  # generated files, not yet landed
    catalog: Path
    files: list[Path]  # in landing order
    lines_per_file: list[int]  # including the marker line
    total_lines: int


def generate_trending(
    out: Path,
    events: int,
    rate: float,
    markers: bool,
    file_every: timedelta = timedelta(seconds=1),
    seed: int = 42,
) -> TrendingInput:
    """Generate `events` view events (`rate` per second of event time, one file per
    `file_every`) into out/staging, the catalog into out/catalog.csv; optionally one marker
    event appended to each file."""
    from slipstream.tools.generators.trending import TrendingSpec, generate, write_catalog

    staging = out / "staging"
    spec = TrendingSpec(rate=rate, events=events, file_every=file_every, seed=seed)
    generate(spec, staging)
    catalog = write_catalog(out / "catalog.csv", spec)
    files = sorted(p for p in staging.iterdir() if p.name.startswith("views-"))
    counts = []
    for index, path in enumerate(files):
        with path.open("rb") as handle:
            n = sum(1 for _ in handle)
        if markers:
            end = spec.start + file_every * (index + 1) - timedelta(milliseconds=1)
            line = json.dumps(
                {
                    "event_id": f"bench-marker-{index}",
                    "article_id": marker_article(index),
                    "user_id": "bench",
                    "ts": end.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
                }
            )
            with path.open("a", encoding="utf-8") as handle:
                handle.write(line + "\n")
            n += 1
        counts.append(n)
    return TrendingInput(staging, catalog, files, counts, sum(counts))


def land_all(data: TrendingInput, landing: Path) -> None:
    """Move every generated file into the landing folder at once (throughput runs)."""
    landing.mkdir(parents=True, exist_ok=True)
    for path in data.files:
        os.replace(path, landing / path.name)


# ---------------------------------------------------------------- the pacer


@dataclass
class Pacer:
    """Lands one file every `interval` seconds (atomic rename into the landing folder) in a
    thread, and records when each file landed. The schedule is absolute (file k at t0 + k x
    interval), so a late wake-up does not shift the later files."""

    files: list[Path]
    landing: Path
    interval: float
    landed: dict[int, float] = field(default_factory=dict)  # file index -> monotonic time
    first: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    started_at: float = 0.0
    next_index: int = 0

    def land(self, index: int) -> float:
        path = self.files[index]
        os.replace(path, self.landing / path.name)
        now = time.monotonic()
        self.landed[index] = now
        return now

    def start(self, first: int) -> Pacer:
        self.landing.mkdir(parents=True, exist_ok=True)
        self.first = first
        self.next_index = first
        self.started_at = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="bench-pacer", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        for index in range(self.first, len(self.files)):
            due = self.started_at + (index - self.first) * self.interval
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            self.land(index)
            self.next_index = index + 1

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def done(self) -> bool:
        return self.next_index >= len(self.files)


# ---------------------------------------------------------------- the poller


class _Poller:
    """Polls an output for marker articles in a thread; records when each was first seen (on
    this process's monotonic clock) and the most views any marker row showed. Resolution:
    `every` seconds (latencies are over-stated by half of it on average)."""

    def __init__(self, every: float = 0.05) -> None:
        self.every = every
        self.seen: dict[int, float] = {}
        self.max_views = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> _Poller:
        self._thread = threading.Thread(target=self._run, name="bench-poller", daemon=True)
        self._thread.start()
        return self

    def poll(self) -> None:
        raise NotImplementedError

    def _record(self, markers: list[tuple[str, int]], now: float) -> None:
        """(marker article, views) pairs seen at `now`; the caller holds the lock."""
        for article, views in markers:
            index = marker_index(article)
            if index not in self.seen:
                self.seen[index] = now
            self.max_views = max(self.max_views, int(views))

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.poll()

    def wait_for(
        self, indexes: list[int], timeout: float, alive: Callable[[], bool] = lambda: True
    ) -> bool:
        """Until every marker in `indexes` was seen (bounded; gives up if `alive()` fails)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if all(i in self.seen for i in indexes):
                    return True
            if not alive():
                return False
            time.sleep(self.every)
        return False

    def snapshot(self) -> dict[int, float]:
        with self._lock:
            return dict(self.seen)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._close()

    def _close(self) -> None:
        pass


class MarkerPoller(_Poller):
    """Polls the serving table for marker articles.

    A poll is one indexed-free scan of `article_views` restricted to marker-length ids; the
    table holds (windows x articles) rows, a few thousand, so a poll takes about a millisecond."""

    def __init__(self, db: Path, table: str = "article_views", every: float = 0.05) -> None:
        super().__init__(every)
        self.db = db
        self.table = table
        self.ledger_rows = 0
        self.ledger_seen: list[tuple[int, float]] = []  # (ledger rows, first seen at)
        self._conn: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and self.db.exists():
            self._conn = sqlite3.connect(
                f"file:{self.db}?mode=ro", uri=True, timeout=1, check_same_thread=False
            )
        return self._conn

    def poll(self) -> None:
        conn = self._connect()
        if conn is None:
            return
        try:
            rows = conn.execute(
                f'SELECT article_id, MAX(views) FROM "{self.table}" '
                f"WHERE length(article_id) = {MARKER_LENGTH} "
                f"AND article_id LIKE '{MARKER_PREFIX}%' GROUP BY article_id"
            ).fetchall()
            ledger = conn.execute("SELECT COUNT(*) FROM _slipstream_batches").fetchone()[0]
        except sqlite3.OperationalError:  # the sink has not created its tables yet
            return
        now = time.monotonic()
        with self._lock:
            self._record(rows, now)
            if ledger != self.ledger_rows:
                self.ledger_rows = ledger
                self.ledger_seen.append((ledger, now))

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


MARKER_LINE = re.compile(
    rb"^(?:\+[IU]\[)?("
    + MARKER_PREFIX.encode()
    + rb"[0-9]{%d}), ?[^,]*, ?([0-9]+)\]?$" % MARKER_DIGITS
)


class MarkerFilePoller(_Poller):
    """Tails a file of output rows that a program appends to (and flushes) as it emits them,
    one row a line, `article_id,window_start,views` (bench/peers/peer_common.LiveOut) or
    Flink's print sink's `+I[article_id, window_start, views]` (`+U` an update; `-U`/`-D`
    lines, retractions, are not counted): the peers' live output. A poll reads the bytes
    added since the last one and looks only at the complete lines of a marker article."""

    def __init__(self, path: Path, every: float = 0.05) -> None:
        super().__init__(every)
        self.path = path
        self.lines = 0
        self._offset = 0
        self._partial = b""

    def poll(self) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                chunk = handle.read()
        except FileNotFoundError:
            return
        now = time.monotonic()
        if not chunk:
            return
        self._offset += len(chunk)
        data = self._partial + chunk
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:]
        lines = data[:cut].splitlines()
        prefix = MARKER_PREFIX.encode()
        markers = []
        for line in lines:
            if prefix in line[:6] and (match := MARKER_LINE.match(line.strip())):
                markers.append((match[1].decode(), int(match[2])))
        with self._lock:
            self.lines += len(lines)
            self._record(markers, now)
