"""What the record generators' engine (generators/streams.py) works with: a workload's streams
(`Shape`) and records (`Record`, `Workload`), the spec of a generated stream (`StreamSpec`: span,
seed, file span and the shares of out-of-order, late, duplicate and malformed records) and the
report of what was written (`StreamCounts`, `Report`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from slipstream.errors import ConfigError

REPORT_NAME = "_generation-report.json"
DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
DIRT = ("out_of_order", "late", "duplicates", "malformed")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def report_beside(out_dir: Path) -> Path:
    """The report's default place: beside the stream folder, never inside it (`landing/views`
    -> `landing/views_generation-report.json`), where a reader of the folder would meet it."""
    folder = Path(out_dir).resolve()
    return folder.parent / f"{folder.name}{REPORT_NAME}"


def late_note(late: int, made: str, each_own_batch: str) -> str:
    """What the generator's `late` count means, and how a run's count relates to it."""
    return (
        f"late: {late:,} events made late ({made}); a run drops them as late and writes them "
        f"to its dead-letter {each_own_batch}; with several files per batch it drops fewer "
        "(the watermark moves once per batch) and counts the others as valid, so the run's "
        f"late count is at most {late:,}"
    )


def iso_ms(ms: int) -> str:
    """`2026-01-01T00:00:05.123Z`: ISO-8601, milliseconds, UTC."""
    moment = _EPOCH + timedelta(milliseconds=ms)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def to_ms(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)


@dataclass(frozen=True)
class Shape:
    """One stream of a workload: its folder (under OUT when the workload has several), file
    prefix, event-time field and its text form, the fields a record must have, and the
    numeric fields (sent as a string to make `wrong_type`)."""

    name: str
    time_field: str
    required: tuple[str, ...]
    numeric: tuple[str, ...]
    time_text: Callable[[int], str] = iso_ms
    #: the longest transit delay of an out-of-order record (None: half the watermark)
    max_delay: timedelta | None = None


class Record(NamedTuple):
    stream: str
    event_ms: int
    fields: dict[str, Any]


class Workload(Protocol):
    name: str

    @property
    def shapes(self) -> tuple[Shape, ...]:
        """The record shapes it makes (read only, so a workload may name exactly its own)."""
        ...

    def records(self, rng: random.Random, start_ms: int, end_ms: int) -> Iterable[Record]:
        """The records with event time in `[start_ms, end_ms)`, in event-time order; called
        for consecutive spans. The engine writes the time field from `event_ms` (where the
        record has that key, in its place; else last)."""
        ...

    def info(self) -> dict[str, Any]:
        """What the report adds about this workload (for example the misbehaving sensors)."""
        ...


@dataclass(frozen=True)
class StreamSpec:
    duration: timedelta = timedelta(hours=1)
    seed: int = 1
    start: datetime = DEFAULT_START
    file_every: timedelta = timedelta(seconds=30)
    watermark: timedelta = timedelta(minutes=10)
    window: timedelta = timedelta(minutes=5)
    out_of_order: float = 0.05
    late: float = 0.01
    duplicates: float = 0.01
    malformed: float = 0.01

    def __post_init__(self) -> None:
        for name in ("duration", "file_every", "watermark", "window"):
            if getattr(self, name) <= timedelta(0):
                raise bad(name, getattr(self, name), "a positive duration")
        total = 0.0
        for name in DIRT:
            share = getattr(self, name)
            if not 0 <= share <= 1:
                raise bad(name, share, "a share between 0 and 1")
            total += share
        if total > 0.9:
            raise bad("malformed", total, "shares adding up to at most 0.9")
        if self.start.tzinfo is None:
            raise bad("start", self.start, "a time with a zone")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in self.__dict__.items():
            if isinstance(value, timedelta):
                out[key] = value.total_seconds()
            elif isinstance(value, datetime):
                out[key] = iso_ms(to_ms(value))
            else:
                out[key] = value
        return out


@dataclass
class StreamCounts:
    lines: int = 0
    valid_unique: int = 0
    duplicates: int = 0
    malformed: int = 0
    late: int = 0
    out_of_order: int = 0
    files: int = 0
    malformed_kinds: dict[str, int] = field(default_factory=dict)
    first_event_ms: int | None = None
    last_event_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        for key in ("first_event_ms", "last_event_ms"):
            value = out.pop(key)
            out[key.replace("_ms", "_time")] = None if value is None else iso_ms(value)
        return out


@dataclass(frozen=True)
class Report:
    workload: str
    spec: StreamSpec
    streams: dict[str, StreamCounts]
    info: dict[str, Any]
    interrupted: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "streams": {name: counts.to_dict() for name, counts in self.streams.items()},
            "info": self.info,
            "interrupted": self.interrupted,
            "spec": self.spec.to_dict(),
        }

    @property
    def total_lines(self) -> int:
        return sum(c.lines for c in self.streams.values())


def bad(name: str, value: object, allowed: str) -> ConfigError:
    flag = "--" + name.replace("_", "-")
    return ConfigError(
        "CONFIG_BAD_VALUE", f"{flag} must be {allowed}; got {value!r}", f"give {flag} {allowed}"
    )
