"""The trending generator's specification and report: what to generate (`TrendingSpec`,
validated on construction, errors naming the field) and exactly what was written
(`GenerationReport`). The generator itself is `generators/trending.py`."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, get_args

from slipstream.core.files import write_atomically
from slipstream.errors import ConfigError

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

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MS = timedelta(milliseconds=1)
_US = timedelta(microseconds=1)
_DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)


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
                out[key] = _iso_ms(to_ms(value))
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


def to_ms(moment: datetime) -> int:
    return (moment - EPOCH) // MS


def from_ms(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def _iso_ms(ms: int) -> str:
    second, millis = divmod(ms, 1000)
    return f"{(EPOCH + timedelta(seconds=second)).strftime('%Y-%m-%dT%H:%M:%S')}.{millis:03d}Z"


def _iso_or_none(moment: datetime | None) -> str | None:
    return None if moment is None else _iso_ms(to_ms(moment))


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
