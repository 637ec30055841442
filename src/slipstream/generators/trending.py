"""Article-view events for the ``trending`` pipeline: a news site's readers, with realistic dirt.

The stream is a sequence of *slots*; slot ``i`` has the nominal event time
``start + i / rate``. Slots are cut into files of ``file_every`` event time each
(``views-00000000.jsonl``, ``views-00000001.jsonl``, ...; lexical order is time order), and each
slot becomes exactly one line of one of these kinds:

* **valid, in order** - ``ts`` is the slot's nominal time, never earlier than any valid ``ts``
  written before it.
* **out of order** - ``ts`` is earlier than the maximum valid ``ts`` written so far, by at most
  ``watermark`` (so a query with that watermark keeps it).
* **late** - ``ts`` is older than ``M - watermark - window`` where ``M`` is the maximum valid
  ``ts`` of all files *before the previous one*. Spark filters late rows with the watermark of
  the *previous* micro-batch (each stateful operator's "watermark for late events"), so in batch
  ``k`` rows older than ``max(ts of batches < k-1) - watermark`` are dropped. When each file is
  its own micro-batch (``maxFilesPerTrigger=1``) every late event is therefore dropped, and no
  other valid event is; with other batch boundaries whether Spark drops a given late event
  varies, so the report counts what was generated, not what Spark will do.
* **duplicate** - an exact byte copy of an earlier valid line that is not late (same
  ``event_id``), taken from the current file or the previous one, so some duplicates cross file
  boundaries. Late lines are never re-sent, so with one file per micro-batch a deduplicating
  query drops exactly ``duplicates`` rows as duplicates and ``late`` rows as late.
* **malformed** - one of ``not_json``, ``missing_event_id``, ``missing_article_id``, ``bad_ts``
  (a string no ISO-8601 parser accepts) or ``wrong_type`` (``article_id`` is a JSON object or
  array). Note that Spark's JSON reader turns an object or array in a ``StringType`` field into
  its JSON text, so a pipeline must check the shape of ``article_id`` (``^a[0-9]+$``) to count
  ``wrong_type`` lines as malformed rather than as unknown articles.

Independently, a fraction ``unknown_article`` of the valid unique events names an article id that
is not in the catalog (ids just above the catalog's range, same width).

Valid ``ts`` values are ISO-8601 with milliseconds in three encodings of the same instant: mostly
UTC with ``Z``, some with a numeric offset (``+02:00``, ``-05:00``, ...), some with no zone, which
means UTC. Pipelines must therefore parse with the session time zone set to UTC.

Traffic is skewed and moves: article popularity follows a Zipf law over a ranking, and every
``rotate_every`` of event time one to three stories "break" (jump from the long tail to the top),
pushing the others down. Readers come from a pool of concurrent sessions, so a user reads several
articles in a row; heavy readers (low user numbers) come back more often.

The same spec and seed give byte-identical files: all randomness comes from ``random.Random``
seeded from the spec, and nothing in the content depends on the wall clock.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import random
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from types import FrameType
from typing import Any, Literal, NamedTuple, Protocol, get_args

from slipstream.errors import ConfigError
from slipstream.generators.files import write_atomically
from slipstream.progressbar import ProgressBar

__all__ = [
    "CATALOG_HEADER",
    "MALFORMED_KINDS",
    "SECTIONS",
    "Article",
    "Clock",
    "GenerationReport",
    "MalformedKind",
    "SpecError",
    "SystemClock",
    "TrendingSpec",
    "catalog",
    "event_file_name",
    "generate",
    "write_catalog",
]

SECTIONS: tuple[str, ...] = (
    "world",
    "politics",
    "business",
    "tech",
    "science",
    "sport",
    "culture",
    "opinion",
)
CATALOG_HEADER: tuple[str, ...] = ("article_id", "title", "section", "published_at")
MalformedKind = Literal[
    "not_json", "missing_event_id", "missing_article_id", "bad_ts", "wrong_type"
]
MALFORMED_KINDS: tuple[MalformedKind, ...] = get_args(MalformedKind)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
_US = timedelta(microseconds=1)
_DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
_FILE_PREFIX = "views-"
_FILE_SUFFIX = ".jsonl"

# Encodings of a valid ts (cumulative shares): "Z", then a numeric offset, the rest no zone.
_TS_Z_SHARE = 0.85
_TS_OFFSET_SHARE = 0.95
_TS_OFFSETS: tuple[tuple[str, int], ...] = (
    ("+02:00", 2 * 3600),
    ("-05:00", -5 * 3600),
    ("+05:30", 5 * 3600 + 1800),
    ("+09:00", 9 * 3600),
)
_BAD_TS: tuple[str, ...] = (
    "",
    "soon",
    "2026-13-01T00:00:00Z",
    "2026-01-01T25:61:00Z",
    "01/02/2026 10:00",
)
# Readers: a pool of concurrent sessions; each view ends its reader's session with this chance
# (mean 5 articles per session). The pool holds about ten seconds of traffic.
_SESSION_END = 0.2
_POOL_SECONDS = 10
_BREAKING_MAX = 3


class SpecError(ConfigError, ValueError):
    """A generator spec value is out of range (CONFIG_BAD_VALUE). ``field`` names the offending
    parameter; ``str()`` is the bare message, for the generator's own flags to wrap."""

    def __init__(self, field: str, value: object, allowed: str) -> None:
        message = f"{field} must be {allowed}; got {field}={_value_text(value)}"
        super().__init__("CONFIG_BAD_VALUE", message, f"give {field} {allowed}")
        self.field = field
        self.value = value

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class TrendingSpec:
    """What to generate. Fractions are shares of all lines written, except ``unknown_article``,
    which is a share of the valid unique events. ``rate`` is lines per second of event time (and
    of wall time when paced by a clock). ``events`` and ``duration`` bound the run; whichever is
    reached first ends it, and with neither it runs until interrupted."""

    articles: int = 200
    users: int = 5000
    rate: float = 2000.0
    events: int | None = None
    duration: timedelta | None = None
    seed: int = 42
    start: datetime = _DEFAULT_START
    file_every: timedelta = timedelta(seconds=1)
    out_of_order: float = 0.05
    late: float = 0.01
    duplicates: float = 0.02
    malformed: float = 0.01
    unknown_article: float = 0.005
    watermark: timedelta = timedelta(minutes=10)
    window: timedelta = timedelta(minutes=10)
    rotate_every: timedelta = timedelta(minutes=3)
    skew: float = 1.1

    def __post_init__(self) -> None:
        _check_int(self.articles, "articles", minimum=1)
        _check_int(self.users, "users", minimum=1)
        _check_positive_number(self.rate, "rate")
        if self.events is not None:
            _check_int(self.events, "events", minimum=1, none_allowed=True)
        if self.duration is not None:
            _check_positive_duration(self.duration, "duration", none_allowed=True)
        _check_int(self.seed, "seed", minimum=None)
        if not isinstance(self.start, datetime) or self.start.utcoffset() is None:
            raise SpecError("start", self.start, "a timezone-aware datetime (UTC)")
        object.__setattr__(self, "start", self.start.astimezone(UTC))
        _check_positive_duration(self.file_every, "file_every")
        if self.events_per_file < 1:
            raise SpecError(
                "file_every",
                self.file_every,
                f"long enough to hold one event at rate={self.rate:g}/s "
                f"(at least {_duration_text(timedelta(seconds=1 / self.rate))})",
            )
        fractions = ("out_of_order", "late", "duplicates", "malformed", "unknown_article")
        for name in fractions:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 1:
                raise SpecError(name, value, "a number in [0, 1)")
        dirt = self.malformed + self.duplicates + self.late + self.out_of_order
        if dirt >= 1:
            raise SpecError(
                "malformed + duplicates + late + out_of_order",
                round(dirt, 12),
                "below 1 so that some events arrive in order",
            )
        for name in ("watermark", "window"):
            value = getattr(self, name)
            _check_positive_duration(value, name)
            if value < timedelta(seconds=1):
                raise SpecError(name, value, "at least 1s")
        _check_positive_duration(self.rotate_every, "rotate_every")
        if (
            isinstance(self.skew, bool)
            or not isinstance(self.skew, int | float)
            or not (math.isfinite(self.skew) and self.skew >= 0)
        ):
            raise SpecError("skew", self.skew, "a finite number >= 0 (0 = uniform popularity)")

    @property
    def events_per_file(self) -> Fraction:
        """Lines per file, exactly (``rate × file_every``); files hold its floor or ceiling."""
        return Fraction(self.rate) * Fraction(self.file_every // _US, 1_000_000)

    @property
    def total_lines(self) -> int | None:
        """How many lines the run writes, or ``None`` when it runs until interrupted."""
        bounds: list[int] = []
        if self.events is not None:
            bounds.append(self.events)
        if self.duration is not None:
            bounds.append(
                math.ceil(Fraction(self.rate) * Fraction(self.duration // _US, 1_000_000))
            )
        return min(bounds) if bounds else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: durations in seconds (keys end in ``_s``), times as ISO-8601 with ``Z``."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if isinstance(value, timedelta):
                out[f"{key}_s"] = value.total_seconds()
            elif value is None and key == "duration":
                out["duration_s"] = None
            elif isinstance(value, datetime):
                out[key] = _iso_ms(_to_ms(value))
            else:
                out[key] = value
        return out


@dataclass(frozen=True)
class GenerationReport:
    """Exactly what a run wrote. ``total_lines = valid_unique + duplicates + malformed``;
    ``late``, ``out_of_order`` and ``unknown_article`` are subsets of ``valid_unique``.
    Event times span the valid lines (late events may precede ``spec.start``)."""

    spec: TrendingSpec
    total_lines: int
    valid_unique: int
    duplicates: int
    malformed: int
    late: int
    out_of_order: int
    unknown_article: int
    files: int
    first_event_time: datetime | None
    last_event_time: datetime | None
    interrupted: bool
    malformed_kinds: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_lines": self.total_lines,
            "valid_unique": self.valid_unique,
            "duplicates": self.duplicates,
            "malformed": self.malformed,
            "malformed_kinds": dict(self.malformed_kinds),
            "late": self.late,
            "out_of_order": self.out_of_order,
            "unknown_article": self.unknown_article,
            "files": self.files,
            "first_event_time": _iso_or_none(self.first_event_time),
            "last_event_time": _iso_or_none(self.last_event_time),
            "interrupted": self.interrupted,
            "spec": self.spec.to_dict(),
        }

    def write_report(self, path: Path) -> Path:
        """Write ``to_dict()`` as indented JSON to ``path`` (atomically)."""
        path = Path(path)
        text = json.dumps(self.to_dict(), indent=2, sort_keys=True)
        return write_atomically(path.parent, path.name, text.splitlines())


class Clock(Protocol):
    """Wall time for pacing, in seconds on a monotonic scale. Tests inject a fake."""

    def now(self) -> float: ...

    def sleep_until(self, t: float) -> None: ...


class SystemClock:
    """The real clock: ``time.monotonic`` and ``time.sleep``."""

    def now(self) -> float:
        return time.monotonic()

    def sleep_until(self, t: float) -> None:
        while (remaining := t - time.monotonic()) > 0:
            time.sleep(remaining)


class Article(NamedTuple):
    article_id: str
    title: str
    section: str
    published_at: datetime


def event_file_name(index: int) -> str:
    """The name of the ``index``-th event file; lexical order is time order."""
    return f"{_FILE_PREFIX}{index:08d}{_FILE_SUFFIX}"


def catalog(spec: TrendingSpec) -> tuple[Article, ...]:
    """The article catalog for ``spec`` (depends only on ``articles``, ``seed`` and ``start``)."""
    rng = random.Random(f"slipstream.trending.catalog:{spec.seed}")
    width = _article_width(spec)
    seen: set[str] = set()
    articles: list[Article] = []
    for number in range(1, spec.articles + 1):
        section = SECTIONS[rng.randrange(len(SECTIONS))]
        title = _headline(rng, section)
        attempt = 1
        while title in seen:
            attempt += 1
            title = _headline(rng, section) if attempt < 5 else f"{title} ({number})"
        seen.add(title)
        age = timedelta(seconds=rng.randrange(10 * 60, 48 * 3600))
        published = (spec.start - age).replace(microsecond=0)
        articles.append(Article(f"a{number:0{width}d}", title, section, published))
    return tuple(articles)


def write_catalog(path: Path, spec: TrendingSpec) -> Path:
    """Write the catalog as CSV (``article_id,title,section,published_at``), atomically."""
    path = Path(path)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CATALOG_HEADER)
    for article in catalog(spec):
        published = article.published_at.strftime("%Y-%m-%dT%H:%M:%SZ")
        writer.writerow((article.article_id, article.title, article.section, published))
    return write_atomically(path.parent, path.name, buffer.getvalue().splitlines())


def generate(
    spec: TrendingSpec,
    out_dir: Path,
    *,
    clock: Clock | None = None,
    progress: bool = False,
) -> GenerationReport:
    """Write the event files of ``spec`` into ``out_dir`` and report exactly what was written.

    With ``clock=None`` files are written as fast as possible. With a clock, file ``k`` (event
    time ``[start + k·file_every, start + (k+1)·file_every)``) is written once the clock reaches
    ``clock.now() at the call + (k+1)·file_every``, so files appear at the live rate. Ctrl-C
    (SIGINT in the main thread) or a ``KeyboardInterrupt`` out of ``clock.sleep_until`` stops the
    run after the current file is written; a second Ctrl-C aborts at once. ``out_dir`` is created
    if needed and must not already hold event files: Spark's file source never re-reads a file
    name it has seen, so overwriting them would silently lose data.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    existing = sorted(out_dir.glob(f"{_FILE_PREFIX}*{_FILE_SUFFIX}"))
    if existing:
        raise FileExistsError(
            f"{out_dir} already holds {len(existing)} event files (e.g. {existing[0].name}); "
            "generate into an empty directory or delete them first"
        )
    stream = _TrendingStream(spec)
    file_every_s = spec.file_every.total_seconds()
    started = clock.now() if clock is not None else 0.0
    with (
        _stop_on_sigint() as stop,
        ProgressBar(spec.total_lines, "trending", enabled=None if progress else False) as bar,
    ):
        while not stop.is_set():
            lines = stream.next_file()
            if lines is None:
                break
            if clock is not None:
                try:
                    clock.sleep_until(started + stream.files * file_every_s)
                except KeyboardInterrupt:
                    stop.set()
            write_atomically(out_dir, event_file_name(stream.files - 1), lines)
            bar.update(len(lines))
    return stream.report(interrupted=stop.is_set())


class _TrendingStream:
    """The generator's runtime state: builds the lines of one file after another."""

    def __init__(self, spec: TrendingSpec) -> None:
        self._spec = spec
        self._rng = random.Random(spec.seed)
        rng = self._rng
        rate = Fraction(spec.rate)
        self._rate_num, self._rate_den = rate.numerator, rate.denominator
        per_file = spec.events_per_file
        self._per_file_num, self._per_file_den = per_file.numerator, per_file.denominator
        self._total = spec.total_lines
        self._start_ms = _to_ms(spec.start)
        self._rotate_ms = max(spec.rotate_every // _MS, 1)
        self._watermark_ms = spec.watermark // _MS
        self._window_ms = spec.window // _MS
        self._id_prefix = f"e{spec.seed}-"

        width = _article_width(spec)
        self._ranked = [f"a{n:0{width}d}" for n in range(1, spec.articles + 1)]
        rng.shuffle(self._ranked)
        cumulative = 0.0
        self._cum_weights: list[float] = []
        for rank in range(spec.articles):
            cumulative += 1.0 / (rank + 1) ** spec.skew
            self._cum_weights.append(cumulative)
        unknown_count = _unknown_count(spec)
        self._unknown = [
            f"a{n:0{width}d}" for n in range(spec.articles + 1, spec.articles + 1 + unknown_count)
        ]
        self._epoch = 0

        self._user_format = f"u{{:0{len(str(spec.users))}d}}".format
        pool = max(1, min(max(spec.users // 4, 1), int(spec.rate * _POOL_SECONDS)))
        self._readers = [self._new_user() for _ in range(pool)]

        self._second_text: dict[int, str] = {}
        self.files = 0
        self._prev_valid: list[str] = []  # the previous file's re-sendable (not late) lines
        self._prev_files_max: int | None = None  # max valid ts of all files so far
        self._older_files_max: int | None = None  # ... of all files but the last one
        self._max_ms: int | None = None
        self._min_ms: int | None = None
        self._lines = 0
        self._valid_unique = 0
        self._duplicates = 0
        self._late = 0
        self._out_of_order = 0
        self._unknown_article = 0
        self._malformed: dict[str, int] = dict.fromkeys(MALFORMED_KINDS, 0)

    def _boundary(self, index: int) -> int:
        """The first slot of file ``index``."""
        return index * self._per_file_num // self._per_file_den

    def _new_user(self) -> str:
        # Squaring a uniform draw favours low user numbers: a core of heavy readers.
        return self._user_format(int(self._spec.users * self._rng.random() ** 2) + 1)

    def _rotate(self) -> None:
        """A few stories from the long tail break and jump to the top of the ranking."""
        ranked = self._ranked
        tail_from = max(1, len(ranked) // 5)
        if tail_from >= len(ranked):
            return
        rng = self._rng
        count = min(rng.randint(1, _BREAKING_MAX), len(ranked) - tail_from)
        picked = sorted(rng.sample(range(tail_from, len(ranked)), count), reverse=True)
        breaking = [ranked.pop(position) for position in picked]
        rng.shuffle(breaking)
        ranked[:0] = breaking

    def _ts_text(self, ms: int, offset_s: int) -> str:
        second, millis = divmod(ms, 1000)
        second += offset_s
        text = self._second_text.get(second)
        if text is None:
            text = (_EPOCH + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S")
            self._second_text[second] = text
        return f"{text}.{millis:03d}"

    def next_file(self) -> list[str] | None:
        """The lines of the next file, or ``None`` when the run's bound is reached."""
        first = self._boundary(self.files)
        end = self._boundary(self.files + 1)
        if self._total is not None:
            end = min(end, self._total)
        if first >= end:
            return None
        spec = self._spec
        rng = self._rng
        random_ = rng.random
        start_ms = self._start_ms
        num_1000, den = self._rate_den * 1000, self._rate_num

        epoch = ((first * num_1000) // den) // self._rotate_ms
        while self._epoch < epoch:
            self._rotate()
            self._epoch += 1
        articles = rng.choices(self._ranked, cum_weights=self._cum_weights, k=end - first)
        if len(self._second_text) > 50_000:
            self._second_text.clear()

        malformed_below = spec.malformed
        duplicate_below = malformed_below + spec.duplicates
        late_below = duplicate_below + spec.late
        out_of_order_below = late_below + spec.out_of_order
        unknown_share = spec.unknown_article
        unknown = self._unknown
        readers = self._readers
        pool = len(readers)
        new_user = self._new_user
        ts_text = self._ts_text
        id_prefix = self._id_prefix
        watermark_ms = self._watermark_ms
        late_gap_ms = self._watermark_ms + self._window_ms
        window_ms = self._window_ms
        prev_valid = self._prev_valid
        older_files_max = self._older_files_max
        max_ms = self._max_ms
        min_ms = self._min_ms

        lines: list[str] = []
        valid: list[str] = []  # re-sendable: valid and not late
        valid_unique = late = out_of_order = unknown_article = duplicates = 0
        for offset, article in enumerate(articles):
            slot = first + offset
            nominal = start_ms + (slot * num_1000) // den
            u = random_()
            is_late = False
            if u < malformed_below:
                lines.append(self._malformed_line(slot, nominal, article))
                continue
            if u < duplicate_below:
                source = valid
                if prev_valid and (not valid or random_() < 0.5):
                    source = prev_valid
                if source:
                    lines.append(source[int(random_() * len(source))])
                    duplicates += 1
                    continue
                ts = nominal  # nothing to re-send yet: an ordinary event
            elif u < late_below and older_files_max is not None:
                ts = older_files_max - late_gap_ms - 1 - int(random_() * window_ms)
                late += 1
                is_late = True
            elif late_below <= u < out_of_order_below and max_ms is not None:
                # Skewed towards small delays; always within the watermark of the maximum.
                ts = max_ms - 1 - int((watermark_ms - 1) * random_() ** 2)
                out_of_order += 1
            else:
                ts = nominal
            if max_ms is None or ts > max_ms:
                max_ms = ts
            if min_ms is None or ts < min_ms:
                min_ms = ts

            if unknown_share and random_() < unknown_share:
                article = unknown[int(random_() * len(unknown))]
                unknown_article += 1
            reader = int(random_() * pool)
            if random_() < _SESSION_END:
                readers[reader] = new_user()
            encoding = random_()
            if encoding < _TS_Z_SHARE:
                ts_value = f"{ts_text(ts, 0)}Z"
            elif encoding < _TS_OFFSET_SHARE:
                zone, zone_s = _TS_OFFSETS[int(random_() * len(_TS_OFFSETS))]
                ts_value = f"{ts_text(ts, zone_s)}{zone}"
            else:
                ts_value = ts_text(ts, 0)
            line = (
                f'{{"event_id": "{id_prefix}{slot:010d}", "article_id": "{article}", '
                f'"user_id": "{readers[reader]}", "ts": "{ts_value}"}}'
            )
            lines.append(line)
            valid_unique += 1
            if not is_late:
                valid.append(line)

        self.files += 1
        self._lines += len(lines)
        self._valid_unique += valid_unique
        self._duplicates += duplicates
        self._late += late
        self._out_of_order += out_of_order
        self._unknown_article += unknown_article
        self._max_ms = max_ms
        self._min_ms = min_ms
        self._older_files_max = self._prev_files_max
        self._prev_files_max = max_ms
        self._prev_valid = valid or prev_valid
        return lines

    def _malformed_line(self, slot: int, nominal: int, article: str) -> str:
        rng = self._rng
        kind = MALFORMED_KINDS[rng.randrange(len(MALFORMED_KINDS))]
        self._malformed[kind] += 1
        event_id = f"{self._id_prefix}{slot:010d}"
        user = self._readers[rng.randrange(len(self._readers))]
        ts = f"{self._ts_text(nominal, 0)}Z"
        if kind == "not_json":
            whole = (
                f'{{"event_id": "{event_id}", "article_id": "{article}", '
                f'"user_id": "{user}", "ts": "{ts}"}}'
            )
            if rng.random() < 0.5:
                return whole[: rng.randrange(1, len(whole) - 1)]  # cut off mid-record
            return f"GET /articles/{article}?user={user} 200"
        if kind == "missing_event_id":
            return f'{{"article_id": "{article}", "user_id": "{user}", "ts": "{ts}"}}'
        if kind == "missing_article_id":
            return f'{{"event_id": "{event_id}", "user_id": "{user}", "ts": "{ts}"}}'
        if kind == "bad_ts":
            bad = _BAD_TS[rng.randrange(len(_BAD_TS))]
            return (
                f'{{"event_id": "{event_id}", "article_id": "{article}", '
                f'"user_id": "{user}", "ts": "{bad}"}}'
            )
        shape = f'{{"id": "{article}"}}' if rng.random() < 0.5 else f'["{article}"]'
        return (
            f'{{"event_id": "{event_id}", "article_id": {shape}, '
            f'"user_id": "{user}", "ts": "{ts}"}}'
        )

    def report(self, *, interrupted: bool) -> GenerationReport:
        return GenerationReport(
            spec=self._spec,
            total_lines=self._lines,
            valid_unique=self._valid_unique,
            duplicates=self._duplicates,
            malformed=sum(self._malformed.values()),
            late=self._late,
            out_of_order=self._out_of_order,
            unknown_article=self._unknown_article,
            files=self.files,
            first_event_time=None if self._min_ms is None else _from_ms(self._min_ms),
            last_event_time=None if self._max_ms is None else _from_ms(self._max_ms),
            interrupted=interrupted,
            malformed_kinds=dict(self._malformed),
        )


@contextlib.contextmanager
def _stop_on_sigint() -> Iterator[threading.Event]:
    """Turn the first SIGINT into a stop request; a second one raises ``KeyboardInterrupt``.

    Only the main thread can own signal handlers; elsewhere the event is never set by a signal.
    """
    stop = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def request_stop(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, request_stop)
    try:
        yield stop
    finally:
        signal.signal(
            signal.SIGINT, previous if previous is not None else signal.default_int_handler
        )


_SUBJECTS: dict[str, tuple[str, ...]] = {
    "world": ("Border talks", "Coastal cities", "Aid convoy", "Peace envoy", "Island nation"),
    "politics": ("Parliament", "Senate committee", "Coalition partners", "Opposition leader"),
    "business": ("Central bank", "Chipmaker", "Retail giant", "Shipping firms", "Pension funds"),
    "tech": ("Cloud provider", "Open-source project", "Phone maker", "Security researchers"),
    "science": ("Astronomers", "Marine biologists", "Climate scientists", "Physicists"),
    "sport": ("Home side", "Veteran striker", "Relay team", "Title favourites", "Cycling team"),
    "culture": ("Indie film", "Veteran novelist", "City museum", "Jazz festival", "Opera house"),
    "opinion": ("Our cities", "The housing market", "Remote work", "Small farms", "Public radio"),
}
_VERBS: tuple[str, ...] = (
    "unveils",
    "rethinks",
    "faces",
    "backs",
    "warns over",
    "bets on",
    "rejects",
    "wins over",
    "doubles down on",
    "delays",
    "braces for",
    "celebrates",
)
_OBJECTS: tuple[str, ...] = (
    "new rules",
    "a record year",
    "a surprise deal",
    "rising costs",
    "a bold plan",
    "fresh data",
    "its critics",
    "a long-awaited return",
    "fresh doubts",
    "the next decade",
    "a storm",
    "a quiet revolution",
)


def _headline(rng: random.Random, section: str) -> str:
    subjects = _SUBJECTS[section]
    subject = subjects[rng.randrange(len(subjects))]
    verb = _VERBS[rng.randrange(len(_VERBS))]
    if subject.endswith("s"):  # plural subject: "Astronomers unveil", not "unveils"
        head, _, rest = verb.partition(" ")
        verb = f"{head[:-1]} {rest}".rstrip()
    obj = _OBJECTS[rng.randrange(len(_OBJECTS))]
    return f"{subject} {verb} {obj}"


def _unknown_count(spec: TrendingSpec) -> int:
    return max(10, spec.articles // 10)


def _article_width(spec: TrendingSpec) -> int:
    return max(4, len(str(spec.articles + _unknown_count(spec))))


def _to_ms(moment: datetime) -> int:
    return (moment - _EPOCH) // _MS


def _from_ms(ms: int) -> datetime:
    return _EPOCH + timedelta(milliseconds=ms)


def _iso_ms(ms: int) -> str:
    second, millis = divmod(ms, 1000)
    return f"{(_EPOCH + timedelta(seconds=second)).strftime('%Y-%m-%dT%H:%M:%S')}.{millis:03d}Z"


def _iso_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else _iso_ms(_to_ms(moment))


def _check_int(
    value: object, name: str, *, minimum: int | None, none_allowed: bool = False
) -> None:
    allowed = "an integer" if minimum is None else f"an integer >= {minimum}"
    if none_allowed:
        allowed += " or None"
    if isinstance(value, bool) or not isinstance(value, int):
        raise SpecError(name, value, allowed)
    if minimum is not None and value < minimum:
        raise SpecError(name, value, allowed)


def _check_positive_number(value: object, name: str) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not (math.isfinite(value) and value > 0)
    ):
        raise SpecError(name, value, "a finite number > 0")


def _check_positive_duration(value: object, name: str, *, none_allowed: bool = False) -> None:
    allowed = "a timedelta > 0" + (" or None" if none_allowed else "")
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise SpecError(name, value, allowed)


def _duration_text(value: timedelta) -> str:
    micros = value // _US
    if micros == 0:
        return "0s"
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    for unit, size in (("h", 3_600_000_000), ("m", 60_000_000), ("s", 1_000_000), ("ms", 1000)):
        if micros % size == 0:
            return f"{sign}{micros // size}{unit}"
    return f"{sign}{micros / 1_000_000:g}s"


def _value_text(value: object) -> str:
    if isinstance(value, timedelta):
        return _duration_text(value)
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value)
