"""Frozen, self-validating descriptions of durations, triggers and sinks.

They are parsed once at the edge (CLI flags, TOML) and turned into Spark calls elsewhere
(`slipstream.runtime.runner`, `slipstream.sinks`). Nothing here imports Spark."""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from slipstream.core.kafka_url import KafkaTopic
from slipstream.errors import ConfigError

OutputMode = Literal["append", "update", "complete"]
OUTPUT_MODES: tuple[OutputMode, ...] = ("append", "update", "complete")

_UNITS = {
    "ms": 0.001, "msec": 0.001, "millisecond": 0.001, "milliseconds": 0.001,
    "s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1,
    "m": 60, "min": 60, "mins": 60, "minute": 60, "minutes": 60,
    "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600,
    "d": 86400, "day": 86400, "days": 86400,
}  # fmt: skip
#: ASCII digits only: `\d` would take fullwidth or Arabic-Indic digits ("１０m")
_DURATION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]+)\s*$", re.ASCII)
DURATION_HELP = "a duration such as 90s, 10m, 1h, 500ms or '10 minutes'"
#: the longest duration any setting or parameter takes: longer ones are a typo, and Python's
#: timedelta overflows (a traceback) at about 2.7 million years
MAX_DURATION = timedelta(days=3650)
#: how far after the batch's time an event time may be (`--max-future`; ingest/guard.py)
DEFAULT_MAX_FUTURE = timedelta(days=1)


def parse_duration(text: str | timedelta) -> timedelta:
    """Parse `10m`, `90s`, `1h`, `500ms`, `10 minutes` into a timedelta: positive, a whole
    number of milliseconds (Spark's intervals are in ms; 0.4ms would silently become 0) and at
    most ten years."""
    if isinstance(text, timedelta):
        value = text
    elif not isinstance(text, str):
        # a bare TOML number (`window = 1.5`, `600`) has no unit: seconds? minutes? Refused,
        # so it cannot silently mean 1.5 s or 10 minutes
        raise ValueError(f"{DURATION_HELP}: a text with its unit, not a bare number")
    else:
        match = _DURATION.match(str(text))
        if not match or match.group(2).lower() not in _UNITS:
            raise ValueError(DURATION_HELP)
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
        if seconds > MAX_DURATION.total_seconds():
            raise ValueError(f"a duration of at most {MAX_DURATION.days} days")
        value = timedelta(seconds=seconds)
    if value > MAX_DURATION:
        raise ValueError(f"a duration of at most {MAX_DURATION.days} days")
    if value <= timedelta(0):
        raise ValueError("a positive duration")
    if value % timedelta(milliseconds=1):
        raise ValueError("a whole number of milliseconds (Spark's intervals are in ms)")
    return value


def spark_interval(value: timedelta) -> str:
    """The edge: a timedelta as the interval string Spark expects ('600 seconds')."""
    ms = round(value.total_seconds() * 1000)
    if ms % 1000 == 0:
        return f"{ms // 1000} seconds"
    return f"{ms} milliseconds"


