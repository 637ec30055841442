"""How the trending generator makes its events: the article catalog, the readers' sessions,
breaking news, and each kind of dirt (out-of-order, late, duplicate and malformed lines), one
file at a time. `generators/trending.py` paces and writes it."""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from fractions import Fraction
from typing import NamedTuple

from slipstream.tools.generators.trending_spec import (
    EPOCH,
    MALFORMED_KINDS,
    MS,
    SECTIONS,
    GenerationReport,
    TrendingSpec,
    from_ms,
    to_ms,
)

FILE_PREFIX = "views-"
FILE_SUFFIX = ".jsonl"

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


class Article(NamedTuple):
    article_id: str
    title: str
    section: str
    published_at: datetime


def event_file_name(index: int) -> str:
    """The name of the ``index``-th event file; lexical order is time order."""
    return f"{FILE_PREFIX}{index:08d}{FILE_SUFFIX}"


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


class TrendingStream:
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
        self._start_ms = to_ms(spec.start)
        self._rotate_ms = max(spec.rotate_every // MS, 1)
        self._watermark_ms = spec.watermark // MS
        self._window_ms = spec.window // MS
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
            text = (EPOCH + timedelta(seconds=second)).strftime("%Y-%m-%dT%H:%M:%S")
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
            first_event_time=None if self._min_ms is None else from_ms(self._min_ms),
            last_event_time=None if self._max_ms is None else from_ms(self._max_ms),
            interrupted=interrupted,
            malformed_kinds=dict(self._malformed),
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