def format_duration(value: timedelta) -> str:
    seconds = value.total_seconds()
    for unit, size in (("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{round(seconds * 1000)}ms"


TriggerKind = Literal["default", "interval", "available-now", "once", "continuous", "real-time"]
TRIGGER_HELP = (
    "default, an interval (1s, 5s), available-now, once, continuous:INTERVAL, or real-time "
    "(real-time:INTERVAL: its epoch, 5m unless given)"
)
#: the epoch (checkpoint interval) of `--trigger real-time`: Spark's own default. Each epoch's end
#: pauses the query while Spark commits and plans the next (1.1-1.8 s on a quiet 2-core
#: machine, docs/benchmarks.md section 28), so a long epoch keeps that pause out of all but a
#: few records' latency; a short one replays less after a crash
REAL_TIME_EPOCH = timedelta(minutes=5)


@dataclass(frozen=True)
class DeltaFolder:
    """`--quarantine delta:DIR`, `--dead-letter delta:DIR`: the records kept as Delta tables
    (one per input, one per output) under `path`, written as the Delta sink writes
    (sinks/delta.py), on the Spark line Delta runs on (core/spark_line.py)."""

    path: Path

    def __str__(self) -> str:
        return f"delta:{self.path}"


@dataclass(frozen=True)
class TriggerSpec:
    kind: TriggerKind = "default"
    interval: timedelta | None = None

    @classmethod
    def parse(cls, text: str | TriggerSpec) -> TriggerSpec:
        if isinstance(text, TriggerSpec):
            return text
        raw = str(text).strip().lower()
        if raw in ("", "default"):
            return cls("default")
        if raw in ("available-now", "availablenow", "available_now"):
            return cls("available-now")
        if raw == "once":
            return cls("once")
        for kind in ("continuous", "real-time"):
            if raw.startswith(kind + ":"):
                return cls(kind, parse_duration(raw.split(":", 1)[1]))
        if raw == "real-time":
            return cls("real-time", REAL_TIME_EPOCH)
        if raw == "continuous":
            raise ValueError(f"{raw} needs an interval, e.g. {raw}:1s")
        try:
            return cls("interval", parse_duration(raw))
        except ValueError:
            raise ValueError(TRIGGER_HELP) from None

    @classmethod
    def parse_micro_batch(cls, text: str | TriggerSpec) -> TriggerSpec:
        """A trigger that runs micro-batches on and on: `default` or an interval."""
        spec = cls.parse(text)
        if spec.kind not in ("default", "interval"):
            raise ValueError("default, or an interval such as 10s")
        return spec

    @property
    def finite(self) -> bool:
        """True when the query stops by itself after the data available at start."""
        return self.kind in ("available-now", "once")

    def describe(self) -> str:
        if self.interval is None:
            return self.kind
        if self.kind == "interval":
            return f"every {format_duration(self.interval)}"
        return f"{self.kind}:{format_duration(self.interval)}"


class Secret:
    """A value that never shows itself in logs, errors, reprs or progress output."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True)
class SinkKind:
    """What the layers below the sinks (settings, this module) know of one kind of sink, by the
    scheme that starts its spec: what follows the scheme, how `--help` shows it, whether it
    writes files into a folder (`file`), whether its target is a local path (made absolute for
    a Spark Connect server), why a Spark Connect client cannot use it (`connect_refusal`:
    why, fix), and the options its spec takes after `?` (`options`: Spark's own names).
    Declared by each sink class (sinks/base.py) and added here by sinks/registry.py, so this
    module never names a sink."""

    target: Literal["none", "optional", "required", "url", "module"]
    usage: str
    file: bool = False
    local_path: bool = False
    connect_refusal: tuple[str, str] | None = None
    options: tuple[str, ...] = ()


#: Every sink kind, by scheme, in the order `--help` lists them: filled by sinks/registry.py
#: (which finds the sink classes) through `add_sink_kind`; read it with `sink_kinds()`.
SINK_KINDS: dict[str, SinkKind] = {}
#: whether the package root's `load_sinks` ran (see `sink_kinds`)
_LOADED: list[bool] = []


def add_sink_kind(kind: str, grammar: SinkKind) -> None:
    SINK_KINDS[kind] = grammar


def sink_kinds() -> dict[str, SinkKind]:
    """Every sink kind. The first call has the package root (slipstream/__init__.py, above
    every room, already imported as this module's parent) load sinks/registry.py, so that
    settings parse `--sink` even in a program that has not imported the sinks; the root
    imports nothing itself, so `python -m slipstream` holds a Ctrl-C before any import."""
    if not _LOADED:
        _LOADED.append(True)
        load = getattr(sys.modules.get("slipstream"), "load_sinks", None)
        if load is not None:
            load()
    return SINK_KINDS


def sink_help() -> str:
    """Every sink's spec as `--sink` takes it, for help and messages."""
    return ", ".join(kind.usage for kind in sink_kinds().values())


@dataclass(frozen=True)
class SinkSpec:
    """Where results go. `target` is a directory, a database file, a DSN or a module:attr.

    A kind that is not a URL (`postgresql://`, `kafka://` keep their options in their URL)
    takes Spark's options of its writer as a URL's query after `?`: `KIND[:TARGET]?NAME=VALUE&
    NAME=VALUE`, e.g. `parquet:/out?compression=zstd&partitionBy=action`,
    `console?numRows=20&truncate=false`. A name its kind does not declare is refused."""

    kind: str  # a scheme of SINK_KINDS (a sink class's `kind`)
    target: str | None = None
    password: Secret | None = field(default=None, compare=False)
    options: tuple[tuple[str, str], ...] = ()  # (Spark's option name, value), as given

    @classmethod
    def parse(cls, text: str | SinkSpec) -> SinkSpec:
        if isinstance(text, SinkSpec):
            return text
        raw = str(text).strip()
        if raw.startswith(("postgresql://", "postgres://")):
            usage = "postgresql://user[:password]@host[:port]/db"
            rest = raw.split("://", 1)[1]
            authority_end = min((rest.find(c) for c in "/?#" if c in rest), default=len(rest))
            if "@" in rest[authority_end:]:  # a '/', '?' or '#' inside user:password
                raise ValueError(
                    f"{usage}, with '/', '?', '#' and '@' in the password percent-encoded "
                    "(%2F, %3F, %23, %40)"
                )
            try:
                parts = urlsplit(raw)
                hostname, port = parts.hostname, parts.port
            except ValueError:  # urllib's message can quote part of the password
                raise ValueError(usage + " (the port must be a number)") from None
            if not hostname or not parts.path.strip("/"):
                raise ValueError(usage)
            password = Secret(unquote(parts.password)) if parts.password else None
            netloc = hostname
            if parts.username:
                netloc = f"{unquote(parts.username)}@{netloc}"
            if port:
                netloc += f":{port}"
            target = f"postgresql://{netloc}{parts.path}"
            if parts.query:
                target += f"?{parts.query}"
            return cls("postgresql", target, password)
        if raw.lower().startswith("kafka://"):
            KafkaTopic.parse(raw, "sink")  # refused here when it is not a Kafka sink URL
            return cls("kafka", raw)
        raw, question, query = raw.partition("?")
        scheme, _, target = raw.partition(":")
        kind = sink_kinds().get(scheme.lower())
        if kind is None:
            raise ValueError(sink_help())
        options = sink_options(scheme.lower(), kind, query) if question else ()
        if not target and kind.target in ("none", "optional", "url"):
            return cls(scheme.lower(), options=options)
        if kind.target == "optional" or (kind.target == "required" and target):
            return cls(scheme.lower(), target, options=options)
        if kind.target == "module" and ":" in target:
            return cls(scheme.lower(), target, options=options)
        raise ValueError(kind.usage)

    @property
    def option_map(self) -> dict[str, str]:
        return dict(self.options)

    @property
    def is_file_sink(self) -> bool:
        kind = sink_kinds().get(self.kind)
        return kind is not None and kind.file

    @property
    def has_local_path(self) -> bool:
        """Whether `target` names a file or folder on this machine."""
        kind = sink_kinds().get(self.kind)
        return kind is not None and kind.local_path

    @property
    def connect_refusal(self) -> tuple[str, str] | None:
        """Why a Spark Connect client cannot write this sink, and the fix; None when it can."""
        kind = sink_kinds().get(self.kind)
        return None if kind is None else kind.connect_refusal

    def describe(self) -> str:
        """Shown in `check`, logs and errors: never includes a password."""
        if self.kind == "kafka" and self.target:
            return KafkaTopic.parse(self.target, "sink").describe()  # secret options hidden
        text = (
            f"{self.kind}:{self.target}"
            if self.target and self.kind != "postgresql"
            else (self.target or self.kind)
        )
        return f"{text}?{urlencode(self.options, safe=',:/')}" if self.options else text

    def path(self) -> Path:
        assert self.target is not None
        return Path(self.target)


def sink_options(scheme: str, kind: SinkKind, query: str) -> tuple[tuple[str, str], ...]:
    """The `NAME=VALUE&...` after a sink spec's `?`, each name one its kind declares."""
    if not kind.options:
        raise ValueError(f"the {scheme} sink takes no options (after '?')")
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise ValueError(f"{kind.usage}?NAME=VALUE&NAME=VALUE (got ?{query})") from None
    for name, _value in pairs:
        if name not in kind.options:
            raise ValueError(
                f"the {scheme} sink has no option {name!r}; its options: " + ", ".join(kind.options)
            )
    names = [name for name, _ in pairs]
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"sink option(s) {', '.join(repeated)} given twice")
    return tuple(pairs)


MAX_WINDOWS_PER_EVENT = 60


def check_windows(window: timedelta, slide: timedelta | None) -> None:
    """Before Spark starts: a window and its slide that Spark takes and that do not blow up.
    Each event counts in ceil(window / slide) windows; beyond MAX_WINDOWS_PER_EVENT the state
    and the output grow faster than the input for no visible gain."""
    for name, value in (("window", window), ("slide", slide)):
        if value is not None and value % timedelta(milliseconds=1):
            raise ConfigError(
                "CONFIG_BAD_VALUE",
                f"--{name} {value} is not a whole number of milliseconds",
                f"give --{name} in ms, s, m or h",
            )
    if slide is None:
        return
    if slide > window:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--slide must be no longer than --window; got slide={format_duration(slide)}, "
            f"window={format_duration(window)}",
            f"use --slide {format_duration(window)} or less (equal gives tumbling windows)",
        )
    per_event = -(-window // slide)
    if per_event > MAX_WINDOWS_PER_EVENT:
        raise ConfigError(
            "CONFIG_BAD_VALUE",
            f"--slide {format_duration(slide)} puts every event in {per_event} windows of "
            f"--window {format_duration(window)} (at most {MAX_WINDOWS_PER_EVENT})",
            f"use --slide {format_duration(window / MAX_WINDOWS_PER_EVENT)} or longer",
        )
